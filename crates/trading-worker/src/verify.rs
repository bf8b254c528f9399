//! The recovery check (spec §5): before anything is executed again for a task that may have been
//! worked on, look on the site. With a known site order id, its detail page decides. Otherwise the
//! order list is read newest first, back to the time window's start, and orders of the intent's
//! item inside the window are matched:
//!
//! - exactly one → [`Verdict::AlreadyOrdered`] with the state its detail page shows;
//! - none, and the listing covered the whole window (reached an older order or the last page) →
//!   [`Verdict::NotOrdered`];
//! - anything else (page limit hit, page changed, logged out, several candidates, site not
//!   implemented) → [`Verdict::Unknown`]: a human decides, nothing is guessed.
//!
//! A site whose order list lags behind new orders must answer `Unknown` for the lag period; the
//! sim lists orders at once, and the Rakuten seam's list is not implemented (→ `Unknown`).

use std::time::Duration;

use rakuten_types::{ErrorCode, OrderState, Timestamp};

use crate::intent::Intent;
use crate::journal::OrderRow;
use crate::site::{PageSnapshot, Purchase, SiteError};
use crate::worker::WorkerCtx;

/// Slack subtracted from the window start (clock differences between this host and the site).
pub const WINDOW_SLACK: Duration = Duration::from_secs(600);

/// What the site says about a task's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The order exists.
    AlreadyOrdered {
        /// Site order id.
        order_number: String,
        /// Its state on the site.
        state: OrderState,
    },
    /// The order does not exist (the listing covered the whole window).
    NotOrdered {
        /// What was checked.
        detail: String,
    },
    /// No reliable answer.
    Unknown {
        /// Why.
        reason: String,
        /// Site error code behind it, if any.
        code: Option<ErrorCode>,
    },
}

/// A verdict and the pages it was read from (evidence), as `(step name, page)`.
#[derive(Debug)]
pub struct Verification {
    /// The verdict.
    pub verdict: Verdict,
    /// Pages read, in order.
    pub pages: Vec<(String, PageSnapshot)>,
}

fn unknown_from(e: &SiteError, what: &str) -> Verdict {
    Verdict::Unknown {
        reason: format!("{what}: {}", e.message),
        code: Some(e.kind.code()),
    }
}

/// Runs the check for the task of `row`. `known_order_id`: a site order id the journal already
/// has. `since`: when the task was first accepted (or created on the gateway).
pub async fn verify_on_site(
    ctx: &WorkerCtx,
    row: &OrderRow,
    known_order_id: Option<&str>,
    since: Timestamp,
) -> Verification {
    let mut pages = Vec::new();
    let verdict = verify_inner(ctx, row, known_order_id, since, &mut pages).await;
    Verification { verdict, pages }
}

async fn detail_verdict(
    ctx: &WorkerCtx,
    order_number: &str,
    pages: &mut Vec<(String, PageSnapshot)>,
) -> Verdict {
    let r = {
        let _g = ctx.locks.lock(ctx.site.account()).await;
        ctx.site.order_detail(order_number).await
    };
    match r {
        Err(e) => {
            if let Some(p) = &e.page {
                pages.push(("verify-detail".into(), p.clone()));
            }
            unknown_from(&e, "order detail")
        }
        Ok(step) => {
            pages.push(("verify-detail".into(), step.page));
            match (step.value.found, step.value.order_state) {
                (true, Some(state)) => Verdict::AlreadyOrdered {
                    order_number: order_number.to_owned(),
                    state,
                },
                (true, None) => Verdict::Unknown {
                    reason: format!(
                        "order {order_number} has an unknown stage {:?}",
                        step.value.stage_label
                    ),
                    code: Some(ErrorCode::SiteUnexpectedPage),
                },
                (false, _) => Verdict::Unknown {
                    reason: format!(
                        "order {order_number} is known locally but not found on the site"
                    ),
                    code: None,
                },
            }
        }
    }
}

async fn verify_inner(
    ctx: &WorkerCtx,
    row: &OrderRow,
    known_order_id: Option<&str>,
    since: Timestamp,
    pages: &mut Vec<(String, PageSnapshot)>,
) -> Verdict {
    if let Some(id) = known_order_id {
        return detail_verdict(ctx, id, pages).await;
    }
    // The item: from the journal, else from the scraper.
    let purchase: Option<Purchase> = row
        .purchase_json
        .as_deref()
        .and_then(|j| serde_json::from_str(j).ok());
    let purchase = match purchase {
        Some(p) => p,
        None => {
            let intent = serde_json::from_str(&row.intent_json)
                .map_err(|e| e.to_string())
                .and_then(|v| Intent::parse(&v));
            let intent = match intent {
                Ok(i) => i,
                Err(e) => {
                    return Verdict::Unknown {
                        reason: format!("intent unreadable: {e}"),
                        code: None,
                    };
                }
            };
            match ctx.scraper.item_detail(&intent.item_url).await {
                Ok(p) => p,
                Err(e) => return unknown_from(&e, "item detail"),
            }
        }
    };
    let window_start = since.minus(WINDOW_SLACK);
    let mut matches: Vec<String> = Vec::new();
    let mut covered = false;
    let mut page_no = 1;
    while page_no <= ctx.settings.verify_max_pages {
        let r = {
            let _g = ctx.locks.lock(ctx.site.account()).await;
            ctx.site.list_orders(page_no).await
        };
        let step = match r {
            Ok(s) => s,
            Err(e) => {
                if let Some(p) = &e.page {
                    pages.push((format!("verify-list-p{page_no}"), p.clone()));
                }
                return unknown_from(&e, &format!("order list page {page_no}"));
            }
        };
        pages.push((format!("verify-list-p{page_no}"), step.page.clone()));
        let mut older_seen = false;
        for o in &step.value.orders {
            let Ok(date) = Timestamp::parse(&o.order_date) else {
                return Verdict::Unknown {
                    reason: format!(
                        "order {} has an unreadable date {:?}",
                        o.order_number, o.order_date
                    ),
                    code: Some(ErrorCode::SiteUnexpectedPage),
                };
            };
            if date < window_start {
                older_seen = true;
                continue;
            }
            if o.items.iter().any(|i| i.item_id == purchase.item_id) {
                matches.push(o.order_number.clone());
            }
        }
        if older_seen || !step.value.has_next {
            covered = true;
            break;
        }
        page_no += 1;
    }
    match matches.len() {
        1 => detail_verdict(ctx, &matches[0], pages).await,
        0 if covered => Verdict::NotOrdered {
            detail: format!(
                "no order of item {} since {window_start} in {page_no} list page(s)",
                purchase.item_id
            ),
        },
        0 => Verdict::Unknown {
            reason: format!(
                "the order list was not covered back to {window_start} within {} pages",
                ctx.settings.verify_max_pages
            ),
            code: None,
        },
        _ => Verdict::Unknown {
            reason: format!(
                "several orders of item {} in the window: {matches:?}",
                purchase.item_id
            ),
            code: None,
        },
    }
}
