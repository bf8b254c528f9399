use serde_json::{Value, json};
use shop_sim::page::extract_state;
use shop_sim::{Faults, PaymentMethod, ShopConfig, SpawnedShop};

async fn shop_with(cfg: ShopConfig) -> (SpawnedShop, reqwest::Client) {
    let shop = shop_sim::spawn(cfg).await.expect("spawn");
    (shop, reqwest::Client::new())
}

async fn page(
    c: &reqwest::Client,
    shop: &SpawnedShop,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let url = format!("{}{path}", shop.base_url);
    let mut req = if method == "GET" {
        c.get(url)
    } else {
        c.post(url)
    };
    req = req.header("cookie", "session=sim-session");
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.expect("send");
    let status = resp.status().as_u16();
    let html = resp.text().await.expect("text");
    (status, extract_state(&html).expect("state"))
}

#[tokio::test]
async fn an_order_walks_from_cart_to_paid_and_is_logged_once() {
    let (shop, c) = shop_with(ShopConfig::default()).await;
    let detail: Value = c
        .post(format!("{}/api/item_detail", shop.base_url))
        .json(&json!({"url": "https://item.rakuten.co.jp/simshop/sample-tea/"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(detail["data"]["purchase"]["item_id"], 1001);
    let (s, _) = page(
        &c,
        &shop,
        "POST",
        "/cart/add",
        Some(json!({"item_id": 1001, "quantity": 2})),
    )
    .await;
    assert_eq!(s, 200);
    let (_, confirm) = page(&c, &shop, "GET", "/order/confirm", None).await;
    let payable = confirm["confirm"]["payable_yen"].as_i64().unwrap();
    assert_eq!(payable, 2980 * 2);
    let (_, done) = page(
        &c,
        &shop,
        "POST",
        "/order/submit",
        Some(json!({"expected_payable_yen": payable, "note": "t1"})),
    )
    .await;
    let n = done["order"]["order_number"].as_str().unwrap().to_owned();
    assert!(n.starts_with("306087-"), "{n}");
    let (_, paid) = page(&c, &shop, "POST", &format!("/orders/{n}/pay"), None).await;
    assert_eq!(paid["payment"]["status"], "paid");
    let (_, detail) = page(&c, &shop, "GET", &format!("/orders/{n}"), None).await;
    assert_eq!(detail["orderDetail"]["order"]["stage_label"], "発送準備中");
    assert_eq!(
        detail["orderDetail"]["order"]["note"], "t1",
        "the remark is shown"
    );
    let (_, list) = page(&c, &shop, "GET", "/orders?page=1", None).await;
    assert_eq!(
        list["orderListData"]["orders"][0]["order_number"],
        n.as_str()
    );
    assert_eq!(
        list["orderListData"]["orders"][0]["note"], "t1",
        "the order list shows the remark too"
    );
    assert_eq!(shop.submissions().len(), 1);
    shop.stop().await;
}

#[tokio::test]
async fn dropped_connection_still_creates_the_order() {
    let cfg = ShopConfig {
        faults: Faults {
            drop_after_order: true,
            ..Faults::default()
        },
        ..ShopConfig::default()
    };
    let (shop, c) = shop_with(cfg).await;
    page(
        &c,
        &shop,
        "POST",
        "/cart/add",
        Some(json!({"item_id": 1001})),
    )
    .await;
    let res = async {
        c.post(format!("{}/order/submit", shop.base_url))
            .header("cookie", "session=sim-session")
            .json(&json!({"expected_payable_yen": 3480}))
            .send()
            .await?
            .text()
            .await
    }
    .await;
    assert!(res.is_err(), "client must see an error, got {res:?}");
    assert_eq!(shop.submissions().len(), 1);
    shop.stop().await;
}

#[tokio::test]
async fn lost_login_answers_the_login_page_and_konbini_waits_for_payment() {
    let cfg = ShopConfig {
        payment_method: PaymentMethod::Konbini,
        ..ShopConfig::default()
    };
    let (shop, c) = shop_with(cfg).await;
    page(
        &c,
        &shop,
        "POST",
        "/cart/add",
        Some(json!({"item_id": 1002, "variant_id": "red-m"})),
    )
    .await;
    let (_, confirm) = page(&c, &shop, "GET", "/order/confirm", None).await;
    assert!(confirm["confirm"]["pay_deadline"].is_string());
    c.post(format!("{}/admin/faults", shop.base_url))
        .json(&json!({"logged_out": true}))
        .send()
        .await
        .unwrap();
    let (_, login) = page(&c, &shop, "GET", "/cart", None).await;
    assert_eq!(login["logged_in"], false);
    shop.stop().await;
}

async fn place(c: &reqwest::Client, shop: &SpawnedShop, item_id: i64) -> (u16, Value) {
    page(
        c,
        shop,
        "POST",
        "/cart/add",
        Some(json!({"item_id": item_id})),
    )
    .await;
    let (_, confirm) = page(c, shop, "GET", "/order/confirm", None).await;
    let payable = confirm["confirm"]["payable_yen"].as_i64().unwrap();
    page(
        c,
        shop,
        "POST",
        "/order/submit",
        Some(json!({"expected_payable_yen": payable})),
    )
    .await
}

#[tokio::test]
async fn order_list_pages_newest_first_and_can_change_shape() {
    let (shop, c) = shop_with(ShopConfig {
        page_size: 2,
        ..ShopConfig::default()
    })
    .await;
    for _ in 0..3 {
        place(&c, &shop, 1001).await;
    }
    let (_, p1) = page(&c, &shop, "GET", "/orders?page=1", None).await;
    let (_, p2) = page(&c, &shop, "GET", "/orders?page=2", None).await;
    assert_eq!(p1["orderListData"]["total_pages"], 2);
    assert_eq!(p1["orderListData"]["orders"].as_array().unwrap().len(), 2);
    assert_eq!(p2["orderListData"]["orders"].as_array().unwrap().len(), 1);
    let first = p1["orderListData"]["orders"][0]["order_number"]
        .as_str()
        .unwrap();
    let last = p2["orderListData"]["orders"][0]["order_number"]
        .as_str()
        .unwrap();
    assert!(first > last, "newest first: {first} then {last}");
    c.post(format!("{}/admin/faults", shop.base_url))
        .json(&json!({"order_list_changed": true}))
        .send()
        .await
        .unwrap();
    let (_, changed) = page(&c, &shop, "GET", "/orders?page=1", None).await;
    assert!(changed.get("orderListData").is_none());
    shop.stop().await;
}

#[tokio::test]
async fn price_change_refuses_a_stale_submit_and_3ds_leaves_the_order_unpaid() {
    let cfg = ShopConfig {
        faults: Faults {
            three_d_secure: true,
            ..Faults::default()
        },
        ..ShopConfig::default()
    };
    let (shop, c) = shop_with(cfg).await;
    page(
        &c,
        &shop,
        "POST",
        "/cart/add",
        Some(json!({"item_id": 1001})),
    )
    .await;
    let (_, confirm) = page(&c, &shop, "GET", "/order/confirm", None).await;
    let payable = confirm["confirm"]["payable_yen"].as_i64().unwrap();
    c.post(format!("{}/admin/faults", shop.base_url))
        .json(&json!({"price_change_yen": 100}))
        .send()
        .await
        .unwrap();
    let (s, err) = page(
        &c,
        &shop,
        "POST",
        "/order/submit",
        Some(json!({"expected_payable_yen": payable})),
    )
    .await;
    assert_eq!((s, err["page"].as_str()), (409, Some("error")));
    assert!(shop.submissions().is_empty());
    let (_, done) = place(&c, &shop, 1001).await;
    let n = done["order"]["order_number"].as_str().unwrap().to_owned();
    let (_, paid) = page(&c, &shop, "POST", &format!("/orders/{n}/pay"), None).await;
    assert_eq!(paid["payment"]["status"], "challenge_required");
    assert_eq!(paid["order"]["status"], "ordered");
    shop.stop().await;
}

#[tokio::test]
async fn fail_route_answers_503_the_given_number_of_times_then_serves_again() {
    let (shop, c) = shop_with(ShopConfig::default()).await;
    let set: Value = c
        .post(format!("{}/admin/faults", shop.base_url))
        .json(&json!({"fail_route": {"path": "/cart", "times": 2}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(set["fail_route"]["times"], 2);
    // Another route is not affected.
    let (s, _) = page(&c, &shop, "GET", "/order/confirm", None).await;
    assert_ne!(s, 503);
    for _ in 0..2 {
        let (s, err) = page(&c, &shop, "GET", "/cart", None).await;
        assert_eq!(s, 503);
        assert_eq!(err["page"], "error");
    }
    let (s, cart) = page(&c, &shop, "GET", "/cart", None).await;
    assert_eq!(s, 200);
    assert_eq!(cart["page"], "cart");
    let faults: Value = c
        .get(format!("{}/admin/faults", shop.base_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(faults["fail_route"].is_null(), "{faults}");
    // `null` turns an armed fault off.
    c.post(format!("{}/admin/faults", shop.base_url))
        .json(&json!({"fail_route": {"path": "/cart", "times": 5}}))
        .send()
        .await
        .unwrap();
    c.post(format!("{}/admin/faults", shop.base_url))
        .json(&json!({"fail_route": null}))
        .send()
        .await
        .unwrap();
    let (s, _) = page(&c, &shop, "GET", "/cart", None).await;
    assert_eq!(s, 200);
    shop.stop().await;
}
