use serde_json::{Value, json};

use crate::helpers::{TOKEN, answer, spawn_app, spawn_app_with};

enum Body {
    None,
    Raw(String),
}

struct Case {
    name: &'static str,
    method: &'static str,
    path: String,
    body: Body,
    status: u16,
    code: i64,
}

fn case(
    name: &'static str,
    method: &'static str,
    path: &str,
    body: Body,
    status: u16,
    code: i64,
) -> Case {
    Case {
        name,
        method,
        path: path.to_owned(),
        body,
        status,
        code,
    }
}

fn raw(v: impl Into<String>) -> Body {
    Body::Raw(v.into())
}

fn js(v: Value) -> Body {
    Body::Raw(v.to_string())
}

#[tokio::test]
async fn bad_input_gets_a_4xx_envelope_with_a_code_and_changes_nothing() {
    let app = spawn_app().await;
    app.leased("po-1", "w1").await;
    app.submit("po-2").await.assert_ok();
    let before = (
        app.task("po-1").await.body,
        app.task("po-2").await.body,
        app.list("").await.body,
    );

    let long_id = "x".repeat(129);
    let big_intent = json!({"site": "rakuten", "intent": {"blob": "y".repeat(65 * 1024)}});
    let huge_body = json!({"site": "rakuten", "intent": {"blob": "y".repeat(90 * 1024)}});
    let cases = vec![
        case(
            "malformed JSON",
            "POST",
            "/api/orders",
            raw("{\"site\":"),
            422,
            1003,
        ),
        case("empty body", "POST", "/api/orders", Body::None, 422, 1003),
        case(
            "wrong type",
            "POST",
            "/api/orders",
            js(json!({"site": 5, "intent": {}})),
            422,
            1003,
        ),
        case(
            "unknown site",
            "POST",
            "/api/orders",
            js(json!({"site": "rakuma", "intent": {}})),
            422,
            1003,
        ),
        case(
            "intent not an object",
            "POST",
            "/api/orders",
            js(json!({"site": "rakuten", "intent": [1]})),
            422,
            1003,
        ),
        case(
            "unknown field",
            "POST",
            "/api/orders",
            js(json!({"site": "rakuten", "intent": {}, "x": 1})),
            422,
            1003,
        ),
        case(
            "129-char id",
            "POST",
            "/api/orders",
            js(json!({"task_id": long_id, "site": "rakuten", "intent": {}})),
            422,
            1003,
        ),
        case(
            "control char id",
            "POST",
            "/api/orders",
            js(json!({"task_id": "a\u{1}b", "site": "rakuten", "intent": {}})),
            422,
            1003,
        ),
        case(
            "right-to-left override in id (D-id-rules)",
            "POST",
            "/api/orders",
            js(json!({"task_id": "po-\u{202E}0001", "site": "rakuten", "intent": {}})),
            422,
            1003,
        ),
        case(
            "path separator id",
            "POST",
            "/api/orders",
            js(json!({"task_id": "../etc", "site": "rakuten", "intent": {}})),
            422,
            1003,
        ),
        case(
            "65 KiB intent",
            "POST",
            "/api/orders",
            js(big_intent),
            413,
            1004,
        ),
        case(
            "90 KiB body",
            "POST",
            "/api/orders",
            js(huge_body),
            413,
            1004,
        ),
        case(
            "negative wait",
            "GET",
            "/api/orders/lease?worker_id=w9&wait=-1",
            Body::None,
            422,
            1003,
        ),
        case(
            "non-numeric wait",
            "GET",
            "/api/orders/lease?worker_id=w9&wait=abc",
            Body::None,
            422,
            1003,
        ),
        case(
            "infinite wait",
            "GET",
            "/api/orders/lease?worker_id=w9&wait=1e400",
            Body::None,
            422,
            1003,
        ),
        case(
            "NaN wait",
            "GET",
            "/api/orders/lease?worker_id=w9&wait=NaN",
            Body::None,
            422,
            1003,
        ),
        case(
            "missing worker_id",
            "GET",
            "/api/orders/lease?wait=0",
            Body::None,
            422,
            1003,
        ),
        case(
            "long worker_id",
            "GET",
            &format!("/api/orders/lease?worker_id={long_id}&wait=0"),
            Body::None,
            422,
            1003,
        ),
        case(
            "control char worker_id",
            "GET",
            "/api/orders/lease?worker_id=a%0Ab&wait=0",
            Body::None,
            422,
            1003,
        ),
        case(
            "unknown lease site",
            "GET",
            "/api/orders/lease?worker_id=w9&wait=0&site=rakuma",
            Body::None,
            422,
            1003,
        ),
        case(
            "unknown status",
            "GET",
            "/api/orders?status=bogus",
            Body::None,
            422,
            1003,
        ),
        case(
            "unknown list site",
            "GET",
            "/api/orders?site=amazon",
            Body::None,
            422,
            1003,
        ),
        case(
            "negative limit",
            "GET",
            "/api/orders?limit=-1",
            Body::None,
            422,
            1003,
        ),
        case(
            "zero limit",
            "GET",
            "/api/orders?limit=0",
            Body::None,
            422,
            1003,
        ),
        case(
            "non-numeric limit",
            "GET",
            "/api/orders?limit=ten",
            Body::None,
            422,
            1003,
        ),
        case(
            "negative offset",
            "GET",
            "/api/orders?offset=-5",
            Body::None,
            422,
            1003,
        ),
        case(
            "non-numeric offset",
            "GET",
            "/api/orders?offset=x",
            Body::None,
            422,
            1003,
        ),
        case(
            "129-char path id",
            "GET",
            &format!("/api/orders/{long_id}"),
            Body::None,
            422,
            1003,
        ),
        case(
            "control char path id",
            "GET",
            "/api/orders/a%0Ab",
            Body::None,
            422,
            1003,
        ),
        case(
            "unknown state",
            "POST",
            "/api/orders/po-1/report",
            js(json!({"worker_id": "w1", "state": "bogus"})),
            422,
            1003,
        ),
        case(
            "report without state",
            "POST",
            "/api/orders/po-1/report",
            js(json!({"worker_id": "w1"})),
            422,
            1003,
        ),
        case(
            "report wrong type",
            "POST",
            "/api/orders/po-1/report",
            js(json!({"worker_id": "w1", "state": "paid", "payable_yen": "lots"})),
            422,
            1003,
        ),
        case(
            "report terminal wrong type",
            "POST",
            "/api/orders/po-1/report",
            js(json!({"worker_id": "w1", "state": "paid", "terminal": "yes"})),
            422,
            1003,
        ),
        case(
            "report unknown outcome",
            "POST",
            "/api/orders/po-1/report",
            js(json!({"worker_id": "w1", "state": "paid", "terminal": true, "outcome": "great"})),
            422,
            1003,
        ),
        case(
            "report outcome without terminal",
            "POST",
            "/api/orders/po-1/report",
            js(json!({"worker_id": "w1", "state": "paid", "outcome": "succeeded"})),
            422,
            1003,
        ),
        case(
            "report absolute evidence_ref",
            "POST",
            "/api/orders/po-1/report",
            js(json!({"worker_id": "w1", "state": "ordered", "evidence_ref": "/etc/passwd"})),
            422,
            1003,
        ),
        case(
            "report dotdot evidence_ref",
            "POST",
            "/api/orders/po-1/report",
            js(json!({"worker_id": "w1", "state": "ordered", "evidence_ref": "po-1/../../x"})),
            422,
            1003,
        ),
        case(
            "report long detail",
            "POST",
            "/api/orders/po-1/report",
            js(json!({"worker_id": "w1", "state": "ordered", "detail": "d".repeat(5000)})),
            422,
            1003,
        ),
        case(
            "report bad pay_deadline",
            "POST",
            "/api/orders/po-1/report",
            js(json!({"worker_id": "w1", "state": "ordered", "pay_deadline": "tomorrow"})),
            422,
            1003,
        ),
        case(
            "report negative yen",
            "POST",
            "/api/orders/po-1/report",
            js(json!({"worker_id": "w1", "state": "ordered", "payable_yen": -1})),
            422,
            1003,
        ),
        case(
            "report without worker",
            "POST",
            "/api/orders/po-1/report",
            js(json!({"state": "ordered"})),
            422,
            1003,
        ),
        case(
            "renew wrong type",
            "POST",
            "/api/orders/po-1/renew",
            js(json!({"worker_id": 5})),
            422,
            1003,
        ),
        case(
            "renew malformed",
            "POST",
            "/api/orders/po-1/renew",
            raw("{"),
            422,
            1003,
        ),
        case(
            "renew without worker",
            "POST",
            "/api/orders/po-1/renew",
            Body::None,
            422,
            1003,
        ),
        case(
            "reclaim malformed",
            "POST",
            "/api/orders/po-1/reclaim",
            raw("[]"),
            422,
            1003,
        ),
        case("wrong method", "PUT", "/api/orders", Body::None, 405, 1005),
        case(
            "unknown route",
            "GET",
            "/api/nothing/here",
            Body::None,
            404,
            1005,
        ),
    ];
    for c in cases {
        let mut req = app
            .client
            .request(c.method.parse().unwrap(), app.url(&c.path))
            .bearer_auth(TOKEN);
        if let Body::Raw(b) = c.body {
            req = req.header("content-type", "application/json").body(b);
        }
        let a = answer(req.send().await.unwrap()).await;
        assert_eq!(
            (a.status, a.code()),
            (c.status, c.code),
            "{}: {:?}",
            c.name,
            a.body
        );
        assert_eq!(a.body["success"], false, "{}", c.name);
        assert!(a.body["data"].is_null(), "{}", c.name);
        assert!(!a.body["msg"].as_str().unwrap().is_empty(), "{}", c.name);
    }
    let after = (
        app.task("po-1").await.body,
        app.task("po-2").await.body,
        app.list("").await.body,
    );
    assert_eq!(before, after, "bad input changed stored data");
}

#[tokio::test]
async fn api_routes_need_the_bearer_token() {
    let app = spawn_app().await;
    let none = answer(app.client.get(app.url("/api/orders")).send().await.unwrap()).await;
    none.assert_err(401, 1001);
    let wrong = answer(
        app.client
            .post(app.url("/api/orders"))
            .bearer_auth("not-the-token")
            .json(&json!({"site": "rakuten", "intent": {}}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    wrong.assert_err(401, 1001);
    assert_eq!(app.list("").await.assert_ok()["total"], 0);
    let lease = answer(
        app.client
            .get(app.url("/api/orders/lease?worker_id=w1&wait=0"))
            .header("authorization", format!("Basic {TOKEN}"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    lease.assert_err(401, 1001);
    // Health and the OpenAPI document are open.
    assert_eq!(app.health().await.status, 200);
}

#[tokio::test]
async fn intents_the_worker_would_always_reject_are_refused_at_submit_with_the_reason() {
    let app = spawn_app().await;
    let url = "https://item.rakuten.co.jp/shop/a/";
    let cases = [
        (json!({"item_url": url, "quantity": "one"}), "quantity"),
        (json!({"item_url": url, "quantity": 0}), "quantity"),
        (json!({"item_url": url, "quantity": -1}), "quantity"),
        (json!({"item_url": url, "quantity": 1.5}), "quantity"),
        (json!({"item_url": url, "quantity": 100}), "quantity"),
        (
            serde_json::from_str(&format!(
                r#"{{"item_url": "{url}", "quantity": 99999999999999999999}}"#
            ))
            .unwrap(),
            "quantity",
        ),
        (
            json!({"item_url": url, "max_total_yen": -5}),
            "max_total_yen",
        ),
        (json!({"item_url": "javascript:alert(1)"}), "item_url"),
        (
            json!({"item_url": "https://example.com/item/1"}),
            "item_url",
        ),
        (
            json!({"item_url": "https://rakuten.co.jp.evil.example/"}),
            "item_url",
        ),
        (json!({"quantity": 1}), "item_url"),
        (json!({"item_url": url, "variant_id": 7}), "variant_id"),
    ];
    for (i, (intent, field)) in cases.into_iter().enumerate() {
        let a = app
            .submit_body(
                json!({"task_id": format!("bad-{i}"), "site": "rakuten", "intent": intent}),
            )
            .await;
        a.assert_err(422, 1003);
        let msg = a.body["msg"].as_str().unwrap();
        assert!(
            msg.starts_with("invalid intent: ") && msg.contains(field),
            "{intent}: {msg}"
        );
    }
    assert_eq!(app.list("").await.assert_ok()["total"], 0, "nothing stored");
}

#[tokio::test]
async fn a_valid_intent_is_stored_exactly_as_sent() {
    let app = spawn_app().await;
    let intent = json!({"item_url": "https://item.rakuten.co.jp/shop/a/", "quantity": 2,
        "options": {"gift": true}, "note": "trading-side field the gateway doesn't know"});
    app.submit_body(json!({"task_id": "po-1", "site": "rakuten", "intent": intent.clone()}))
        .await
        .assert_ok();
    assert_eq!(app.task("po-1").await.assert_ok()["intent"], intent);
}

#[tokio::test]
async fn reusing_a_task_id_with_a_different_intent_is_a_409_naming_the_field() {
    let app = spawn_app().await;
    let body = |q: i64| {
        json!({"task_id": "po-1", "site": "rakuten",
            "intent": {"item_url": "https://item.rakuten.co.jp/shop/a/", "quantity": q}})
    };
    assert_eq!(app.submit_body(body(1)).await.assert_ok()["created"], true);
    assert_eq!(app.submit_body(body(1)).await.assert_ok()["created"], false);
    let a = app.submit_body(body(2)).await;
    a.assert_err(409, 1006);
    let msg = a.body["msg"].as_str().unwrap();
    assert!(msg.contains("intent.quantity"), "{msg}");
    assert_eq!(
        app.task("po-1").await.assert_ok()["intent"]["quantity"],
        1,
        "the first intent is kept"
    );
}

#[tokio::test]
async fn evidence_ref_must_name_this_tasks_evidence() {
    let app = spawn_app().await;
    let grant = app.leased("po-1", "w1").await;
    let token = grant["lease_token"].clone();
    let report = |e: &str| json!({"worker_id": "w1", "lease_token": token, "state": "created", "evidence_ref": e});
    for bad in [
        "po-2/01-cart-add",
        "po-1/1-cart-add",
        "po-1/01-Cart",
        "po-1/01-",
        "po-1/01-cart/x",
        "po-1/../01-cart",
        "/po-1/01-cart",
        "po-1",
        "po-1/01_cart",
        &format!("po-1/01-{}", "a".repeat(260)),
    ] {
        let a = answer(
            app.post("/api/orders/po-1/report")
                .json(&report(bad))
                .send()
                .await
                .unwrap(),
        )
        .await;
        a.assert_err(422, 1003);
    }
    for good in ["po-1/01-cart-add", "po-1/123-order-confirm2"] {
        let a = answer(
            app.post("/api/orders/po-1/report")
                .json(&report(good))
                .send()
                .await
                .unwrap(),
        )
        .await;
        a.assert_ok();
    }
}

#[tokio::test]
async fn an_infinite_wait_is_refused_with_a_clear_message() {
    let app = spawn_app().await;
    for path in [
        "/api/orders/lease?worker_id=w1&wait=inf",
        "/api/account/queries/lease?worker_id=w1&wait=inf",
    ] {
        let a = answer(app.get(path).send().await.unwrap()).await;
        a.assert_err(422, 1003);
        assert_eq!(
            a.body["msg"],
            "wait must be a finite, non-negative number of seconds"
        );
    }
}

/// `[]` was answered "invalid length 0, expected struct SubmitOrder with 3
/// elements", which names Rust internals instead of the mistake.
#[tokio::test]
async fn a_body_that_is_not_an_object_says_so() {
    let app = spawn_app().await;
    for body in ["[]", "[1,2,3]", "\"po-1\"", "  7"] {
        let a = answer(
            app.client
                .post(app.url("/api/orders"))
                .bearer_auth(TOKEN)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap(),
        )
        .await;
        a.assert_err(422, 1003);
        assert_eq!(
            a.body["msg"], "the request body must be a JSON object ({...})",
            "{body}"
        );
    }
}

/// A typo such as `?wiat=30` would be ignored: the long-poll would not wait and nothing would
/// say why. Every API route refuses a query parameter its OpenAPI operation does not list: 422 (1003) naming it, before anything runs (no lease is taken).
#[tokio::test]
async fn an_unknown_query_parameter_is_a_422_naming_it_and_takes_no_lease() {
    let app = spawn_app().await;
    app.submit("po-typo").await.assert_ok();
    let a = answer(
        app.get("/api/orders/lease?worker_id=w1&wiat=30")
            .send()
            .await
            .unwrap(),
    )
    .await;
    a.assert_err(422, 1003);
    let msg = a.body["msg"].as_str().unwrap();
    assert!(msg.contains("`wiat`") && msg.contains("wait"), "{msg}");
    assert_eq!(app.status_of("po-typo").await, "queued");
    // A route without query parameters, a body route, /health, and percent-encoding.
    for (method, path) in [
        ("GET", "/api/orders/po-typo?verbose=1"),
        ("POST", "/api/orders?dry_run=1"),
        ("GET", "/health?full=1"),
        ("GET", "/api/orders?st%61tus=queued&x%20y=1"),
    ] {
        let req = match method {
            "GET" => app.get(path),
            _ => app.post(path).json(&json!({})),
        };
        let a = answer(req.send().await.unwrap()).await;
        a.assert_err(422, 1003);
        assert!(
            a.body["msg"]
                .as_str()
                .unwrap()
                .contains("unknown query parameter"),
            "{path}: {:?}",
            a.body
        );
    }
    // Documented parameters still pass; an anonymous caller still gets 401 first.
    app.list("?status=queued").await.assert_ok();
    let anon = answer(
        app.client
            .get(app.url("/api/orders/lease?worker_id=w1&wiat=30"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(anon.status, 401, "{:?}", anon.body);
}

/// `?worker_id=%ff` was decoded lossily to "\u{FFFD}" and a real order was
/// leased to that name. Query bytes that are not UTF-8 are a 422 that takes no lease, on every
/// documented route.
#[tokio::test]
async fn a_query_that_is_not_utf8_is_a_422_and_takes_no_lease() {
    let app = spawn_app().await;
    app.submit("po-bytes").await.assert_ok();
    for path in [
        "/api/orders/lease?worker_id=%ff&wait=0",
        "/api/orders/lease?worker_id=w1&wait=0&%fe=1",
        "/api/orders?status=%ff%fe",
    ] {
        let a = answer(app.get(path).send().await.unwrap()).await;
        a.assert_err(422, 1003);
        let msg = a.body["msg"].as_str().unwrap();
        assert!(msg.contains("not valid UTF-8"), "{path}: {msg}");
        assert!(!msg.contains('\u{FFFD}'), "the bytes are not echoed: {msg}");
    }
    assert_eq!(app.status_of("po-bytes").await, "queued");
    // Percent-encoded UTF-8 is fine.
    let a = answer(
        app.get("/api/orders/lease?worker_id=%E3%83%AF&wait=0")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.body["data"]["task_id"], "po-bytes", "{:?}", a.body);
    let read = answer(app.get("/api/orders/po-bytes").send().await.unwrap()).await;
    assert_eq!(read.body["data"]["lease_owner"], "ワ", "{:?}", read.body);
}

/// D-body-coding-type-and-size: a body sent with
/// `Content-Encoding: gzip`, as `text/plain` or with no `Content-Type` was read as JSON (and a
/// task was queued), where card-polling answered 415. The gateway now runs the same shared check
/// (`rakuten_edge::body`): 415 in the envelope with its own code 1007, naming
/// `application/json` (or the coding), `Accept-Encoding: identity`, and nothing is stored.
#[tokio::test]
async fn a_compressed_or_non_json_body_is_a_415_with_code_1007_and_nothing_is_queued() {
    let app = spawn_app().await;
    let body = r#"{"task_id":"po-415","site":"rakuten","intent":{}}"#;
    for (content_type, encoding, names) in [
        (
            Some("application/json"),
            Some("gzip"),
            "Content-Encoding \"gzip\"",
        ),
        (
            Some("application/json"),
            Some("identity, br"),
            "Content-Encoding \"br\"",
        ),
        (Some("text/plain"), None, "\"text/plain\""),
        (
            Some("application/x-www-form-urlencoded"),
            None,
            "application/json",
        ),
        (None, None, "no Content-Type"),
    ] {
        let mut req = app.post("/api/orders").body(body);
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        if let Some(ce) = encoding {
            req = req.header("content-encoding", ce);
        }
        let resp = req.send().await.unwrap();
        let accept = resp.headers().get("accept-encoding").cloned();
        let a = answer(resp).await;
        a.assert_err(415, 1007);
        let msg = a.body["msg"].as_str().unwrap();
        assert!(msg.contains(names), "{content_type:?} {encoding:?}: {msg}");
        if encoding.is_none() {
            assert!(msg.contains("`Content-Type: application/json`"), "{msg}");
        }
        assert_eq!(accept.unwrap(), "identity");
    }
    assert_eq!(app.list("").await.assert_ok()["total"], 0, "nothing queued");
    // A body the route requires, left empty, is a 422 that says so whatever its Content-Type.
    let a = answer(
        app.post("/api/orders/po-none/renew")
            .header("content-type", "text/plain")
            .send()
            .await
            .unwrap(),
    )
    .await;
    a.assert_err(422, 1003);
    assert_eq!(a.body["msg"], "a JSON body is required");
    // The document lists the 415 on every operation that takes a body.
    let doc: Value = app
        .client
        .get(app.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(doc["paths"]["/api/orders"]["post"]["responses"]["415"].is_object());
    assert!(doc["paths"]["/api/orders"]["get"]["responses"]["415"].is_null());
}

/// D-body-coding-type-and-size: a 413 named a formula ("RAKUTEN_QUERY_RESULT_MAX_BYTES
/// * 2 + 64 KiB") instead of the limit. Each route's 413 states its own limit in bytes.
#[tokio::test]
async fn a_body_over_its_limit_is_a_413_stating_the_limit_in_bytes() {
    let app = spawn_app().await;
    let pad = "x".repeat(order_gateway::http::MAX_BODY_BYTES);
    let a = answer(
        app.post("/api/orders")
            .json(&json!({"site": "rakuten", "intent": {}, "pad": pad}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    a.assert_err(413, 1004);
    let limit = order_gateway::http::MAX_BODY_BYTES;
    let msg = a.body["msg"].as_str().unwrap();
    assert!(msg.contains(&format!("limit of {limit} bytes")), "{msg}");
    // The query result route has its own limit from the settings.
    let app = spawn_app_with(|s| s.query_result_max_bytes = 4096).await;
    let result_limit = app.settings.query_result_body_limit();
    let a = answer(
        app.post("/api/account/queries/aq-none/result")
            .json(&json!({"pad": "y".repeat(result_limit)}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    a.assert_err(413, 1004);
    let msg = a.body["msg"].as_str().unwrap();
    assert!(
        msg.contains(&format!("limit of {result_limit} bytes")),
        "{msg}"
    );
}

/// D-query-refusal-wording: `?status=bogus` said "unknown status
/// \"bogus\"" without the values it takes. Every list's vocabularies list their values, and
/// `limit` is said in words.
#[tokio::test]
async fn a_list_filter_outside_its_vocabulary_names_every_allowed_value() {
    let app = spawn_app().await;
    for (path, want) in [
        (
            "/api/orders?status=bogus",
            "query parameter `status` cannot be `bogus`: use one of `queued`, `leased`, `running`",
        ),
        (
            "/api/account/queries?status=bogus",
            "query parameter `status` cannot be `bogus`: use one of `queued`, `leased`",
        ),
        (
            "/api/account/queries?kind=x",
            "query parameter `kind` cannot be `x`: use one of `order_list`, `order_detail`",
        ),
        (
            "/api/alerts?kind=x",
            "query parameter `kind` cannot be `x`: use one of `worker_offline`",
        ),
        (
            "/api/alerts?state=closed",
            "query parameter `state` cannot be `closed`: use one of `open`, `all`",
        ),
        (
            "/api/orders?limit=0",
            "limit must be a whole number of 1 or more (a page holds at most 200",
        ),
    ] {
        let a = answer(app.get(path).send().await.unwrap()).await;
        a.assert_err(422, 1003);
        let msg = a.body["msg"].as_str().unwrap();
        assert!(msg.starts_with(want), "{path}: {msg}");
    }
}
