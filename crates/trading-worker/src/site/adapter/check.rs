//! The site adapter protocol's conformance kit (`trading-worker adapter-check`): runs
//! the protocol's checks against an adapter that drives the simulated shop, setting each case up
//! through the shop's `/admin/*` routes, and says what passes. Someone writing the real-site
//! adapter runs it against their adapter pointed at shop-sim before going live.
//!
//! The checks, in order (each starts from a shop without faults):
//! `info`, `session`, `happy-path` (cart → check → confirm → submit → pay → list → detail, every
//! answer with evidence), `repeat-submit-refused` (the idempotency key), `sold-out` (5002),
//! `amount-over-limit` (the confirm page tells the truth, nothing submitted), `3-d-secure`
//! (`challenge_required`, nothing bypassed), `dropped-answer-after-submit` (5006/5007, the order
//! then visible by its remark), `logged-out` (5001), `order-list-paging`.

use std::collections::HashSet;
use std::fmt;

use rakuten_types::OrderState;
use serde_json::{Value, json};

use super::AdapterSite;
use crate::site::{CartLine, PayOutcome, Remark, Site, SiteError, SiteErrorKind, Step};

/// shop-sim's seed items the checks use.
const TEA: i64 = 1001;
const CAMERA: i64 = 1003;
const SOLD_OUT: i64 = 1004;

/// One check's result.
#[derive(Debug, Clone)]
pub struct CheckResult {
    /// The check's name.
    pub name: &'static str,
    /// Whether it passed.
    pub passed: bool,
    /// What was seen (on failure: why).
    pub detail: String,
}

impl fmt::Display for CheckResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = if self.passed { "PASS" } else { "FAIL" };
        write!(f, "{mark} {:<28} {}", self.name, self.detail)
    }
}

type Outcome = Result<String, String>;

/// The kit: an adapter and the shop it drives.
#[derive(Debug)]
pub struct Kit {
    adapter: AdapterSite,
    shop: String,
    http: reqwest::Client,
    run_id: String,
}

impl Kit {
    /// A kit for `adapter`, which drives the simulated shop at `shop_url`.
    pub fn new(adapter: AdapterSite, shop_url: &str) -> Self {
        Kit {
            adapter,
            shop: shop_url.trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
            run_id: uuid::Uuid::now_v7().simple().to_string(),
        }
    }

    /// Runs every check, in order.
    pub async fn run(&self) -> Vec<CheckResult> {
        let mut out = Vec::new();
        macro_rules! check {
            ($name:literal, $f:ident) => {{
                let r = match self.faults(json!({})).await {
                    Ok(()) => self.$f().await,
                    Err(e) => Err(e),
                };
                let _ = self.faults(json!({})).await;
                out.push(CheckResult {
                    name: $name,
                    passed: r.is_ok(),
                    detail: r.unwrap_or_else(|e| e),
                });
            }};
        }
        check!("info", info);
        check!("session", session);
        check!("happy-path", happy_path);
        check!("repeat-submit-refused", repeat_submit);
        check!("sold-out", sold_out);
        check!("amount-over-limit", over_limit);
        check!("3-d-secure", three_d_secure);
        check!("dropped-answer-after-submit", dropped_answer);
        check!("logged-out", logged_out);
        check!("order-list-paging", paging);
        out
    }

    fn key(&self, n: &str) -> String {
        format!("adapter-check-{}-{n}", self.run_id)
    }

    /// Sets the shop's faults: every switch off, then `patch`.
    async fn faults(&self, patch: Value) -> Result<(), String> {
        let mut all = json!({"price_change_yen": 0, "three_d_secure": false, "slow_ms": 0,
            "drop_after_order": false, "logged_out": false, "order_list_changed": false,
            "logged_out_from_page": 0, "order_list_changed_from_page": 0});
        if let (Some(a), Some(p)) = (all.as_object_mut(), patch.as_object()) {
            a.extend(p.clone());
        }
        self.admin_post("/admin/faults", all).await.map(|_| ())
    }

    async fn admin_post(&self, path: &str, body: Value) -> Result<Value, String> {
        let r = self
            .http
            .post(format!("{}{path}", self.shop))
            .json(&body)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| format!("shop {path}: {e}"))?;
        r.json().await.map_err(|e| format!("shop {path}: {e}"))
    }

    async fn admin_get(&self, path: &str) -> Result<Vec<Value>, String> {
        let r = self
            .http
            .get(format!("{}{path}", self.shop))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| format!("shop {path}: {e}"))?;
        r.json().await.map_err(|e| format!("shop {path}: {e}"))
    }

    async fn submissions(&self) -> Result<usize, String> {
        Ok(self.admin_get("/admin/submissions").await?.len())
    }

    async fn info(&self) -> Outcome {
        let i = self.adapter.info().await.map_err(show)?;
        Ok(format!(
            "protocol v{}, adapter {:?}, account {:?}",
            i.protocol, i.name, i.account
        ))
    }

    async fn session(&self) -> Outcome {
        let s = self.adapter.session_check().await.map_err(show)?;
        if !s.value {
            return Err("session/check says logged out on a logged-in shop".into());
        }
        Ok(format!("logged in; {}", evidence(&s)?))
    }

    /// Cart with one line of `item_id`, checked, then the confirm page.
    async fn to_confirm(&self, item_id: i64) -> Result<crate::site::ConfirmView, String> {
        let line = CartLine {
            item_id,
            variant_id: None,
            quantity: 1,
        };
        let added = self.adapter.cart_add(&line).await.map_err(show)?;
        evidence(&added)?;
        let cart = self.adapter.cart_check().await.map_err(show)?;
        evidence(&cart)?;
        if cart.value.lines.len() != 1 || cart.value.lines[0].0 != item_id {
            return Err(format!(
                "cart/check after cart/add of {item_id}: {:?} (want exactly that line)",
                cart.value.lines
            ));
        }
        let c = self.adapter.order_confirm().await.map_err(show)?;
        evidence(&c)?;
        if c.value.payable_yen != c.value.subtotal_yen + c.value.shipping_yen {
            return Err(format!(
                "confirm: payable {} ≠ subtotal {} + shipping {}",
                c.value.payable_yen, c.value.subtotal_yen, c.value.shipping_yen
            ));
        }
        Ok(c.value)
    }

    async fn happy_path(&self) -> Outcome {
        let before = self.submissions().await?;
        let confirm = self.to_confirm(TEA).await?;
        let key = self.key("happy");
        let sub = self
            .adapter
            .order_submit(&confirm, &key)
            .await
            .map_err(show)?;
        let ev = evidence(&sub)?;
        let order = sub.value;
        if self.submissions().await? != before + 1 {
            return Err("the shop did not log exactly one submission".into());
        }
        let paid = self.adapter.pay(&order, &key).await.map_err(show)?;
        evidence(&paid)?;
        if paid.value != PayOutcome::Paid {
            return Err(format!("pay: {:?}, want paid", paid.value));
        }
        let list = self.adapter.list_orders(1).await.map_err(show)?;
        evidence(&list)?;
        let i = list
            .value
            .orders
            .iter()
            .position(|o| o.order_number == order)
            .ok_or_else(|| format!("order {order} missing from list page 1"))?;
        if list.value.remark(i) != &Remark::Text(key.clone()) {
            return Err(format!(
                "order {order}'s remark is {:?}, want the key",
                list.value.remark(i)
            ));
        }
        let d = self.adapter.order_detail(&order).await.map_err(show)?;
        evidence(&d)?;
        if !d.value.found || d.value.order_state != Some(OrderState::Paid) {
            return Err(format!(
                "detail of {order}: found {}, state {:?}, want paid",
                d.value.found, d.value.order_state
            ));
        }
        Ok(format!("order {order} placed and paid; {ev}"))
    }

    async fn repeat_submit(&self) -> Outcome {
        let confirm = self.to_confirm(TEA).await?;
        let key = self.key("repeat");
        let first = self
            .adapter
            .order_submit(&confirm, &key)
            .await
            .map_err(show)?;
        let confirm = self.to_confirm(TEA).await?;
        let before = self.submissions().await?;
        match self.adapter.order_submit(&confirm, &key).await {
            Ok(s) => Err(format!(
                "a second submit under one key placed order {}",
                s.value
            )),
            Err(_) if self.submissions().await? != before => {
                Err("the repeat was refused but reached the shop".into())
            }
            Err(e) if e.kind.is_ambiguous() => {
                Err(format!("the refusal must be clear (5002), not {}", show(e)))
            }
            Err(e) => Ok(format!(
                "first: order {}; repeat refused: {}",
                first.value,
                show(e)
            )),
        }
    }

    async fn sold_out(&self) -> Outcome {
        let line = CartLine {
            item_id: SOLD_OUT,
            variant_id: None,
            quantity: 1,
        };
        expect_code(
            self.adapter.cart_add(&line).await,
            SiteErrorKind::UnexpectedPage,
        )
    }

    async fn over_limit(&self) -> Outcome {
        let before = self.submissions().await?;
        let c = self.to_confirm(CAMERA).await?;
        if c.payable_yen < 58_000 {
            return Err(format!(
                "confirm payable {} yen for a 58,000 yen item",
                c.payable_yen
            ));
        }
        if self.submissions().await? != before {
            return Err("something was submitted".into());
        }
        Ok(format!(
            "confirm shows {} yen: the worker's amount guard refuses it (5004) before any submit",
            c.payable_yen
        ))
    }

    async fn three_d_secure(&self) -> Outcome {
        self.faults(json!({"three_d_secure": true})).await?;
        let confirm = self.to_confirm(TEA).await?;
        let key = self.key("3ds");
        let sub = self
            .adapter
            .order_submit(&confirm, &key)
            .await
            .map_err(show)?;
        let p = self.adapter.pay(&sub.value, &key).await.map_err(show)?;
        evidence(&p)?;
        match p.value {
            PayOutcome::ChallengeRequired(c) => Ok(format!(
                "order {}: challenge_required ({c}), nothing bypassed",
                sub.value
            )),
            other => Err(format!("pay under 3-D Secure: {other:?}")),
        }
    }

    async fn dropped_answer(&self) -> Outcome {
        let confirm = self.to_confirm(TEA).await?;
        self.faults(json!({"drop_after_order": true})).await?;
        let before = self.submissions().await?;
        let key = self.key("dropped");
        let r = self.adapter.order_submit(&confirm, &key).await;
        self.faults(json!({})).await?;
        match r {
            Ok(s) => {
                return Err(format!(
                    "the shop broke the connection, yet the adapter answered order {}",
                    s.value
                ));
            }
            Err(e) if !e.kind.is_ambiguous() => {
                return Err(format!(
                    "a lost answer must be 5006 or 5007 (the order may exist), not {}",
                    show(e)
                ));
            }
            Err(_) => {}
        }
        if self.submissions().await? != before + 1 {
            return Err("the shop did not log the submission".into());
        }
        let list = self.adapter.list_orders(1).await.map_err(show)?;
        let found = (0..list.value.orders.len())
            .any(|i| list.value.remark(i) == &Remark::Text(key.clone()));
        if !found {
            return Err("the order is not on list page 1 with its remark".into());
        }
        Ok("lost answer → ambiguous code; the order is found by its remark".into())
    }

    async fn logged_out(&self) -> Outcome {
        self.faults(json!({"logged_out": true})).await?;
        let s = self.adapter.session_check().await.map_err(show)?;
        if s.value {
            return Err("session/check says logged in on a logged-out shop".into());
        }
        expect_code(self.adapter.cart_check().await, SiteErrorKind::LoginLost)
    }

    async fn paging(&self) -> Outcome {
        let seed: Vec<Value> = (0..12)
            .map(|i| json!({"order_date": format!("2025-01-01T00:{i:02}:00Z")}))
            .collect();
        self.admin_post("/admin/orders/seed", json!({"orders": seed}))
            .await?;
        let want: HashSet<String> = self
            .admin_get("/admin/orders")
            .await?
            .iter()
            .filter_map(|o| o["order_number"].as_str().map(str::to_owned))
            .collect();
        let mut seen = Vec::new();
        let mut page = 1;
        loop {
            let p = self.adapter.list_orders(page).await.map_err(show)?;
            evidence(&p)?;
            seen.extend(p.value.orders.iter().map(|o| o.order_number.clone()));
            if !p.value.has_next {
                break;
            }
            page += 1;
            if page > 200 {
                return Err("has_next never ends".into());
            }
        }
        let got: HashSet<String> = seen.iter().cloned().collect();
        if got.len() != seen.len() {
            return Err("an order appears on two pages".into());
        }
        if got != want {
            return Err(format!(
                "{} orders listed over {page} pages, the shop has {}",
                got.len(),
                want.len()
            ));
        }
        Ok(format!("{} orders over {page} pages", got.len()))
    }
}

fn show(e: SiteError) -> String {
    format!("{}: {}", e.kind.code().as_i32(), e.message)
}

/// The evidence an answer must carry: URL, method, HTTP status and HTML; PNG optional.
fn evidence<T>(s: &Step<T>) -> Result<String, String> {
    let p = &s.page;
    if p.url.is_empty() || p.method.is_empty() || p.http_status == 0 || p.html.is_none() {
        return Err(format!(
            "answer without full evidence (url {:?}, method {:?}, status {}, html {})",
            p.url,
            p.method,
            p.http_status,
            p.html.is_some()
        ));
    }
    Ok(format!(
        "evidence: {} {} → {}, html, png {}",
        p.method,
        p.url,
        p.http_status,
        if p.png.is_some() { "yes" } else { "no" }
    ))
}

fn expect_code<T: fmt::Debug>(r: Result<Step<T>, SiteError>, want: SiteErrorKind) -> Outcome {
    match r {
        Err(e) if e.kind == want => Ok(format!("answered {}", show(e))),
        Err(e) => Err(format!("want {}, got {}", want.code().as_i32(), show(e))),
        Ok(s) => Err(format!(
            "want {}, got a value {:?}",
            want.code().as_i32(),
            s.value
        )),
    }
}
