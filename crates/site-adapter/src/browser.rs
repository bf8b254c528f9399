//! [`BrowserSite`]: the simulated shop worked through headless Chromium the way a person works
//! it — open the page, pick the variant, type the quantity and the remark, press the button —
//! with a screenshot of the page every step ends on. Values are read from the page's state
//! (`trading_worker::site::sim`'s readers, shared with the HTTP seam); the HTTP status comes
//! from the browser's Navigation Timing entry.
//!
//! After pressing an irreversible button (place the order, pay), any page but the confirmation
//! is 5006, never 5002: the order may exist, so the worker verifies instead of taking it for a
//! refusal ([`lost`]).

// A `SiteError` carries the page it failed on (evidence), large by design.
#![allow(clippy::result_large_err)]

use std::time::Duration;

use async_trait::async_trait;
use fantoccini::Locator;
use fantoccini::error::CmdError;
use rakuten_types::query::OrderDetailResult;
use tokio::sync::Mutex;
use trading_worker::site::sim::{
    cart_view, confirm_view, order_detail_of, order_list_page, pay_outcome, read_page,
    submitted_order, urlencode,
};
use trading_worker::site::{
    CartLine, CartView, ConfirmView, OrderListPage, PageSnapshot, PayOutcome, Site, SiteError,
    SiteErrorKind, Step,
};

use crate::driver::{Browser, BrowserPaths};

/// The HTTP status of the page shown, from Navigation Timing (0: no response, e.g. an error page).
const STATUS_JS: &str = "const e = performance.getEntriesByType('navigation')[0]; return e && e.responseStatus ? e.responseStatus : 0;";

/// A property set on the page's `window` before a press; a new document does not have it.
const PRESSED_MARK: &str = "__rakutenAdapterPressed";

/// How long a press may take to show its page (the driver's page-load bound).
const NAVIGATION_BOUND: Duration = Duration::from_secs(20);

/// The simulated shop in a browser.
#[derive(Debug)]
pub struct BrowserSite {
    base: String,
    /// One tab: one step at a time.
    browser: Mutex<Option<Browser>>,
}

impl BrowserSite {
    /// Starts Chromium, opens the shop at `base` and logs in with the session cookie `session`.
    ///
    /// # Errors
    /// The browser does not start, or the shop does not answer.
    pub async fn start(base: &str, session: &str, paths: &BrowserPaths) -> anyhow::Result<Self> {
        let base = base.trim_end_matches('/').to_owned();
        let browser = Browser::start(paths).await?;
        let c = &browser.client;
        // The session cookie, set by the page itself (chromedriver's add-cookie insists on a
        // domain, which an IP host cannot carry).
        let login = async {
            c.goto(&format!("{base}/")).await?;
            c.execute(
                "document.cookie = 'session=' + encodeURIComponent(arguments[0]) + '; path=/; SameSite=Lax';",
                vec![serde_json::Value::String(session.to_owned())],
            )
            .await
        };
        if let Err(e) = login.await {
            browser.close().await;
            anyhow::bail!("opening the shop at {base}: {e}");
        }
        Ok(BrowserSite {
            base,
            browser: Mutex::new(Some(browser)),
        })
    }

    /// Closes the browser (Chromium and chromedriver end).
    pub async fn close(&self) {
        if let Some(b) = self.browser.lock().await.take() {
            b.close().await;
        }
    }
}

/// A WebDriver failure as a site failure: a timeout is 5007, anything else 5006.
fn driver_err(what: &str, e: CmdError) -> SiteError {
    let kind = match &e {
        CmdError::WaitTimeout => SiteErrorKind::Timeout,
        CmdError::Standard(w) if w.error == fantoccini::error::ErrorStatus::Timeout => {
            SiteErrorKind::Timeout
        }
        _ => SiteErrorKind::Unavailable,
    };
    SiteError::new(kind, format!("browser: {what}: {e}"))
}

/// One step's work in the tab.
struct Tab<'a> {
    c: &'a fantoccini::Client,
    base: &'a str,
}

impl Tab<'_> {
    /// Opens `path` (GET) and reads the page.
    async fn open(&self, path: &str) -> Result<(PageSnapshot, serde_json::Value), SiteError> {
        let url = format!("{}{path}", self.base);
        self.c
            .goto(&url)
            .await
            .map_err(|e| driver_err(&format!("GET {url}"), e))?;
        read_page(self.snapshot("GET").await?)
    }

    /// The page shown now, with its screenshot.
    async fn snapshot(&self, method: &str) -> Result<PageSnapshot, SiteError> {
        let url = self
            .c
            .current_url()
            .await
            .map_err(|e| driver_err("current url", e))?;
        let html = self
            .c
            .source()
            .await
            .map_err(|e| driver_err("page source", e))?;
        let status = self
            .c
            .execute(STATUS_JS, vec![])
            .await
            .map_err(|e| driver_err("navigation status", e))?
            .as_u64()
            .unwrap_or(0);
        let png = self
            .c
            .screenshot()
            .await
            .map_err(|e| driver_err("screenshot", e))?;
        Ok(PageSnapshot {
            url: url.to_string(),
            method: method.to_owned(),
            http_status: u16::try_from(status).unwrap_or(0),
            html: Some(html),
            png: Some(png),
        })
    }

    /// Finds `css` on the current page; missing is 5002 (the page is not what the step expects).
    async fn find(
        &self,
        css: &str,
        page: &PageSnapshot,
    ) -> Result<fantoccini::elements::Element, SiteError> {
        self.c.find(Locator::Css(css)).await.map_err(|e| SiteError {
            kind: SiteErrorKind::UnexpectedPage,
            message: format!("{}: no {css} on the page ({e})", page.url),
            page: Some(page.clone()),
        })
    }

    /// Waits until the marked document has been replaced by a loaded one, for at most
    /// [`NAVIGATION_BOUND`]; past it, a 5007 timeout (after an irreversible button: unknown).
    async fn wait_for_new_document(&self) -> Result<(), SiteError> {
        let probe =
            format!("return window.{PRESSED_MARK} !== true && document.readyState === 'complete';");
        let deadline = tokio::time::Instant::now() + NAVIGATION_BOUND;
        loop {
            // A script run while the navigation commits may fail: that is "not yet".
            if let Ok(serde_json::Value::Bool(true)) = self.c.execute(&probe, vec![]).await {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(SiteError::new(
                    SiteErrorKind::Timeout,
                    format!(
                        "browser: no new page within {} s of the press",
                        NAVIGATION_BOUND.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Presses a button that changes something, then reads the page it leads to (a POST).
    async fn press(
        &self,
        css: &str,
        page: &PageSnapshot,
        irreversible: bool,
    ) -> Result<(PageSnapshot, serde_json::Value), SiteError> {
        let button = self.find(css, page).await?;
        // Marks this document, so that the page read after the click is the one the button
        // led to: chromedriver's click does not always wait for the navigation it starts
        // (Chromium 156.0.8078.114 returned before it, and the step read the form page again).
        self.c
            .execute(
                &format!("window.{PRESSED_MARK} = true; return true;"),
                vec![],
            )
            .await
            .map_err(|e| driver_err("marking the page", e))?;
        button
            .click()
            .await
            .map_err(|e| driver_err(&format!("pressing {css}"), e))?;
        let snap = match self.wait_for_new_document().await {
            Ok(()) => self.snapshot("POST").await,
            Err(e) => Err(e),
        };
        if irreversible {
            snap.and_then(read_page).map_err(|e| lost(css, e))
        } else {
            read_page(snap?)
        }
    }
}

/// After an irreversible button, anything but the confirmation page is "no answer" (5006):
/// Chromium re-sends a POST whose connection closed without a response (the kit's
/// dropped-answer check shows it: the re-sent submit meets an empty cart and the shop's error
/// page), so an error page there does not prove that nothing happened (D-browser-adapter-needs-confirmation).
fn lost(css: &str, mut e: SiteError) -> SiteError {
    if !e.kind.is_ambiguous() {
        e.message = format!(
            "no confirmation after pressing {css} ({:?}: {}); the browser may have re-sent the request, so whether it took effect is unknown",
            e.kind, e.message
        );
        e.kind = SiteErrorKind::Unavailable;
    }
    e
}

#[async_trait]
impl Site for BrowserSite {
    fn name(&self) -> &'static str {
        "shop-sim-browser"
    }

    fn account(&self) -> &str {
        &self.base
    }

    async fn cart_add(&self, line: &CartLine) -> Result<Step<()>, SiteError> {
        let g = self.browser.lock().await;
        let t = tab(&g, &self.base)?;
        // Start from an empty cart, like the HTTP seam: leftovers are never ordered along.
        let (cart, _) = t.open("/cart").await?;
        if t.c.find(Locator::Css("#clear-cart")).await.is_ok() {
            t.press("#clear-cart", &cart, false).await?;
        }
        let (item, _) = t.open(&format!("/items/{}", line.item_id)).await?;
        if let Some(v) = &line.variant_id {
            t.find("#variant_id", &item)
                .await?
                .select_by_value(v)
                .await
                .map_err(|e| SiteError {
                    kind: SiteErrorKind::UnexpectedPage,
                    message: format!("variant {v:?} is not offered: {e}"),
                    page: Some(item.clone()),
                })?;
        }
        let qty = t.find("#quantity", &item).await?;
        qty.clear().await.map_err(|e| driver_err("quantity", e))?;
        qty.send_keys(&line.quantity.to_string())
            .await
            .map_err(|e| driver_err("quantity", e))?;
        let (page, _) = t.press("#add-to-cart-button", &item, false).await?;
        Ok(Step { value: (), page })
    }

    async fn cart_check(&self) -> Result<Step<CartView>, SiteError> {
        let g = self.browser.lock().await;
        let t = tab(&g, &self.base)?;
        let (page, st) = t.open("/cart").await?;
        cart_view(page, &st)
    }

    async fn order_confirm(&self) -> Result<Step<ConfirmView>, SiteError> {
        let g = self.browser.lock().await;
        let t = tab(&g, &self.base)?;
        let (cart, _) = t.open("/cart").await?;
        t.find("#to-confirm", &cart)
            .await?
            .follow()
            .await
            .map_err(|e| driver_err("to the confirm page", e))?;
        let (page, st) = read_page(t.snapshot("GET").await?)?;
        confirm_view(page, &st)
    }

    async fn order_submit(
        &self,
        confirm: &ConfirmView,
        note: &str,
    ) -> Result<Step<String>, SiteError> {
        let g = self.browser.lock().await;
        let t = tab(&g, &self.base)?;
        let (page, st) = t.open("/order/confirm").await?;
        let shown = confirm_view(page.clone(), &st)?;
        if shown.value.payable_yen != confirm.payable_yen {
            return Err(SiteError {
                kind: SiteErrorKind::UnexpectedPage,
                message: format!(
                    "the confirm page now shows {} yen, not the {} yen the amount guard accepted: not submitted",
                    shown.value.payable_yen, confirm.payable_yen
                ),
                page: Some(page),
            });
        }
        let field = t.find("#note", &page).await?;
        field.clear().await.map_err(|e| driver_err("remark", e))?;
        field
            .send_keys(note)
            .await
            .map_err(|e| driver_err("remark", e))?;
        let (page, st) = t.press("#place-order", &page, true).await?;
        submitted_order(page, &st).map_err(|e| lost("#place-order", e))
    }

    async fn pay(
        &self,
        site_order_id: &str,
        _task_id: &str,
    ) -> Result<Step<PayOutcome>, SiteError> {
        let g = self.browser.lock().await;
        let t = tab(&g, &self.base)?;
        let (page, _) = t
            .open(&format!("/orders/{}", urlencode(site_order_id)))
            .await?;
        let (page, st) = t.press("#pay", &page, true).await?;
        pay_outcome(page, &st).map_err(|e| lost("#pay", e))
    }

    async fn list_orders(&self, page_no: u32) -> Result<Step<OrderListPage>, SiteError> {
        let g = self.browser.lock().await;
        let t = tab(&g, &self.base)?;
        let (page, st) = t.open(&format!("/orders?page={page_no}")).await?;
        order_list_page(page, &st)
    }

    async fn order_detail(&self, order_number: &str) -> Result<Step<OrderDetailResult>, SiteError> {
        let g = self.browser.lock().await;
        let t = tab(&g, &self.base)?;
        let (page, st) = t
            .open(&format!("/orders/{}", urlencode(order_number)))
            .await?;
        order_detail_of(order_number, page, &st)
    }
}

fn tab<'a>(g: &'a Option<Browser>, base: &'a str) -> Result<Tab<'a>, SiteError> {
    match g {
        Some(b) => Ok(Tab { c: &b.client, base }),
        None => Err(SiteError::new(
            SiteErrorKind::Unavailable,
            "browser: closed",
        )),
    }
}

/// How long a test or the demo gives one browser step.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(30);
