//! Serves any [`Site`] over the adapter protocol ([`router`]). The simulated shop's adapters
//! (`crates/site-adapter`: plain HTTP and headless Chromium) are this router over their seam; an
//! adapter for the real site written in Rust would be too. The worker itself never serves it.
//!
//! Idempotency: the router remembers every key an irreversible call (submit, pay) was made
//! under — before the call, so a concurrent repeat is refused as well — and refuses a second
//! call under the same key with 5002, naming what the first one did. A submit the site clearly
//! refused frees its key again; any other outcome keeps it (the order may exist).

// The `Err` of the helpers below is the finished answer (a refusal with its message), returned
// as is by the handler: no reason to box it.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::wire::{self, Answer, PROTOCOL_VERSION, WireError, path};
use super::{evidence_of, map};
use crate::site::{Site, SiteError, SiteErrorKind, Step};

#[derive(Debug)]
struct Served {
    site: Arc<dyn Site>,
    name: String,
    /// `submit:{key}` / `pay:{key}` → what the first call did.
    keys: Mutex<HashMap<String, String>>,
}

/// The protocol's routes over `site`, named `name` in `/v1/info`.
pub fn router(site: Arc<dyn Site>, name: &str) -> Router {
    let served = Arc::new(Served {
        site,
        name: name.to_owned(),
        keys: Mutex::new(HashMap::new()),
    });
    Router::new()
        .route(path::INFO, get(info))
        .route(path::CART_ADD, post(cart_add))
        .route(path::CART_CHECK, post(cart_check))
        .route(path::ORDER_CONFIRM, post(order_confirm))
        .route(path::ORDER_SUBMIT, post(order_submit))
        .route(path::ORDER_PAY, post(order_pay))
        .route(path::ORDERS_LIST, post(orders_list))
        .route(path::ORDERS_DETAIL, post(orders_detail))
        .route(path::SESSION_CHECK, post(session_check))
        .with_state(served)
}

type S = State<Arc<Served>>;
type Reply = Json<Answer<Value>>;

fn answer<T: Serialize>(r: Result<Step<T>, SiteError>) -> Reply {
    Json(match r {
        Ok(s) => Answer {
            protocol: PROTOCOL_VERSION,
            ok: true,
            value: Some(serde_json::to_value(s.value).unwrap_or(Value::Null)),
            error: None,
            evidence: Some(evidence_of(&s.page)),
        },
        Err(e) => Answer {
            protocol: PROTOCOL_VERSION,
            ok: false,
            value: None,
            error: Some(WireError {
                code: e.kind.code().as_i32(),
                message: e.message.clone(),
            }),
            evidence: e.page.as_ref().map(evidence_of),
        },
    })
}

fn body<T: DeserializeOwned>(b: Result<Json<T>, JsonRejection>) -> Result<T, Reply> {
    b.map(|Json(t)| t).map_err(|e| {
        answer::<()>(Err(SiteError::new(
            SiteErrorKind::UnexpectedPage,
            format!("bad request body: {}", e.body_text()),
        )))
    })
}

async fn info(State(s): S) -> Json<wire::Info> {
    Json(wire::Info {
        protocol: PROTOCOL_VERSION,
        name: s.name.clone(),
        account: s.site.account().to_owned(),
    })
}

async fn cart_add(State(s): S, b: Result<Json<wire::CartAddReq>, JsonRejection>) -> Reply {
    let req = match body(b) {
        Ok(r) => r,
        Err(r) => return r,
    };
    let line = crate::site::CartLine {
        item_id: req.item_id,
        variant_id: req.variant_id,
        quantity: req.quantity,
    };
    answer(s.site.cart_add(&line).await)
}

async fn cart_check(State(s): S) -> Reply {
    answer(s.site.cart_check().await.map(|st| {
        map(st, |c| wire::CartValue {
            lines: c
                .lines
                .into_iter()
                .map(
                    |(item_id, variant_id, quantity, unit_price_yen)| wire::CartLineValue {
                        item_id,
                        variant_id,
                        quantity,
                        unit_price_yen,
                    },
                )
                .collect(),
            subtotal_yen: c.subtotal_yen,
        })
    }))
}

async fn order_confirm(State(s): S) -> Reply {
    answer(
        s.site
            .order_confirm()
            .await
            .map(|st| map(st, |c| wire::ConfirmValue::from(&c))),
    )
}

impl Served {
    /// Reserves `key`; `Err` with the refusal when it was used before.
    fn reserve(&self, key: &str) -> Result<(), Reply> {
        let mut g = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(done) = g.get(key) {
            return Err(answer::<()>(Err(SiteError::new(
                SiteErrorKind::UnexpectedPage,
                format!(
                    "idempotency key {key:?} was used before ({done}): refused, nothing sent to the site"
                ),
            ))));
        }
        g.insert(key.to_owned(), "in progress".into());
        Ok(())
    }

    fn settle(&self, key: &str, outcome: Option<String>) {
        let mut g = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        match outcome {
            Some(o) => g.insert(key.to_owned(), o),
            None => g.remove(key),
        };
    }
}

/// What a failed irreversible call leaves: a clear refusal frees the key (`None`).
fn failed(e: &SiteError) -> Option<String> {
    e.kind
        .is_ambiguous()
        .then(|| format!("no clear answer: {}", e.message))
}

async fn order_submit(State(s): S, b: Result<Json<wire::SubmitReq>, JsonRejection>) -> Reply {
    let req = match body(b) {
        Ok(r) => r,
        Err(r) => return r,
    };
    let key = format!("submit:{}", req.idempotency_key);
    if let Err(r) = s.reserve(&key) {
        return r;
    }
    let r = s.site.order_submit(&req.confirm.into(), &req.note).await;
    s.settle(
        &key,
        match &r {
            Ok(st) => Some(format!("order {}", st.value)),
            Err(e) => failed(e),
        },
    );
    answer(r.map(|st| map(st, |site_order_id| wire::SubmitValue { site_order_id })))
}

async fn order_pay(State(s): S, b: Result<Json<wire::PayReq>, JsonRejection>) -> Reply {
    let req = match body(b) {
        Ok(r) => r,
        Err(r) => return r,
    };
    let key = format!("pay:{}", req.idempotency_key);
    if let Err(r) = s.reserve(&key) {
        return r;
    }
    let r = s.site.pay(&req.site_order_id, &req.idempotency_key).await;
    s.settle(
        &key,
        match &r {
            Ok(st) => Some(format!("payment of {}: {:?}", req.site_order_id, st.value)),
            Err(e) => failed(e),
        },
    );
    answer(r.map(|st| map(st, |p| wire::PayValue::from(&p))))
}

async fn orders_list(State(s): S, b: Result<Json<wire::ListReq>, JsonRejection>) -> Reply {
    let req = match body(b) {
        Ok(r) => r,
        Err(r) => return r,
    };
    answer(s.site.list_orders(req.page.max(1)).await.map(|st| {
        map(st, |p| wire::ListValue {
            orders: p
                .orders
                .iter()
                .enumerate()
                .map(|(i, o)| wire::ListedOrder {
                    order: o.clone(),
                    remark: p.remark(i).into(),
                })
                .collect(),
            has_next: p.has_next,
            raw: p.raw.clone(),
        })
    }))
}

async fn orders_detail(State(s): S, b: Result<Json<wire::DetailReq>, JsonRejection>) -> Reply {
    let req = match body(b) {
        Ok(r) => r,
        Err(r) => return r,
    };
    answer(s.site.order_detail(&req.order_number).await.map(|st| {
        map(st, |d| wire::DetailValue {
            found: d.found,
            stage_label: d.stage_label,
            raw: d.raw,
        })
    }))
}

/// The session check reads the first order-list page: a login page there is "logged out".
async fn session_check(State(s): S) -> Reply {
    match s.site.list_orders(1).await {
        Ok(st) => answer(Ok(map(st, |_| json!({"logged_in": true})))),
        Err(e) if e.kind == SiteErrorKind::LoginLost => {
            let page = e.page.unwrap_or_else(|| crate::site::PageSnapshot {
                url: String::new(),
                method: "GET".into(),
                http_status: 0,
                html: None,
                png: None,
            });
            answer(Ok(Step {
                value: json!({"logged_in": false}),
                page,
            }))
        }
        Err(e) => answer::<()>(Err(e)),
    }
}
