//! HTTP routes. Account pages (cart, confirm, submit, pay, order list/detail) need the session
//! cookie and answer HTML with embedded state ([`crate::page`]); `/api/item_detail` stands in for
//! the scraper service and answers the JSON envelope; `/admin/*` is for tests and has no auth.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rakuten_types::{Envelope, ErrorCode};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::catalog::{self, normalize_url};
use crate::config::FaultsPatch;
use crate::page::Page;
use crate::store::{Shop, ShopError, SimOrderStatus};

type AppState = Arc<Shop>;

/// The router of the whole shop.
pub fn router(shop: Arc<Shop>) -> Router {
    let shop_routes = Router::new()
        .route("/api/item_detail", post(item_detail))
        .route("/", get(home_page))
        .route("/items/{code}", get(item_page))
        .route("/cart", get(cart_page))
        .route("/cart/add", post(cart_add))
        .route("/cart/clear", post(cart_clear))
        .route("/order/confirm", get(confirm_page))
        .route("/order/submit", post(submit))
        .route("/orders", get(order_list))
        .route("/orders/{order_number}", get(order_detail))
        .route("/orders/{order_number}/pay", post(pay))
        .layer(middleware::from_fn_with_state(shop.clone(), fail_route))
        .layer(middleware::from_fn_with_state(shop.clone(), slow));
    let admin = Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/admin/submissions", get(admin_submissions))
        .route(
            "/admin/faults",
            get(admin_faults_get).post(admin_faults_set),
        )
        .route("/admin/orders", get(admin_orders))
        .route("/admin/orders/seed", post(admin_orders_seed))
        .route(
            "/admin/orders/{order_number}/status",
            post(admin_order_status),
        );
    shop_routes.merge(admin).with_state(shop)
}

async fn slow(State(shop): State<AppState>, req: Request, next: Next) -> Response {
    let ms = shop.faults().slow_ms;
    if ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
    next.run(req).await
}

/// The `fail_route` fault: a 503 error page instead of the route's answer, counted down.
async fn fail_route(State(shop): State<AppState>, req: Request, next: Next) -> Response {
    let hit = {
        let mut g = shop.lock();
        match g.faults.fail_route.as_mut() {
            Some(f) if f.path == req.uri().path() && f.times > 0 => {
                f.times -= 1;
                if f.times == 0 {
                    g.faults.fail_route = None;
                }
                true
            }
            _ => false,
        }
    };
    if hit {
        tracing::warn!(path = %req.uri().path(), "fault: failing the route with 503");
        return Page::error(
            StatusCode::SERVICE_UNAVAILABLE,
            "service unavailable (fault)",
        )
        .into_response();
    }
    next.run(req).await
}

/// `Some(login page)` when the request has no valid session or the login-lost fault is on.
fn require_login(shop: &Shop, headers: &HeaderMap) -> Option<Page> {
    if shop.faults().logged_out {
        return Some(Page::login());
    }
    let ok = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .any(|(k, v)| k == "session" && v == shop.config.session_token);
    (!ok).then(Page::login)
}

fn shop_error(e: &ShopError) -> Page {
    let status = match e {
        ShopError::ItemNotFound | ShopError::OrderNotFound => StatusCode::NOT_FOUND,
        ShopError::PriceChanged { .. } | ShopError::NotPayable(_) => StatusCode::CONFLICT,
        _ => StatusCode::BAD_REQUEST,
    };
    Page::error(status, &e.to_string())
}

/// A body as JSON, or as the form a page's `<form method="post">` sends.
struct JsonOrForm<T>(T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> axum::extract::FromRequest<S>
    for JsonOrForm<T>
{
    type Rejection = String;

    async fn from_request(req: Request, state: &S) -> Result<Self, String> {
        let form = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
        if form {
            axum::Form::<T>::from_request(req, state)
                .await
                .map(|axum::Form(t)| JsonOrForm(t))
                .map_err(|e| e.body_text())
        } else {
            Json::<T>::from_request(req, state)
                .await
                .map(|Json(t)| JsonOrForm(t))
                .map_err(|e| e.body_text())
        }
    }
}

#[derive(Debug, Deserialize)]
struct ItemDetailReq {
    #[serde(alias = "item_url")]
    url: String,
}

async fn item_detail(
    State(shop): State<AppState>,
    body: Result<Json<ItemDetailReq>, JsonRejection>,
) -> (StatusCode, Json<Envelope<Value>>) {
    let Ok(Json(req)) = body else {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(Envelope::error(
                ErrorCode::Validation,
                "body must be {\"url\": \"…\"}",
            )),
        );
    };
    let want = normalize_url(&req.url);
    let g = shop.lock();
    let Some(item) = g.items.iter().find(|i| normalize_url(&i.url) == want) else {
        return (
            StatusCode::NOT_FOUND,
            Json(Envelope::error(
                ErrorCode::NotFound,
                "no item with this url",
            )),
        );
    };
    let data = json!({
        "item_url": item.url,
        "item_name": item.name,
        "purchase": {
            "item_id": item.item_id,
            "item_code": item.item_code,
            "shop_id": catalog::SHOP_ID,
            "shop_name": catalog::SHOP_NAME,
            "price_yen": item.price_yen,
            "variant_ids": item.variants,
            "in_stock": item.stock > 0,
        }
    });
    (StatusCode::OK, Json(Envelope::ok(data)))
}

async fn home_page(State(shop): State<AppState>) -> Page {
    let g = shop.lock();
    Page::ok("商品一覧", json!({"page": "home", "items": g.items}))
}

async fn item_page(State(shop): State<AppState>, Path(code): Path<String>) -> Page {
    let g = shop.lock();
    match g
        .items
        .iter()
        .find(|i| i.item_code == code || i.item_id.to_string() == code)
    {
        Some(item) => Page::ok(&item.name, json!({"page": "item", "item": item})),
        None => shop_error(&ShopError::ItemNotFound),
    }
}

fn cart_state(shop: &Shop) -> Value {
    let g = shop.lock();
    let subtotal: i64 = g.cart.iter().map(|l| l.line_total_yen).sum();
    json!({"page": "cart", "logged_in": true, "cart": {"lines": g.cart, "subtotal_yen": subtotal}})
}

async fn cart_page(State(shop): State<AppState>, headers: HeaderMap) -> Page {
    if let Some(p) = require_login(&shop, &headers) {
        return p;
    }
    Page::ok("買い物かご", cart_state(&shop))
}

#[derive(Debug, Deserialize)]
struct CartAddReq {
    item_id: i64,
    #[serde(default)]
    variant_id: Option<String>,
    #[serde(default = "one")]
    quantity: i64,
}

fn one() -> i64 {
    1
}

async fn cart_add(
    State(shop): State<AppState>,
    headers: HeaderMap,
    body: Result<JsonOrForm<CartAddReq>, String>,
) -> Page {
    if let Some(p) = require_login(&shop, &headers) {
        return p;
    }
    let Ok(JsonOrForm(req)) = body else {
        return Page::error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "body must be {item_id, variant_id?, quantity}",
        );
    };
    // A form without a variant select sends none; an empty one means none too.
    let variant = req.variant_id.filter(|v| !v.is_empty());
    match shop.cart_add(req.item_id, variant, req.quantity) {
        Ok(_) => Page::ok("買い物かごに追加しました", cart_state(&shop)),
        Err(e) => shop_error(&e),
    }
}

async fn cart_clear(State(shop): State<AppState>, headers: HeaderMap) -> Page {
    if let Some(p) = require_login(&shop, &headers) {
        return p;
    }
    shop.cart_clear();
    Page::ok("買い物かご", cart_state(&shop))
}

async fn confirm_page(State(shop): State<AppState>, headers: HeaderMap) -> Page {
    if let Some(p) = require_login(&shop, &headers) {
        return p;
    }
    match shop.confirm() {
        Ok(c) => Page::ok(
            "ご注文内容の確認",
            json!({"page": "confirm", "logged_in": true, "confirm": c}),
        ),
        Err(e) => shop_error(&e),
    }
}

#[derive(Debug, Deserialize)]
struct SubmitReq {
    expected_payable_yen: i64,
    #[serde(default)]
    note: Option<String>,
}

async fn submit(
    State(shop): State<AppState>,
    headers: HeaderMap,
    body: Result<JsonOrForm<SubmitReq>, String>,
) -> Response {
    if let Some(p) = require_login(&shop, &headers) {
        return p.into_response();
    }
    let Ok(JsonOrForm(req)) = body else {
        return Page::error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "body must be {expected_payable_yen, note?}",
        )
        .into_response();
    };
    let drop = shop.faults().drop_after_order;
    // An empty remark field (a form's empty textarea) is no remark.
    let note = req
        .note
        .filter(|n| !n.trim().is_empty())
        .map(|n| n.chars().take(500).collect());
    match shop.submit(req.expected_payable_yen, note, drop) {
        Ok(order) if drop => {
            tracing::warn!(order_number = %order.order_number, "fault: breaking the connection after creating the order");
            // A body that fails on its first poll: hyper aborts the connection, so the client
            // never learns the order number although the order exists.
            let stream = futures::stream::once(async {
                Err::<Bytes, std::io::Error>(std::io::Error::other("connection dropped (fault)"))
            });
            Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "text/html; charset=utf-8")
                .body(Body::from_stream(stream))
                .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
        }
        Ok(order) => Page::ok(
            "ご注文ありがとうございます",
            json!({"page": "order_complete", "logged_in": true, "order": order_json(&order)}),
        )
        .into_response(),
        Err(e) => shop_error(&e).into_response(),
    }
}

fn order_json(o: &crate::store::Order) -> Value {
    json!({
        "order_number": o.order_number,
        "order_date": o.order_date,
        "shop_id": o.shop_id,
        "shop_name": o.shop_name,
        "items": o.lines.iter().map(|l| json!({
            "item_id": l.item_id, "item_name": l.item_name, "item_url": l.item_url,
            "variant_id": l.variant_id, "quantity": l.quantity, "unit_price_yen": l.unit_price_yen,
        })).collect::<Vec<_>>(),
        "subtotal_yen": o.subtotal_yen,
        "shipping_yen": o.shipping_yen,
        "payable_yen": o.payable_yen,
        "payment_method": o.payment_method,
        "pay_deadline": o.pay_deadline,
        "status": o.status,
        "stage_label": o.status.stage_label(),
        // The buyer's remark (備考欄), as the real order detail shows it: the worker's task id.
        "note": o.note,
    })
}

async fn pay(
    State(shop): State<AppState>,
    headers: HeaderMap,
    Path(order_number): Path<String>,
) -> Page {
    if let Some(p) = require_login(&shop, &headers) {
        return p;
    }
    match shop.pay(&order_number) {
        Ok((order, result)) => Page::ok(
            "お支払い",
            json!({"page": "payment", "logged_in": true, "payment": result, "order": order_json(&order)}),
        ),
        Err(e) => shop_error(&e),
    }
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    #[serde(default)]
    page: Option<u32>,
}

async fn order_list(
    State(shop): State<AppState>,
    headers: HeaderMap,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Page {
    if let Some(p) = require_login(&shop, &headers) {
        return p;
    }
    let Ok(Query(q)) = q else {
        return Page::error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "page must be a positive number",
        );
    };
    let page_no = q.page.unwrap_or(1).max(1);
    let faults = shop.faults();
    if faults.logged_out_from_page > 0 && page_no >= faults.logged_out_from_page {
        return Page::login();
    }
    let changed = faults.order_list_changed
        || (faults.order_list_changed_from_page > 0
            && page_no >= faults.order_list_changed_from_page);
    let page = page_no as usize;
    let size = shop.config.page_size.max(1);
    let g = shop.lock();
    let total = g.orders.len();
    let total_pages = total.div_ceil(size).max(1);
    let orders: Vec<Value> = g
        .orders
        .iter()
        .rev()
        .skip((page - 1) * size)
        .take(size)
        .map(|o| {
            json!({
                "order_number": o.order_number,
                "order_date": o.order_date,
                "shop_id": o.shop_id,
                "shop_name": o.shop_name,
                "items": o.lines.iter().map(|l| json!({
                    "item_id": l.item_id, "item_name": l.item_name, "item_url": l.item_url,
                })).collect::<Vec<_>>(),
                "stage_label": o.status.stage_label(),
                "payable_yen": o.payable_yen,
                // The buyer's remark (null when none): the worker's recovery check attributes an
                // order to a task by it (D-recovery-verdicts).
                "note": o.note,
            })
        })
        .collect();
    let data = json!({
        "page": page, "total_pages": total_pages, "total_count": total, "page_size": size,
        "orders": orders,
    });
    let state = if changed {
        json!({"page": "order_list", "logged_in": true, "orderListDataV2": {"result": {"pageInfo": page, "list": data["orders"]}}})
    } else {
        json!({"page": "order_list", "logged_in": true, "orderListData": data})
    };
    Page::ok("購入履歴", state)
}

async fn order_detail(
    State(shop): State<AppState>,
    headers: HeaderMap,
    Path(order_number): Path<String>,
) -> Page {
    if let Some(p) = require_login(&shop, &headers) {
        return p;
    }
    match shop.order(&order_number) {
        Some(o) => Page::ok(
            "注文詳細",
            json!({"page": "order_detail", "logged_in": true,
                   "orderDetail": {"found": true, "order": order_json(&o)}}),
        ),
        None => Page::ok(
            "注文詳細",
            json!({"page": "order_detail", "logged_in": true,
                   "orderDetail": {"found": false, "order_number": order_number}}),
        ),
    }
}

async fn admin_submissions(State(shop): State<AppState>) -> Json<Value> {
    Json(json!(shop.submissions()))
}

async fn admin_faults_get(State(shop): State<AppState>) -> Json<Value> {
    Json(json!(shop.faults()))
}

async fn admin_faults_set(
    State(shop): State<AppState>,
    body: Result<Json<FaultsPatch>, JsonRejection>,
) -> Response {
    match body {
        Ok(Json(p)) => {
            let mut g = shop.lock();
            g.faults.apply(p);
            tracing::info!(faults = %json!(g.faults), "faults changed");
            Json(json!(g.faults)).into_response()
        }
        Err(e) => (StatusCode::UNPROCESSABLE_ENTITY, e.body_text()).into_response(),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SeedReq {
    orders: Vec<crate::store::SeedOrder>,
}

async fn admin_orders_seed(
    State(shop): State<AppState>,
    body: Result<Json<SeedReq>, JsonRejection>,
) -> Response {
    let Ok(Json(req)) = body else {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            "body must be {\"orders\": [{order_date, item_code?, status?}]}",
        )
            .into_response();
    };
    if req.orders.len() > 10_000 {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            "at most 10000 orders per call",
        )
            .into_response();
    }
    match shop.seed_orders(req.orders) {
        Ok(numbers) => Json(json!({"order_numbers": numbers})).into_response(),
        Err(e) => (StatusCode::UNPROCESSABLE_ENTITY, e.to_string()).into_response(),
    }
}

async fn admin_orders(State(shop): State<AppState>) -> Json<Value> {
    let g = shop.lock();
    Json(json!(g.orders.iter().map(order_json).collect::<Vec<_>>()))
}

#[derive(Debug, Deserialize)]
struct StatusReq {
    status: SimOrderStatus,
}

async fn admin_order_status(
    State(shop): State<AppState>,
    Path(order_number): Path<String>,
    body: Result<Json<StatusReq>, JsonRejection>,
) -> Response {
    let Ok(Json(req)) = body else {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            "body must be {\"status\": …}",
        )
            .into_response();
    };
    match shop.set_status(&order_number, req.status) {
        Ok(o) => Json(order_json(&o)).into_response(),
        Err(e) => (StatusCode::NOT_FOUND, e.to_string()).into_response(),
    }
}
