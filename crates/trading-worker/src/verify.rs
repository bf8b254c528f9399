//! The recovery check (spec §5): before anything is executed again for a task that may have been
//! worked on, look on the site. With a known site order id, its detail page decides. Otherwise the
//! order list is read newest first, back to the time window's start; orders of the intent's item
//! inside the window are candidates, and a candidate is this task's only on positive evidence
//! (D-recovery-verdicts): the local journal attributes it to this task, or the site shows the buyer's
//! remark carrying this task's id (the worker writes it at submit). A candidate the journal gives
//! to another task, or whose remark names something else, is not ours; one with no remark (or on
//! a site that does not show remarks) and not in the journal cannot be attributed.
//!
//! - exactly one order attributed to this task → [`Verdict::AlreadyOrdered`] with the state its
//!   detail page shows;
//! - none attributed, none unattributable, and the listing covered the whole window (reached an
//!   older order or the last page) → [`Verdict::NotOrdered`] (other tasks' orders don't count);
//! - anything else (unattributable candidates, several orders attributed, conflicting evidence,
//!   page limit hit, page changed, logged out, site not implemented) → [`Verdict::Unknown`]: a
//!   human decides, nothing is guessed.
//!
//! A site whose order list lags behind new orders must answer `Unknown` for the lag period; the
//! sim lists orders at once, and the Rakuten seam's list is not implemented (→ `Unknown`).

use std::time::Duration;

use rakuten_types::{ErrorCode, OrderState, TaskId, Timestamp};

use crate::ctx::WorkerCtx;
use crate::intent::Intent;
use crate::journal::OrderRow;
use crate::site::{PageSnapshot, Purchase, Remark, SiteError};

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

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::AlreadyOrdered {
                order_number,
                state,
            } => write!(f, "already ordered: order {order_number} ({state})"),
            Verdict::NotOrdered { detail } => write!(f, "not ordered: {detail}"),
            Verdict::Unknown { reason, code } => match code {
                Some(c) => write!(f, "unknown ({}): {reason}", c.as_i32()),
                None => write!(f, "unknown: {reason}"),
            },
        }
    }
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

/// With a known site order id its detail page decides; otherwise the item's orders in the window
/// are listed, attributed, and the verdict drawn from what was found.
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
    let purchase = match purchase_of(ctx, row).await {
        Ok(p) => p,
        Err(v) => return v,
    };
    let window_start = since.minus(WINDOW_SLACK);
    let listing = match list_candidates(ctx, purchase.item_id, window_start, pages).await {
        Ok(l) => l,
        Err(v) => return v,
    };
    let found = match attribute_candidates(ctx, &row.task_id, listing.candidates).await {
        Ok(f) => f,
        Err(v) => return v,
    };
    if found.ours.len() > 1 {
        return Verdict::Unknown {
            reason: format!(
                "several orders are attributed to this task: {}",
                found.ours.join(", ")
            ),
            code: None,
        };
    }
    if let Some(n) = found.ours.first() {
        // Positively ours (journal or remark). Undetermined others are not claimed.
        return detail_verdict(ctx, n, pages).await;
    }
    if !found.undetermined.is_empty() {
        return Verdict::Unknown {
            reason: format!(
                "order(s) of item {} in the window that cannot be attributed to this task or another: {}",
                purchase.item_id,
                found.undetermined.join(", ")
            ),
            code: None,
        };
    }
    let Some(pages_read) = listing.covered_in else {
        return Verdict::Unknown {
            reason: format!(
                "the order list was not covered back to {window_start} within {} pages",
                ctx.settings.verify_max_pages
            ),
            code: None,
        };
    };
    let others = if found.excluded.is_empty() {
        String::new()
    } else {
        format!(" (other tasks' orders: {})", found.excluded.join(", "))
    };
    Verdict::NotOrdered {
        detail: format!(
            "no order of item {} for this task since {window_start} in {pages_read} list page(s){others}",
            purchase.item_id
        ),
    }
}

/// The task's item: the purchase block the journal keeps, else the scraper's answer for the
/// intent's item URL. `Err` is the verdict when neither can be had.
async fn purchase_of(ctx: &WorkerCtx, row: &OrderRow) -> Result<Purchase, Verdict> {
    let kept: Option<Purchase> = row
        .purchase_json
        .as_deref()
        .and_then(|j| serde_json::from_str(j).ok());
    if let Some(p) = kept {
        return Ok(p);
    }
    let intent = rakuten_types::intent::IntentJson::from_text(row.intent_json.clone())
        .map_err(|e| e.to_string())
        .and_then(|v| Intent::parse(&v))
        .map_err(|e| Verdict::Unknown {
            reason: format!("intent unreadable: {e}"),
            code: None,
        })?;
    ctx.scraper
        .item_detail(&intent.item_url)
        .await
        .map_err(|e| unknown_from(&e, "item detail"))
}

/// The orders of one item found in the order list inside the window.
struct Listing {
    /// `(order number, remark)` of each order of the item dated inside the window.
    candidates: Vec<(String, Remark)>,
    /// The number of list pages read when the listing reached an order older than the window or
    /// the last page; `None` when the page limit came first.
    covered_in: Option<u32>,
}

/// Reads the order list newest first, up to `RAKUTEN_VERIFY_MAX_PAGES` pages, until an order
/// older than `window_start` or the last page. `Err` is the verdict when a page cannot be read
/// or shows an unreadable date.
async fn list_candidates(
    ctx: &WorkerCtx,
    item_id: i64,
    window_start: Timestamp,
    pages: &mut Vec<(String, PageSnapshot)>,
) -> Result<Listing, Verdict> {
    let mut candidates: Vec<(String, Remark)> = Vec::new();
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
                return Err(unknown_from(&e, &format!("order list page {page_no}")));
            }
        };
        pages.push((format!("verify-list-p{page_no}"), step.page.clone()));
        let mut older_seen = false;
        for (i, o) in step.value.orders.iter().enumerate() {
            let Ok(date) = Timestamp::parse(&o.order_date) else {
                return Err(Verdict::Unknown {
                    reason: format!(
                        "order {} has an unreadable date {:?}",
                        o.order_number, o.order_date
                    ),
                    code: Some(ErrorCode::SiteUnexpectedPage),
                });
            };
            if date < window_start {
                older_seen = true;
                continue;
            }
            if o.items.iter().any(|i| i.item_id == item_id) {
                candidates.push((o.order_number.clone(), step.value.remark(i).clone()));
            }
        }
        if older_seen || !step.value.has_next {
            return Ok(Listing {
                candidates,
                covered_in: Some(page_no),
            });
        }
        page_no += 1;
    }
    Ok(Listing {
        candidates,
        covered_in: None,
    })
}

/// The candidates sorted by [`attribute`]: this task's, other tasks' (with why) and those that
/// cannot be attributed (with why).
struct Attributed {
    ours: Vec<String>,
    excluded: Vec<String>,
    undetermined: Vec<String>,
}

/// Attributes each candidate (D-recovery-verdicts): an order is this task's only on positive
/// evidence, the journal's or the remark's. `Err` is the verdict when the journal cannot be read.
async fn attribute_candidates(
    ctx: &WorkerCtx,
    task_id: &TaskId,
    candidates: Vec<(String, Remark)>,
) -> Result<Attributed, Verdict> {
    let mut found = Attributed {
        ours: Vec::new(),
        excluded: Vec::new(),
        undetermined: Vec::new(),
    };
    for (order_number, remark) in candidates {
        let owners = ctx
            .journal
            .order_tasks_by_site_order_id(&order_number)
            .await
            .map_err(|e| Verdict::Unknown {
                reason: format!("journal lookup of order {order_number}: {e}"),
                code: None,
            })?;
        match attribute(task_id, &owners, &remark) {
            Attribution::Ours => found.ours.push(order_number),
            Attribution::NotOurs(why) => found.excluded.push(format!("{order_number} ({why})")),
            Attribution::Undetermined(why) => {
                found.undetermined.push(format!("{order_number} ({why})"));
            }
        }
    }
    Ok(found)
}

/// Whose order a listed candidate is, by the journal and the remark.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Attribution {
    /// Positively this task's.
    Ours,
    /// Positively another's (why).
    NotOurs(String),
    /// No positive evidence either way, or the evidence conflicts (why).
    Undetermined(String),
}

/// The attribution rule of D-recovery-verdicts for a candidate order (the intent's item, in the window):
/// `owners` are the tasks the local journal attributes the order to, `remark` what the site
/// shows in the order's remarks field (the worker writes the task id there at submit).
fn attribute(task_id: &TaskId, owners: &[TaskId], remark: &Remark) -> Attribution {
    let journal_ours = owners.iter().any(|t| t == task_id);
    let journal_other = owners.iter().find(|t| *t != task_id);
    let remark_ours = matches!(remark, Remark::Text(t) if t == task_id.as_str());
    let remark_other = match remark {
        Remark::Text(t) if t != task_id.as_str() => Some(t.as_str()),
        _ => None,
    };
    match (journal_ours, journal_other) {
        (true, Some(other)) => Attribution::Undetermined(format!(
            "the journal attributes it to this task and to {other}"
        )),
        (true, None) => match remark_other {
            Some(t) => Attribution::Undetermined(format!(
                "the journal says this task's, the remark says {t:?}"
            )),
            None => Attribution::Ours,
        },
        (false, Some(other)) if remark_ours => Attribution::Undetermined(format!(
            "the remark names this task, the journal says {other}'s"
        )),
        (false, Some(other)) => Attribution::NotOurs(format!("the journal says {other}'s")),
        (false, None) => match remark {
            _ if remark_ours => Attribution::Ours,
            Remark::Text(t) => Attribution::NotOurs(format!("remark {t:?}")),
            Remark::Empty => {
                Attribution::Undetermined("no remark on a site that shows remarks".into())
            }
            Remark::NotShown => Attribution::Undetermined("the site does not show remarks".into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> TaskId {
        TaskId::parse(s).unwrap()
    }

    fn text(s: &str) -> Remark {
        Remark::Text(s.into())
    }

    #[test]
    fn an_order_whose_remark_names_this_task_is_ours() {
        assert_eq!(attribute(&t("a"), &[], &text("a")), Attribution::Ours);
        assert_eq!(attribute(&t("a"), &[t("a")], &text("a")), Attribution::Ours);
        assert_eq!(
            attribute(&t("a"), &[t("a")], &Remark::NotShown),
            Attribution::Ours
        );
    }

    #[test]
    fn an_order_of_another_task_is_never_ours() {
        assert!(matches!(
            attribute(&t("a"), &[], &text("b")),
            Attribution::NotOurs(_)
        ));
        assert!(matches!(
            attribute(&t("a"), &[t("b")], &Remark::NotShown),
            Attribution::NotOurs(_)
        ));
        assert!(matches!(
            attribute(&t("a"), &[t("b")], &text("b")),
            Attribution::NotOurs(_)
        ));
    }

    #[test]
    fn an_order_without_positive_evidence_is_undetermined() {
        assert!(matches!(
            attribute(&t("a"), &[], &Remark::Empty),
            Attribution::Undetermined(_)
        ));
        assert!(matches!(
            attribute(&t("a"), &[], &Remark::NotShown),
            Attribution::Undetermined(_)
        ));
    }

    #[test]
    fn conflicting_evidence_is_undetermined() {
        for (owners, remark) in [
            (vec![t("b")], text("a")),
            (vec![t("a")], text("b")),
            (vec![t("a"), t("b")], text("a")),
        ] {
            assert!(
                matches!(
                    attribute(&t("a"), &owners, &remark),
                    Attribution::Undetermined(_)
                ),
                "{owners:?} {remark:?}"
            );
        }
    }
}
