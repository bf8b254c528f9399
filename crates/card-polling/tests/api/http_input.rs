//! Bad input gets a clear 4xx in the envelope, never a 500 or a plain-text answer.

use serde_json::{Value, json};

use super::helpers::*;

#[super::lane]
#[tokio::test]
async fn a_locked_database_answers_503_with_retry_after_within_its_bound_never_a_hang() {
    // A request waited as long as another session held the lock (SQLite: a
    // 500 after the busy timeout; PostgreSQL: for as long as the lock lasted).
    let app = spawn_with(Backend::Memory, |s| s.db_lock_timeout_ms = 300).await;
    app.seed().await;
    let mut lock = super::hold_write_lock(&app.settings).await;
    let body = json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["card_status"], "reason": "t"});
    let started = std::time::Instant::now();
    let resp = app
        .client
        .post(format!("{}/api/priority-items", app.base))
        .bearer_auth(PLATFORM)
        .json(&body)
        .send()
        .await
        .expect("an answer");
    let waited = started.elapsed();
    assert_eq!(resp.status().as_u16(), 503);
    assert_eq!(
        resp.headers().get("retry-after").map(|v| v.to_str().unwrap()),
        Some("1")
    );
    let v: Value = resp.json().await.expect("envelope");
    assert_eq!(v["success"], false, "{v}");
    assert_eq!(v["code"], 1503, "{v}");
    // The bound is the lock timeout (0.3 s) plus a margin, not the lock's lifetime.
    assert!(waited < std::time::Duration::from_secs(10), "{waited:?}");
    sqlx::query("ROLLBACK").execute(&mut lock).await.unwrap();
    let (s, v) = app.enqueue(PLATFORM, body).await;
    assert_eq!(s, 200, "{v}");
}

/// Each of `bad` as the item id of the item's read, close and retrigger routes is a 422 envelope
/// with code 1003.
async fn assert_item_ids_refused(app: &TestApp, bad: &[impl AsRef<str>]) {
    for bad in bad {
        let bad = bad.as_ref();
        let (s, v) = app.get(&format!("/api/priority-items/{bad}"), PLATFORM).await;
        assert_eq!(s, 422, "{bad}: {v}");
        assert_envelope(&v, 1003);
        for action in ["close", "retrigger"] {
            let (s, v) = app
                .post(
                    &format!("/api/priority-items/{bad}/{action}"),
                    PLATFORM,
                    json!({"reason": "r"}),
                )
                .await;
            assert_eq!(s, 422, "{bad}/{action}: {v}");
            assert_envelope(&v, 1003);
        }
    }
}

fn assert_envelope(v: &Value, code: i64) {
    assert_eq!(v["success"], false, "{v}");
    assert_eq!(v["code"], code, "{v}");
    assert!(v["data"].is_null());
    assert!(v["msg"].is_string());
}

#[super::lane]
#[tokio::test]
async fn missing_or_wrong_tokens_get_401_in_the_envelope() {
    let app = spawn_seeded().await;
    let (s, v) = app
        .send(reqwest::Method::GET, "/api/priority-items", None, None)
        .await;
    assert_eq!(s, 401);
    assert_envelope(&v, 1001);
    let (s, v) = app
        .get("/api/priority-items", "not-a-real-token-at-all")
        .await;
    assert_eq!(s, 401);
    assert_envelope(&v, 1001);
    // /health answers anyone without a token, but a wrong token is refused.
    let (s, v) = app.get("/health", "whatever").await;
    assert_eq!(s, 401);
    assert_envelope(&v, 1001);
    // With two Authorization headers the first one won; neither counts now.
    let r = app
        .client
        .get(format!("{}/api/priority-items", app.base))
        .header("authorization", format!("Bearer {PLATFORM}"))
        .header("authorization", "Bearer not-a-real-token-at-all")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
}

#[super::lane]
#[tokio::test]
async fn malformed_requests_get_422_413_or_404_envelopes() {
    let app = spawn_seeded().await;
    // Broken JSON.
    let resp = app
        .client
        .post(format!("{}/api/priority-items", app.base))
        .bearer_auth(PLATFORM)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 422);
    assert_envelope(&resp.json().await.unwrap(), 1003);
    // Oversized body.
    let big = "x".repeat(100 * 1024);
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1", "reason": big}),
        )
        .await;
    assert_eq!(s, 413);
    assert_envelope(&v, 1004);
    // Bad query values and unknown parameters.
    for q in [
        "limit=500",
        "limit=0",
        "status=bogus",
        "trigger_type=x",
        "exception=odd",
        "colour=red",
        "limit=abc",
        "enqueued_from=yesterday",
    ] {
        let (s, v) = app.get(&format!("/api/priority-items?{q}"), PLATFORM).await;
        assert_eq!(s, 422, "{q}: {v}");
        assert_envelope(&v, 1003);
    }
    // Overlong ids and reasons.
    let long = "9".repeat(200);
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": long, "reason": "r"}),
        )
        .await;
    assert_eq!(s, 422);
    assert_envelope(&v, 1003);
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1", "reason": "r".repeat(501)}),
        )
        .await;
    assert_eq!(s, 422);
    assert_envelope(&v, 1003);
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "sim", "asset_id": "CA1", "reason": "r"}),
        )
        .await;
    assert_eq!(s, 422);
    assert_envelope(&v, 1003);
    // A malformed item id is a 422 envelope (D-item-ids-and-list-filters); a well-formed missing one the 404.
    assert_item_ids_refused(&app, &["abc", "0", "-1", "1.5", "99999999999999999999"]).await;
    let (s, v) = app.get("/api/priority-items/424242", PLATFORM).await;
    assert_eq!(s, 404, "{v}");
    assert_envelope(&v, 7001);
    // Unknown route.
    let (s, v) = app.get("/api/nothing-here", PLATFORM).await;
    assert_eq!(s, 404);
    assert_envelope(&v, 1005);
    // Import is super_admin only; a duplicate import is a conflict, not a 500.
    let (s, _) = app.post("/api/admin/import", PLATFORM, json!({})).await;
    assert_eq!(s, 403);
    let (s, v) = app
        .post(
            "/api/admin/import",
            ADMIN,
            json!({"cards": [{"iccid": "CA1", "shop_id": "A"}]}),
        )
        .await;
    assert_eq!(s, 409, "{v}");
    let (s, v) = app
        .post(
            "/api/admin/import",
            ADMIN,
            json!({"cards": [{"iccid": "NEW", "shop_id": "NOSHOP"}]}),
        )
        .await;
    // A shop neither in the file nor stored (D-unknown-reference-is-404).
    assert_eq!(s, 404, "{v}");
    // The import route takes bodies far above the 64 KiB default bound.
    let cards: Vec<_> = (0..1500)
        .map(|i| json!({"iccid": format!("8981{i:016}"), "shop_id": "B", "polling_enabled": true}))
        .collect();
    let (s, v) = app
        .post("/api/admin/import", ADMIN, json!({"cards": cards}))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["data"]["cards"], 1500);
}

/// A refused import said "card already exists" or "card refers to an unknown
/// row" without saying which of thousands of rows. Every refusal, checked at the edge or by the
/// database, now names the row by its 1-based position in its list and its key; nothing is
/// imported (D-import-refusals-name-the-row).
#[super::lane]
#[tokio::test]
async fn an_import_refusal_names_the_row_by_position_and_iccid() {
    let app = spawn_seeded().await;
    let cards = |bad: Value| {
        let mut v: Vec<Value> = (0..20)
            .map(|i| json!({"iccid": format!("8981{i:016}"), "shop_id": "B"}))
            .collect();
        v[16] = bad;
        json!({ "cards": v })
    };
    let cases = [
        // Checked at the edge.
        (cards(json!({"iccid": "8981BAD", "shop_id": "a/b"})), 422, "cards row 17 (iccid 8981BAD): "),
        // A card listed twice: refused before anything is written (D-import-checks-before-writing).
        (cards(json!({"iccid": "89810000000000000003", "shop_id": "B"})), 422, "cards row 17 (iccid 89810000000000000003): card 89810000000000000003 listed twice (first at row 4)"),
        // The database: an existing card, an unknown shop.
        (cards(json!({"iccid": "CA1", "shop_id": "B"})), 409, "cards row 17 (iccid CA1): card already exists"),
        (cards(json!({"iccid": "8981NOSHOP", "shop_id": "NOSHOP"})), 404, "cards row 17 (iccid 8981NOSHOP): card's shop NOSHOP is unknown"),
        // Row by row with other lists: a device and a binding.
        (json!({"devices": [{"device_no": "DEV9", "shop_id": "B"}, {"device_no": "DEV1", "shop_id": "B"}]}), 409, "devices row 2 (device_no DEV1): device already exists"),
        (json!({"bindings": [{"device_no": "DEV1", "iccid": "NOCARD"}]}), 404, "bindings row 1 (iccid NOCARD): "),
    ];
    for (body, status, msg) in cases {
        let (s, v) = app.post("/api/admin/import", ADMIN, body).await;
        assert_eq!(s, status, "{v}");
        let got = v["msg"].as_str().unwrap_or_default();
        assert!(got.starts_with(msg), "want {msg:?}, got {v}");
    }
    // Nothing of a refused import was stored: the same cards, the bad row fixed, all go in.
    let (s, v) = app
        .post("/api/admin/import", ADMIN, cards(json!({"iccid": "8981OK", "shop_id": "B"})))
        .await;
    assert_eq!((s, &v["data"]["cards"]), (200, &json!(20)), "{v}");
}

/// A row whose shop, device or card did not exist was refused as
/// "refers to an unknown row", and a binding did not say whether its device or its card was
/// missing; a platform account was stored with a shop_id it never reads; an
/// unknown device was reported as the card's binding conflict, and two active bindings of one card in
/// one file reported as a conflict with stored data. Each refusal now names the missing key or
/// both rows; nothing of the import is stored. A key neither in the file nor stored is a 404 (7006
/// for a card or device, 1005 for a shop: D-unknown-reference-is-404); the file's own mistakes 422.
#[super::lane]
#[tokio::test]
async fn an_import_refusal_names_the_unknown_shop_device_or_card() {
    let app = spawn_seeded().await;
    let account = |role: &str, shop: &str| {
        json!({"accounts": [{"id": "new-acct", "role": role, "shop_id": shop, "token": "new-acct-token-0123456789"}]})
    };
    let cases = [
        (json!({"cards": [{"iccid": "CNEW1", "shop_id": "B"}, {"iccid": "CNEW2", "shop_id": "NOSHOP"}]}),
         "cards row 2 (iccid CNEW2): card's shop NOSHOP is unknown"),
        (json!({"devices": [{"device_no": "DNEW1", "shop_id": "NOSHOP"}]}),
         "devices row 1 (device_no DNEW1): device's shop NOSHOP is unknown"),
        (account("agent", "NOSHOP"), "accounts row 1 (id new-acct): account's shop NOSHOP is unknown"),
        (account("enterprise", "NOSHOP"), "accounts row 1 (id new-acct): account's shop NOSHOP is unknown"),
        (json!({"bindings": [{"device_no": "DEV1", "iccid": "NOCARD"}]}),
         "bindings row 1 (iccid NOCARD): card NOCARD is unknown"),
        (json!({"bindings": [{"device_no": "NODEV", "iccid": "CA1"}]}),
         "bindings row 1 (iccid CA1): device NODEV is unknown"),
        (json!({"bindings": [{"device_no": "NODEV", "iccid": "NOCARD"}]}),
         "bindings row 1 (iccid NOCARD): device NODEV and card NOCARD are unknown"),
        // An unknown device for a card with an active binding was that binding's 409.
        (json!({"bindings": [{"device_no": "NODEV", "iccid": "D1C1"}]}),
         "bindings row 1 (iccid D1C1): device NODEV is unknown"),
        // Two active bindings of one card in the file: the file's mistake, both rows named.
        (json!({"devices": [{"device_no": "DNEW2", "shop_id": "A1"}, {"device_no": "DNEW3", "shop_id": "A1"}],
                "bindings": [{"device_no": "DEV1", "iccid": "CA1", "active": false}, {"device_no": "DNEW2", "iccid": "CA1"}, {"device_no": "DNEW3", "iccid": "CA1"}]}),
         "bindings row 3 (iccid CA1): card CA1 has two active bindings (first at row 2, device DNEW2)"),
        // Checked at the edge, before the database.
        (json!({"shops": [{"id": "S1", "name": " "}]}), "shops row 1 (id S1): shop name is empty: give the shop a name"),
        (json!({"shops": [{"id": "S1"}]}), "shops row 1 (id S1): shop name is empty: give the shop a name"),
        // Zero-width characters, a NUL (stored by SQLite, refused by PostgreSQL), an
        // ANSI escape.
        (json!({"shops": [{"id": "S1", "name": "\u{200b}\u{200d}\u{feff}"}]}), "shops row 1 (id S1): shop name is empty: give the shop a name"),
        (json!({"shops": [{"id": "S1", "name": "a\u{0}b"}]}), "shops row 1 (id S1): shop name holds a control character (U+0000)"),
        (json!({"shops": [{"id": "S1", "name": "\u{1b}[31mred"}]}), "shops row 1 (id S1): shop name holds a control character (U+001B)"),
        // A Hangul filler draws nothing; U+202E reverses what follows it.
        (json!({"shops": [{"id": "S1", "name": "\u{3164}\u{2800}"}]}), "shops row 1 (id S1): shop name is empty: give the shop a name"),
        (json!({"shops": [{"id": "S1", "name": "ok \u{202e}gnp.exe"}]}), "shops row 1 (id S1): shop name holds the bidirectional control U+202E, which reorders how it reads"),
        (account("platform", "B"), "accounts row 1 (id new-acct): a platform account sees every shop: leave its shop_id out"),
        (account("super_admin", "B"), "accounts row 1 (id new-acct): a super_admin account sees every shop: leave its shop_id out"),
    ];
    for (body, msg) in cases {
        let (s, v) = app.post("/api/admin/import", ADMIN, body).await;
        let want = match (msg.contains(" unknown"), msg.starts_with("bindings")) {
            (true, true) => (404, 7006),
            (true, false) => (404, 1005),
            (false, _) => (422, 1003),
        };
        assert_eq!(s, want.0, "{msg}: {v}");
        assert_envelope(&v, want.1);
        assert_eq!(v["msg"], json!(msg), "{v}");
    }
    // A file moving a card from one device to another is judged by its end state,
    // whichever row comes first.
    let (s, v) = app
        .post("/api/admin/import", ADMIN, json!({"devices": [{"device_no": "DMOVE1", "shop_id": "A1"}]}))
        .await;
    assert_eq!(s, 200, "{v}");
    for rows in [
        json!([{"device_no": "DMOVE1", "iccid": "D1C2"}, {"device_no": "DEV1", "iccid": "D1C2", "active": false}]),
        json!([{"device_no": "DEV1", "iccid": "D1C2"}, {"device_no": "DMOVE1", "iccid": "D1C2", "active": false}]),
    ] {
        let (s, v) = app.post("/api/admin/import", ADMIN, json!({"bindings": rows})).await;
        assert_eq!(s, 200, "{rows}: {v}");
    }
    // A card actively bound to a stored device: the 409 names that device.
    let (s, v) = app
        .post("/api/admin/import", ADMIN, json!({
            "devices": [{"device_no": "DNEW4", "shop_id": "A1"}],
            "bindings": [{"device_no": "DNEW4", "iccid": "D1C1"}]
        }))
        .await;
    assert_eq!(s, 409, "{v}");
    assert_eq!(v["msg"], "bindings row 1 (iccid D1C1): card D1C1 is already actively bound to device DEV1", "{v}");
    // Nothing of them was stored; a platform account without a shop and an enterprise account
    // with a known one still go in.
    let (s, v) = app
        .post("/api/admin/import", ADMIN, json!({
            "cards": [{"iccid": "CNEW1", "shop_id": "B"}],
            "accounts": [
                {"id": "new-plat", "role": "platform", "token": "new-plat-token-0123456789"},
                {"id": "new-ent", "role": "enterprise", "shop_id": "B", "token": "new-ent-token-0123456789"}]
        }))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!((&v["data"]["cards"], &v["data"]["accounts"]), (&json!(1), &json!(2)), "{v}");
}

/// In an import written in parts (over 10,000 rows), a card whose
/// shop is unknown at row 11,500 was found only in the second part, after the first 10,000 cards
/// had committed. The shops are now checked before the first part: nothing is stored.
#[super::lane]
#[tokio::test]
async fn a_large_import_naming_an_unknown_shop_is_refused_before_its_first_part() {
    let app = spawn_seeded().await;
    let file = |bad: Option<usize>| {
        let cards: Vec<Value> = (0..12_000)
            .map(|i| {
                let shop = if Some(i) == bad { "NOSHOP" } else { "B" };
                json!({"iccid": format!("LU{i:06}"), "shop_id": shop})
            })
            .collect();
        json!({"shops": [{"id": "NEW1", "name": "new"}], "accounts": [{"id": "ag-new1", "role": "agent", "shop_id": "NEW1", "token": "ag-new1-token-0123456789"}], "cards": cards})
    };
    let (s, v) = app.post("/api/admin/import", ADMIN, file(Some(11_499))).await;
    assert_eq!(s, 404, "{v}");
    assert_envelope(&v, 1005);
    assert_eq!(v["msg"], "cards row 11500 (iccid LU011499): card's shop NOSHOP is unknown", "{v}");
    // A binding's unknown card is found before the first part too.
    let mut with_binding = file(None);
    with_binding["bindings"] = json!([{"device_no": "DEV1", "iccid": "LU000001", "active": false}, {"device_no": "DEV1", "iccid": "NOCARD"}]);
    let (s, v) = app.post("/api/admin/import", ADMIN, with_binding).await;
    assert_eq!(s, 404, "{v}");
    assert_envelope(&v, 7006);
    assert_eq!(v["msg"], "bindings row 2 (iccid NOCARD): card NOCARD is unknown", "{v}");
    // Nothing was stored: the fixed file goes in whole, every row new.
    let (s, v) = app.post("/api/admin/import", ADMIN, file(None)).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!((&v["data"]["cards"], &v["data"]["shops"], &v["data"]["accounts"]), (&json!(12_000), &json!(1), &json!(1)), "{v}");
}

/// An import written in parts that moves a card between devices: its activation on the new
/// device is row 1 (the first part of bindings) and its deactivation on the old one row 10,002
/// (the second). The first part used to be refused with a 409, the card still being bound to the
/// old device, after the cards had committed; the deactivations now come first across all parts,
/// and rows keep their numbers in messages (D-import-bindings-end-state).
#[super::lane]
#[tokio::test]
async fn a_large_import_moving_a_card_between_devices_deactivates_before_it_activates() {
    let app = spawn_seeded().await;
    let cards: Vec<Value> = (0..10_000)
        .map(|i| json!({"iccid": format!("LM{i:05}"), "shop_id": "A1"}))
        .collect();
    let mut bindings = vec![json!({"device_no": "DMOVE2", "iccid": "D1C2"})];
    bindings.extend((0..10_000).map(|i| json!({"device_no": "DMOVE2", "iccid": format!("LM{i:05}")})));
    bindings.push(json!({"device_no": "DEV1", "iccid": "D1C2", "active": false}));
    let file = json!({"devices": [{"device_no": "DMOVE2", "shop_id": "A1"}], "cards": cards, "bindings": bindings});
    // A refused row is still named by its place in the request, not in its part.
    let mut refused = file.clone();
    refused["bindings"][10_001] = json!({"device_no": "NODEV", "iccid": "D1C2", "active": false});
    let (s, v) = app.post("/api/admin/import", ADMIN, refused).await;
    assert_eq!(s, 404, "{v}");
    assert_eq!(v["msg"], "bindings row 10002 (iccid D1C2): device NODEV is unknown", "{v}");
    let (s, v) = app.post("/api/admin/import", ADMIN, file).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!((&v["data"]["cards"], &v["data"]["bindings"]), (&json!(10_000), &json!(10_002)), "{v}");
    // The card's one active binding is the new device's: its item names DMOVE2.
    let (s, v) = app
        .enqueue(PLATFORM, json!({"asset_type": "card", "asset_id": "D1C2", "task_types": ["card_status"], "reason": "moved"}))
        .await;
    assert_eq!(s, 200, "{v}");
    let id = v["data"]["items"][0]["item_id"].as_i64().expect("an item id");
    let (s, v) = app.get(&format!("/api/priority-items/{id}"), PLATFORM).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["data"]["item"]["device_no"], "DMOVE2", "{v}");
    // A second part of bindings refused after the first committed: the answer says the
    // committed bindings are not the file's first rows, and that all of them may be resent.
    let mut bindings: Vec<Value> = (0..10_000)
        .map(|i| json!({"device_no": "DEV1", "iccid": format!("LM{i:05}"), "active": false}))
        .collect();
    bindings.push(json!({"device_no": "DMOVE2", "iccid": "D1C1"}));
    let (s, v) = app.post("/api/admin/import", ADMIN, json!({"bindings": bindings})).await;
    assert_eq!(s, 409, "{v}");
    assert_eq!(
        v["msg"],
        "bindings row 10001 (iccid D1C1): card D1C1 is already actively bound to device DEV1 \
         (earlier parts of this import are committed and stay: 0 shops, 0 accounts, 0 cards, \
         0 devices, 10000 bindings; resend only the rows after them, or all of them with \
         ?existing=skip; bindings went in deactivations first, not in the file's order: resend \
         all of them (they are upserts))",
        "{v}"
    );
}

/// A client that lost the answer to an import (a crash, a timeout) could not send it again: every
/// row already stored was a 409, and it had no way to learn which were. With `?existing=skip` a
/// row stored exactly as sent is skipped and counted, a row stored with other values is still
/// refused naming the fields, and without the parameter nothing changes (D-import-existing-skip).
#[super::lane]
#[tokio::test]
async fn an_import_resent_with_existing_skip_skips_equal_rows_and_refuses_differing_ones() {
    let app = spawn_seeded().await;
    // Rows of the standard world, exactly as `seed` sent them, and one new card.
    let body = |card: Value, token: &str| {
        json!({
            "shops": [{"id": "A1", "parent_id": "A", "name": "A1"}, {"id": "B", "name": "Agent B"}],
            "accounts": [{"id": "agent-b", "role": "agent", "shop_id": "B", "token": token}],
            "cards": [{"iccid": "CA1", "shop_id": "A"}, card],
            "devices": [{"device_no": "DEV1", "shop_id": "A1"}],
            "bindings": [{"device_no": "DEV1", "iccid": "D1C4", "active": false}]
        })
    };
    let new_card = json!({"iccid": "CNEW1", "shop_id": "B"});
    let (s, v) = app.post("/api/admin/import", ADMIN, body(new_card.clone(), AGENT_B)).await;
    assert_eq!(s, 409, "without the parameter a stored row is refused: {v}");
    let (s, v) = app
        .post("/api/admin/import?existing=skip", ADMIN, body(new_card.clone(), AGENT_B))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["data"],
        json!({"shops": 0, "accounts": 0, "cards": 1, "devices": 0, "bindings": 1,
               "skipped": {"shops": 2, "accounts": 1, "cards": 1, "devices": 1}}),
        "{v}"
    );
    // The new card is an ordinary card now: an enqueue for it is taken.
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CNEW1", "task_types": ["card_status"], "reason": "r"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    // Sent a third time, it is all skipped.
    let (s, v) = app
        .post("/api/admin/import?existing=skip", ADMIN, body(new_card.clone(), AGENT_B))
        .await;
    assert_eq!((s, &v["data"]["cards"], &v["data"]["skipped"]["cards"]), (200, &json!(0), &json!(2)), "{v}");

    // Stored with other values: refused, naming the row and the fields, and nothing of that
    // import is stored (CNEW2 is not).
    let cases = [
        (body(json!({"iccid": "CNEW2", "shop_id": "B"}), "a-token-nobody-holds-0123"), "accounts row 1 (id agent-b): account already exists with other values (token)"),
        (body(json!({"iccid": "CB1", "shop_id": "A", "stop_locked": true}), AGENT_B), "cards row 2 (iccid CB1): card already exists with other values (shop_id, stop_locked)"),
        (json!({"shops": [{"id": "B", "parent_id": "A", "name": "Agent B"}]}), "shops row 1 (id B): shop already exists with other values (parent_id)"),
        (json!({"devices": [{"device_no": "DEV1", "shop_id": "A1", "polling_enabled": false}]}), "devices row 1 (device_no DEV1): device already exists with other values (polling_enabled)"),
    ];
    for (body, msg) in cases {
        let (s, v) = app.post("/api/admin/import?existing=skip", ADMIN, body).await;
        assert_eq!(s, 409, "{v}");
        assert_envelope(&v, 1006);
        assert_eq!(v["msg"], json!(msg), "{v}");
    }
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CNEW2", "task_types": ["card_status"], "reason": "r"}),
        )
        .await;
    assert_eq!(s, 404, "{v}");
    // Another account's token under a new id is refused, and says it is the token (a new
    // user's finding: "account (id or token) already exists" left the reader to guess).
    for query in ["", "?existing=skip"] {
        let (s, v) = app
            .post(
                &format!("/api/admin/import{query}"),
                ADMIN,
                json!({"accounts": [{"id": "agent-b2", "role": "agent", "shop_id": "B", "token": AGENT_B}]}),
            )
            .await;
        assert_eq!(s, 409, "{v}");
        assert_eq!(v["msg"], json!("accounts row 1 (id agent-b2): its token is already another account's"), "{v}");
    }
    // Any other value of the parameter is a 422 naming it.
    let (s, v) = app.post("/api/admin/import?existing=overwrite", ADMIN, json!({})).await;
    assert_eq!(s, 422, "{v}");
    assert_envelope(&v, 1003);
    assert!(v["msg"].as_str().unwrap().contains("existing"), "{v}");
}

/// A card, device or account listed twice in one import was only
/// met by the database, as "card already exists" for a card that did not exist, and past 10,000
/// rows after the parts before it had committed; a shop that was its own parent was "an unknown
/// parent"; a caller who may not import was told what was wrong with its query first. Each is now
/// refused before anything is written, naming both rows (D-import-checks-before-writing).
#[super::lane]
#[tokio::test]
async fn an_import_listing_a_key_twice_is_refused_before_anything_is_written() {
    let app = spawn_seeded().await;
    let card = |i: usize| json!({"iccid": format!("XD{i:06}"), "shop_id": "B"});
    let mut big: Vec<Value> = (0..15_000).map(card).collect();
    big.push(card(5));
    let cases = [
        (json!({"cards": big}), "cards row 15001 (iccid XD000005): card XD000005 listed twice (first at row 6)"),
        (json!({"cards": [card(1), card(1)]}), "cards row 2 (iccid XD000001): card XD000001 listed twice (first at row 1)"),
        (json!({"devices": [{"device_no": "DD", "shop_id": "B"}, {"device_no": "DD", "shop_id": "A"}]}), "devices row 2 (device_no DD): device DD listed twice (first at row 1)"),
        (json!({"accounts": [
            {"id": "dup", "role": "platform", "token": "token-one-0123456789"},
            {"id": "dup", "role": "platform", "token": "token-two-0123456789"}]}),
         "accounts row 2 (id dup): account dup listed twice (first at row 1)"),
        (json!({"accounts": [
            {"id": "one", "role": "platform", "token": "same-token-0123456789"},
            {"id": "two", "role": "platform", "token": "same-token-0123456789"}]}),
         "accounts row 2 (id two): token listed twice (also the token of accounts row 1)"),
    ];
    for (body, msg) in cases {
        for query in ["", "?existing=skip"] {
            let (s, v) = app
                .post(&format!("/api/admin/import{query}"), ADMIN, body.clone())
                .await;
            assert_eq!(s, 422, "{query} {msg}: {v}");
            assert_envelope(&v, 1003);
            assert_eq!(v["msg"], json!(msg), "{v}");
        }
    }
    // Nothing of them was stored: the 15,000 cards go in now, all new.
    let all: Vec<Value> = (0..15_000).map(card).collect();
    let (s, v) = app.post("/api/admin/import", ADMIN, json!({"cards": all})).await;
    assert_eq!((s, &v["data"]["cards"]), (200, &json!(15_000)), "{v}");

    // Shops whose parents loop, and a chain ending at an unknown parent.
    let shops = [
        (json!([{"id": "Z", "name": "z", "parent_id": "Z"}]), "shops row 1 (id Z): shop Z is its own ancestor (its parents lead back to it)"),
        (json!([{"id": "X1", "name": "x", "parent_id": "X2"}, {"id": "X2", "name": "x", "parent_id": "X1"}]), "shops row 1 (id X1): shop X1 is its own ancestor (its parents lead back to it)"),
        (json!([{"id": "Y1", "name": "y", "parent_id": "Y2"}, {"id": "Y2", "name": "y", "parent_id": "NOPE"}]), "shops row 2 (id Y2): shop Y2 has an unknown parent NOPE"),
    ];
    for (list, msg) in shops {
        let (s, v) = app.post("/api/admin/import", ADMIN, json!({"shops": list})).await;
        // A loop is the file's mistake; a parent neither in it nor stored is a 404.
        let want = if msg.contains("unknown parent") { 404 } else { 422 };
        assert_eq!(s, want, "{v}");
        assert_eq!(v["msg"], json!(msg), "{v}");
    }
    // A chain deeper than MAX_SHOP_DEPTH, listed child first (3,000 levels would write 4.5
    // million closure rows in a minute while other imports waited): refused at the first shop
    // too deep, nothing stored; 32 levels below `A` (itself a top shop) are fine.
    let chain = |n: usize, prefix: &str| -> Value {
        let shops: Vec<Value> = (0..n)
            .rev()
            .map(|i| {
                let parent = if i == 0 { "A".to_owned() } else { format!("{prefix}{}", i - 1) };
                json!({"id": format!("{prefix}{i}"), "name": "x", "parent_id": parent})
            })
            .collect();
        json!({ "shops": shops })
    };
    let (s, v) = app.post("/api/admin/import", ADMIN, chain(40, "DC")).await;
    assert_eq!(s, 422, "{v}");
    assert_eq!(v["msg"], json!("shops row 8 (id DC32): shop DC32 would be 33 levels below its top shop (at most 32)"), "{v}");
    let (s, v) = app.post("/api/admin/import", ADMIN, chain(32, "OK")).await;
    assert_eq!((s, &v["data"]["shops"]), (200, &json!(32)), "{v}");
    // A binding listed twice (an upsert each: it was counted twice, the last one winning).
    let (s, v) = app
        .post(
            "/api/admin/import",
            ADMIN,
            json!({"bindings": [{"device_no": "DEV1", "iccid": "D1C1"}, {"device_no": "DEV1", "iccid": "D1C1", "active": false}]}),
        )
        .await;
    assert_eq!(s, 422, "{v}");
    assert_eq!(v["msg"], json!("bindings row 2 (iccid D1C1): binding of device DEV1 and card D1C1 listed twice (first at row 1)"), "{v}");

    // Who may import comes first: a platform token is 403 whatever its query or body.
    for (query, body) in [("?existing=bogus", json!({})), ("", json!({"cards": 1}))] {
        let (s, v) = app
            .post(&format!("/api/admin/import{query}"), PLATFORM, body)
            .await;
        assert_eq!(s, 403, "{query}: {v}");
    }
}

/// `task_types: []` read as "every task type"; an explicit empty list
/// is now a 422, an absent one still means every configured type.
#[super::lane]
#[tokio::test]
async fn an_empty_task_type_list_is_a_422_and_an_absent_one_means_every_type() {
    let app = spawn_seeded().await;
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1", "task_types": [], "reason": "r"}),
        )
        .await;
    assert_eq!(s, 422, "{v}");
    assert_envelope(&v, 1003);
    assert_eq!(app.active_count().await, 0);
    let (s, v) = app
        .post(
            "/api/manual-triggers",
            PLATFORM,
            json!({"iccid": "CA1", "task_types": []}),
        )
        .await;
    assert_eq!(s, 422, "{v}");
    assert_envelope(&v, 1003);
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1", "reason": "r"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["data"]["items"].as_array().unwrap().len(),
        app.settings.task_types.all().len()
    );
}

/// A bulk import over the 32 MiB bound is a 413 in the envelope.
#[super::lane]
#[tokio::test]
async fn an_import_body_over_the_bound_is_a_413_envelope() {
    let app = spawn_seeded().await;
    let mut body = br#"{"cards": [], "pad": ""#.to_vec();
    body.resize(card_polling::http::MAX_IMPORT_BYTES + 1024, b'x');
    body.extend_from_slice(br#""}"#);
    let resp = app
        .client
        .post(format!("{}/api/admin/import", app.base))
        .bearer_auth(ADMIN)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("an answer, not a reset connection");
    assert_eq!(resp.status(), 413);
    let v: serde_json::Value = resp.json().await.expect("an envelope, not plain text");
    assert_envelope(&v, 1004);
    // The route's own limit, in bytes (D-body-coding-type-and-size).
    let limit = card_polling::http::MAX_IMPORT_BYTES;
    assert!(
        v["msg"].as_str().unwrap().contains(&format!("limit of {limit} bytes")),
        "{v}"
    );
}

/// A query parameter of the wrong form was answered "Failed to deserialize
/// query string: limit: invalid digit found in string". The 422 now names the parameter and what
/// it takes, in the envelope, without serde's or Rust's wording (D-query-refusal-wording).
#[super::lane]
#[tokio::test]
async fn a_malformed_query_parameter_is_a_422_naming_it_and_what_it_takes() {
    let app = spawn_seeded().await;
    let (s, v) = app.get("/api/priority-items?limit=ten", PLATFORM).await;
    assert_eq!((s, v["code"].as_i64()), (422, Some(1003)), "{v}");
    assert_eq!(v["success"], false);
    assert_eq!(
        v["msg"],
        "query parameter `limit` must be a whole number written in digits (e.g. 50), within range"
    );
}

/// An unknown query parameter (a typo such as `?stauts=failed`) was ignored,
/// so the list answered every item. Every API route now refuses a query parameter its OpenAPI
/// operation does not list: 422 (1003) naming it; documented parameters still pass.
#[super::lane]
#[tokio::test]
async fn an_unknown_query_parameter_is_a_422_naming_it() {
    let app = spawn_with(Backend::Memory, |_| {}).await;
    app.seed().await;
    for path in [
        "/api/priority-items?stauts=failed",
        "/api/priority-items/1?verbose=1",
        "/health?full=1",
        "/api/task-types?x%20y=1",
    ] {
        let (s, v) = app.get(path, PLATFORM).await;
        assert_eq!((s, v["code"].as_i64()), (422, Some(1003)), "{path}: {v}");
        assert_eq!(v["success"], false);
        assert!(
            v["msg"].as_str().unwrap().contains("unknown query parameter `"),
            "{path}: {v}"
        );
    }
    let (s, v) = app.get("/api/priority-items?stauts=failed", PLATFORM).await;
    assert!(v["msg"].as_str().unwrap().contains("`stauts`"), "{s} {v}");
    assert!(v["msg"].as_str().unwrap().contains("status"), "{v}");
    let (s, v) = app.get("/api/priority-items?status=failed&limit=5", PLATFORM).await;
    assert_eq!(s, 200, "{v}");
}

/// Query bytes that are not UTF-8 once percent-decoded are a 422, never decoded lossily into
/// U+FFFD (the same guard serves both services).
#[super::lane]
#[tokio::test]
async fn a_query_that_is_not_utf8_is_a_422() {
    let app = spawn_with(Backend::Memory, |_| {}).await;
    app.seed().await;
    for path in [
        "/api/priority-items?iccid=%ff",
        "/api/priority-items?status=%ff%fe",
    ] {
        let (s, v) = app.get(path, PLATFORM).await;
        assert_eq!((s, v["code"].as_i64()), (422, Some(1003)), "{path}: {v}");
        assert!(
            v["msg"].as_str().unwrap().contains("not valid UTF-8"),
            "{path}: {v}"
        );
    }
}

#[super::lane]
#[tokio::test]
async fn a_misspelled_or_unknown_body_field_is_a_422_that_names_it_and_stores_nothing() {
    // `task_type` (for `task_types`) was ignored, so the enqueue fell back
    // to "every configured task type" and created three items.
    let app = spawn_seeded().await;
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1", "task_type": ["card_status"], "reason": "typo"}),
        )
        .await;
    assert_eq!(s, 422, "{v}");
    assert_envelope(&v, 1003);
    assert!(v["msg"].as_str().unwrap().contains("task_type"), "{v}");
    let (s, v) = app.get("/api/priority-items", PLATFORM).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["data"]["items"].as_array().unwrap().len(), 0, "{v}");
    // Every body the API reads refuses an unknown field, nested rows included.
    for (path, body) in [
        ("/api/orders", json!({"asset_type": "card", "asset_id": "CA1", "kind": "main", "evil": 1})),
        ("/api/package-poll", json!({"asset_type": "card", "asset_id": "CA1", "evil": 1})),
        ("/api/payments/callback", json!({"payment_id": "p", "order_id": "o", "status": "paid", "evil": 1})),
        ("/api/admin/import", json!({"cards": [{"iccid": "CZ1", "shop_id": "A", "evil": 1}]})),
        ("/api/admin/import", json!({"shops": [{"id": "Z", "evil": 1}]})),
        ("/api/admin/import", json!({"card": []})),
    ] {
        let (s, v) = app.post(path, ADMIN, body).await;
        assert_eq!(s, 422, "{path}: {v}");
        assert_envelope(&v, 1003);
    }
}

/// `GET /api/priority-items?task_type=nope` (a task type this service does
/// not run) answered 200 with an empty page, which reads as "no such items" rather than "typo".
/// It is now the enqueue's answer to an unknown task type: 422, code 1003, naming it; so is the
/// console's list (its 400 page). A configured task type still filters (D-item-ids-and-list-filters).
#[super::lane]
#[tokio::test]
async fn a_list_filtered_by_an_unconfigured_task_type_is_a_422_naming_it() {
    let app = spawn_seeded().await;
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["nope"], "reason": "r"}),
        )
        .await;
    assert_eq!(s, 422, "the enqueue's refusal this mirrors: {v}");
    let enqueue_code = v["code"].clone();
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["package"], "reason": "r"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    for q in ["task_type=nope", "task_type=CARD_STATUS"] {
        let (s, v) = app.get(&format!("/api/priority-items?{q}"), PLATFORM).await;
        assert_eq!(s, 422, "{q}: {v}");
        assert_envelope(&v, 1003);
        assert_eq!(v["code"], enqueue_code, "{q}: {v}");
        assert!(v["msg"].as_str().unwrap().contains("unknown task type"), "{q}: {v}");
    }
    let listed = app.list("task_type=package").await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(app.list("task_type=card_status").await.is_empty());
    // The console's list, signed in, over plain HTTP.
    let cookie = console_cookie(&app, PLATFORM).await;
    for (q, want) in [("task_type=nope", 400), ("task_type=package", 200), ("", 200)] {
        let resp = app
            .client
            .get(format!("{}/console/items?{q}", app.base))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let page = resp.text().await.unwrap();
        assert_eq!(status, want, "{q}: {page}");
        if want == 400 {
            assert!(page.contains("Unknown task type."), "{page}");
        }
    }
}

/// `before_id=0` or a negative one answered 200 (an empty page, or with a
/// negative id every page empty) where the cursor can only be an item id, 1 or more. Such a
/// cursor is a 422 (1003) naming the parameter, like the other bad query values (D-item-ids-and-list-filters).
#[super::lane]
#[tokio::test]
async fn a_before_id_below_one_is_a_422_naming_it() {
    let app = spawn_seeded().await;
    app.buy("card", "CA1", "addon").await;
    for q in [
        "before_id=0",
        "before_id=-1",
        "before_id=-9223372036854775808",
    ] {
        let (s, v) = app.get(&format!("/api/priority-items?{q}"), PLATFORM).await;
        assert_eq!(s, 422, "{q}: {v}");
        assert_envelope(&v, 1003);
        assert!(v["msg"].as_str().unwrap().contains("before_id"), "{q}: {v}");
    }
    assert!(app.list("before_id=1").await.is_empty());
    assert_eq!(
        app.list("before_id=9223372036854775807").await.len(),
        app.list("").await.len()
    );
}

/// `/api/priority-items/+1` and `/api/priority-items/00001` answered item
/// 1. An item id in a path is now canonical decimal — digits only, no sign, no leading zero,
/// 1..=i64::MAX — else the 422 (1003) a non-number already got; the console's item page answers
/// its "No such item." 404 for them, as it does for a non-number (D-item-ids-and-list-filters).
#[super::lane]
#[tokio::test]
async fn a_path_item_id_that_is_not_canonical_decimal_is_refused_like_a_non_number() {
    let app = spawn_seeded().await;
    app.buy("card", "CA1", "addon").await;
    let id = app.item_of("CA1", "package").await["id"].as_i64().unwrap();
    let bad = [
        format!("+{id}"),
        format!("%2B{id}"),
        format!("0{id}"),
        format!("00000{id}"),
        format!("%20{id}"),
        format!("{id}%20"),
        "9223372036854775808".to_owned(),
    ];
    assert_item_ids_refused(&app, &bad).await;
    assert_eq!(app.detail(id).await["item"]["id"], id);
    let (s, v) = app.get("/api/priority-items/9223372036854775807", PLATFORM).await;
    assert_eq!(s, 404, "{v}");
    assert_envelope(&v, 7001);
    // The item is untouched by the refused close.
    assert_eq!(app.detail(id).await["item"]["status"], "pending");
    let cookie = console_cookie(&app, PLATFORM).await;
    let page = |path: String| {
        let (app, cookie) = (&app, cookie.clone());
        async move {
            let resp = app
                .client
                .get(format!("{}{path}", app.base))
                .header("cookie", cookie)
                .send()
                .await
                .unwrap();
            (resp.status().as_u16(), resp.text().await.unwrap())
        }
    };
    for bad in &bad {
        let (s, text) = page(format!("/console/items/{bad}")).await;
        assert_eq!(s, 404, "{bad}: {text}");
        assert!(text.contains("No such item."), "{bad}: {text}");
    }
    let (s, text) = page(format!("/console/items/{id}")).await;
    assert_eq!(s, 200, "{text}");
}

/// `{"asset_type":"card","asset_id":"CA1","reason":"gz"}`, gzip-compressed.
const GZIP_ENQUEUE: [u8; 63] = [
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xab, 0x56, 0x4a, 0x2c, 0x2e, 0x4e,
    0x2d, 0x89, 0x2f, 0xa9, 0x2c, 0x48, 0x55, 0xb2, 0x52, 0x4a, 0x4e, 0x2c, 0x4a, 0x51, 0xd2, 0x81,
    0x8a, 0x65, 0xa6, 0x00, 0x45, 0x9c, 0x1d, 0x0d, 0x81, 0x02, 0x45, 0xa9, 0x89, 0xc5, 0xf9, 0x79,
    0x40, 0x6e, 0x7a, 0x95, 0x52, 0x2d, 0x00, 0xef, 0x68, 0x32, 0xb4, 0x34, 0x00, 0x00, 0x00,
];

/// A body sent with `Content-Encoding: gzip` was a 422 ("invalid JSON"),
/// which says the JSON is wrong when the service simply does not decode compressed bodies. Any
/// content coding but `identity` is now 415 with code 7007 and `Accept-Encoding: identity`, before
/// the body is read, and nothing is stored (D-body-coding-type-and-size).
#[super::lane]
#[tokio::test]
async fn a_compressed_request_body_is_a_415_envelope_with_code_7007() {
    let app = spawn_seeded().await;
    let plain = br#"{"asset_type":"card","asset_id":"CA1","reason":"gz"}"#.to_vec();
    for (encoding, body) in [
        ("gzip", GZIP_ENQUEUE.to_vec()),
        ("gzip", plain.clone()),
        ("br", plain.clone()),
        ("deflate", plain.clone()),
        ("identity, gzip", plain.clone()),
        ("x-unknown", plain.clone()),
    ] {
        let resp = app
            .client
            .post(format!("{}/api/priority-items", app.base))
            .bearer_auth(PLATFORM)
            .header("content-type", "application/json")
            .header("content-encoding", encoding)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 415, "{encoding}");
        assert_eq!(
            resp.headers()
                .get("accept-encoding")
                .map(|v| v.to_str().unwrap()),
            Some("identity"),
            "{encoding}"
        );
        let v: Value = resp.json().await.expect("an envelope");
        assert_envelope(&v, 7007);
        assert!(v["msg"].as_str().unwrap().contains("Content-Encoding"), "{v}");
    }
    assert_eq!(app.active_count().await, 0, "nothing enqueued");
    // `identity` is no coding at all: accepted.
    let resp = app
        .client
        .post(format!("{}/api/priority-items", app.base))
        .bearer_auth(PLATFORM)
        .header("content-type", "application/json")
        .header("content-encoding", "Identity")
        .body(plain)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
}

/// On PostgreSQL a NUL byte in an imported shop name was a 503 "the
/// database is busy; retry shortly" (PostgreSQL refuses NUL in `TEXT`), so a client would retry
/// forever. It is the request's input: a 422 (1003) naming the cause (D-unstorable-text-is-422). A shop
/// name's control characters are refused at the edge on both engines
/// (D-import-checks-before-writing), so a file that loads on one loads on the other; the database's own refusal stays
/// mapped to a 422 for any text that reaches it.
#[super::lane]
#[tokio::test]
async fn a_nul_byte_the_database_cannot_store_is_a_422_never_a_busy_503() {
    let app = spawn_seeded().await;
    let (s, v) = app
        .post(
            "/api/admin/import",
            ADMIN,
            json!({"shops": [{"id": "Z", "name": "a\u{0}b"}]}),
        )
        .await;
    assert_eq!(s, 422, "{v}");
    assert_envelope(&v, 1003);
    assert_eq!(
        v["msg"],
        "shops row 1 (id Z): shop name holds a control character (U+0000)",
        "{v}"
    );
}

/// An imported id with a zero-width space or a right-to-left override was
/// stored, and then looked like another card on every page that showed it. Invisible characters
/// are refused like control characters (422, 1003), in both id spaces of an import, and nothing of
/// the refused import is stored (D-id-rules).
#[super::lane]
#[tokio::test]
async fn an_imported_id_with_an_invisible_character_is_refused() {
    let app = spawn_seeded().await;
    for body in [
        json!({"cards": [{"iccid": "8981\u{200B}0001", "shop_id": "A"}]}),
        json!({"shops": [{"id": "Z\u{202E}Y", "name": "spoof"}]}),
    ] {
        let (s, v) = app.post("/api/admin/import", ADMIN, body.clone()).await;
        assert_eq!(s, 422, "{body} -> {v}");
        assert_envelope(&v, 1003);
        assert!(v["msg"].as_str().unwrap().contains("invisible"), "{v}");
    }
    let (s, v) = app.get("/api/cards/8981\u{200B}0001", ADMIN).await;
    assert_ne!(s, 200, "{v}");
}

/// The admin routes answered an unknown card or device with 404 code 1005
/// ("card not found"), the code of an unknown route too, while the manual enqueue and trigger
/// answered the same message with 7006 (D-poll-error-codes). Every 404 about a card, device or asset is now
/// code 7006, whichever route asks; an unknown route, order or usage record keeps 1005, and an
/// unknown card or device in a binding is 404 with 7006 too (D-unknown-reference-is-404).
#[super::lane]
#[tokio::test]
async fn an_admin_route_naming_an_unknown_card_or_device_answers_code_7006() {
    use reqwest::Method;
    let app = spawn_seeded().await;
    let cases = [
        (Method::PUT, "/api/cards/NOPE/polling", Some(json!({"enabled": false})), "card"),
        (Method::PUT, "/api/cards/NOPE/stop-lock", Some(json!({"locked": true})), "card"),
        (Method::DELETE, "/api/cards/NOPE", None, "card"),
        (Method::PUT, "/api/devices/NODEV/polling", Some(json!({"enabled": false})), "device"),
        (Method::PUT, "/api/devices/NODEV/reported-slot", Some(json!({"iccid": "CA1"})), "device"),
        (
            Method::POST,
            "/api/package-poll",
            Some(json!({"asset_type": "card", "asset_id": "NOPE"})),
            "asset",
        ),
        (
            Method::POST,
            "/api/package-poll",
            Some(json!({"asset_type": "device", "asset_id": "NODEV"})),
            "asset",
        ),
    ];
    for token in [ADMIN, PLATFORM] {
        for (method, path, body, what) in &cases {
            let (s, v) = app
                .send(method.clone(), path, Some(token), body.clone())
                .await;
            assert_eq!(s, 404, "{method} {path}: {v}");
            assert_envelope(&v, 7006);
            assert_eq!(v["msg"], json!(format!("{what} not found")), "{path}: {v}");
        }
    }
    // The same bytes as the manual trigger's unknown card.
    let (_, manual) = app
        .post(
            "/api/manual-triggers",
            PLATFORM,
            json!({"iccid": "NOPE", "task_types": ["card_status"]}),
        )
        .await;
    let (_, admin) = app
        .put("/api/cards/NOPE/polling", PLATFORM, json!({"enabled": true}))
        .await;
    assert_eq!(admin, manual);
    // 1005 stays the code of an unknown route and of other missing resources.
    let (s, v) = app
        .put("/api/cards/CA1/nothing-here", ADMIN, json!({"enabled": true}))
        .await;
    assert_eq!(s, 404, "{v}");
    assert_envelope(&v, 1005);
    let (s, v) = app.post("/api/usages/NOPE/activate", ADMIN, json!({})).await;
    assert_eq!((s, v["msg"].as_str()), (404, Some("usage record not found")), "{v}");
    assert_envelope(&v, 1005);
    let (s, v) = app
        .post(
            "/api/payments/callback",
            ADMIN,
            json!({"payment_id": "P-NOPE", "order_id": "NOPE", "status": "paid"}),
        )
        .await;
    assert_eq!((s, v["msg"].as_str()), (404, Some("order not found")), "{v}");
    assert_envelope(&v, 1005);
    // A binding naming a card or device that does not exist: 404 with 7006, the message naming it.
    let (s, v) = app
        .put(
            "/api/bindings",
            ADMIN,
            json!({"device_no": "NODEV", "iccid": "CA1"}),
        )
        .await;
    assert_eq!((s, v["msg"].as_str()), (404, Some("device NODEV is unknown")), "{v}");
    assert_envelope(&v, 7006);
    // Nothing changed: the known card still answers and still polls.
    let (s, v) = app
        .put("/api/cards/CA1/polling", ADMIN, json!({"enabled": true}))
        .await;
    assert_eq!(s, 200, "{v}");
}

/// D-body-coding-type-and-size: a `charset` parameter on
/// `application/json` has no effect (RFC 8259 §11). An ASCII body labelled latin-1 is read; a
/// body with a latin-1 byte that is not UTF-8 is a 422, as it would be without the label.
#[super::lane]
#[tokio::test]
async fn a_charset_parameter_on_json_has_no_effect_and_non_utf8_bytes_are_a_422() {
    let app = spawn_seeded().await;
    let post = |body: Vec<u8>| {
        app.client
            .post(format!("{}/api/priority-items", app.base))
            .bearer_auth(PLATFORM)
            .header("Content-Type", "application/json; charset=latin1")
            .body(body)
            .send()
    };
    let ascii = br#"{"asset_type":"card","asset_id":"CA1","task_types":["card_status"],"reason":"charset"}"#;
    let resp = post(ascii.to_vec()).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let mut latin1 = br#"{"asset_type":"card","asset_id":"CA1","task_types":["card_status"],"reason":"caf"#.to_vec();
    latin1.extend_from_slice(b"\xe9\"}");
    let resp = post(latin1).await.unwrap();
    assert_eq!(resp.status().as_u16(), 422);
    let v: Value = resp.json().await.unwrap();
    assert_envelope(&v, 1003);
}

/// D-json-body-rules: `null` was refused as "invalid type: null, expected
/// struct EnqueueBody", a JSON array was read as a positional body and enqueued an item, and a
/// wrong type deep in an import said only "at line 1 column 93". A body must be an object; a
/// field's refusal names its path and what it takes in JSON's words.
#[super::lane]
#[tokio::test]
async fn a_body_that_is_no_object_is_refused_and_a_bad_field_is_named_by_its_path() {
    let app = spawn_seeded().await;
    for body in [
        json!(null),
        json!(["card", "CA1", ["card_status"], "array form", null]),
    ] {
        let (s, v) = app.enqueue(PLATFORM, body.clone()).await;
        assert_eq!(s, 422, "{body}: {v}");
        assert_envelope(&v, 1003);
        assert_eq!(v["msg"], "the request body must be a JSON object ({...})", "{v}");
    }
    let (s, v) = app
        .enqueue(PLATFORM, json!({"asset_type": "card", "asset_id": 1, "task_types": ["card_status"], "reason": "r"}))
        .await;
    assert_eq!(s, 422, "{v}");
    let msg = v["msg"].as_str().unwrap();
    assert!(msg.starts_with("invalid JSON body: asset_id: invalid type: integer `1`, expected a string"), "{msg}");
    let (s, v) = app
        .post(
            "/api/admin/import",
            ADMIN,
            json!({"cards": [{"iccid": "IMP1", "shop_id": "A"}, {"iccid": "IMP2", "shop_id": "A", "polling_enabled": "no"}]}),
        )
        .await;
    assert_eq!(s, 422, "{v}");
    let msg = v["msg"].as_str().unwrap();
    assert!(msg.starts_with("invalid JSON body: cards[1].polling_enabled: "), "{msg}");
    for rust in ["struct", "Body", "Batch", "CardRow"] {
        assert!(!msg.contains(rust), "{msg}");
    }
}

/// D-body-coding-type-and-size: a JSON body sent as `text/plain` (or with no
/// `Content-Type`, or as a form) was a 422 "Expected request with `Content-Type:
/// application/json`", which reads as bad JSON. It is the wrong media type: 415, code 7007 (the
/// code of a compressed body), naming `application/json`, and nothing is stored. The gateway
/// answers the same check with its 1007.
#[super::lane]
#[tokio::test]
async fn a_body_not_sent_as_json_is_a_415_naming_application_json() {
    let app = spawn_seeded().await;
    let body = r#"{"asset_type":"card","asset_id":"CA1","reason":"typed"}"#;
    for content_type in [
        Some("text/plain"),
        Some("text/plain; charset=utf-8"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let mut req = app
            .client
            .post(format!("{}/api/priority-items", app.base))
            .bearer_auth(PLATFORM)
            .body(body);
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 415, "{content_type:?}");
        let v: Value = resp.json().await.expect("an envelope");
        assert_envelope(&v, 7007);
        let msg = v["msg"].as_str().unwrap();
        assert!(msg.contains("`Content-Type: application/json`"), "{msg}");
        if let Some(ct) = content_type {
            let essence = ct.split(';').next().unwrap();
            assert!(msg.contains(essence), "names what was sent: {msg}");
        }
    }
    assert_eq!(app.active_count().await, 0, "nothing enqueued");
    // `application/*+json` is JSON.
    let resp = app
        .client
        .post(format!("{}/api/priority-items", app.base))
        .bearer_auth(PLATFORM)
        .header("content-type", "application/merge-patch+json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
}

/// D-body-coding-type-and-size: a 413 said "request body too large" and not the limit,
/// so a client could only guess how much to cut. The message states the route's limit in bytes:
/// 65536 for ordinary routes (the import's 33554432 is checked by
/// `an_import_body_over_the_bound_is_a_413_envelope`).
#[super::lane]
#[tokio::test]
async fn a_body_over_its_limit_is_a_413_stating_the_limit_in_bytes() {
    let app = spawn_seeded().await;
    let (s, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1", "reason": "x".repeat(100 * 1024)}),
        )
        .await;
    assert_eq!(s, 413, "{v}");
    assert_envelope(&v, 1004);
    let limit = card_polling::http::MAX_BODY_BYTES;
    assert!(
        v["msg"].as_str().unwrap().contains(&format!("limit of {limit} bytes")),
        "{v}"
    );
}

/// D-query-refusal-wording: `?limit=500` answered "limit must be 1..=200" (Rust's
/// range syntax) and `?status=bogus` "unknown status", which does not say what is allowed. The
/// range is said in words and every refused vocabulary lists its values.
#[super::lane]
#[tokio::test]
async fn list_query_refusals_say_the_range_in_words_and_list_the_allowed_values() {
    let app = spawn_seeded().await;
    for (q, want) in [
        ("limit=500", "limit must be a whole number from 1 to 200"),
        ("limit=0", "limit must be a whole number from 1 to 200"),
        (
            "status=bogus",
            "query parameter `status` cannot be `bogus`: use one of `pending`, `running`, \
             `completed`, `failed`, `closed`, `expired`",
        ),
        ("trigger_type=x", "query parameter `trigger_type` cannot be `x`: use one of `"),
        (
            "exception=odd",
            "query parameter `exception` cannot be `odd`: use one of `any`, `failed`, `expired`, \
             `attempts_at_max`, `has_failure_reason`",
        ),
    ] {
        let (s, v) = app.get(&format!("/api/priority-items?{q}"), PLATFORM).await;
        assert_eq!(s, 422, "{q}: {v}");
        assert_envelope(&v, 1003);
        let msg = v["msg"].as_str().unwrap();
        assert!(msg.starts_with(want), "{q}: {msg}");
        assert!(!msg.contains("..="), "{q}: {msg}");
    }
}

/// D-admin-token-is-nobody-elses: an account imported with the admin token would sign in as the bootstrap
/// super_admin, never as itself. The import refuses that row (422, naming it and the variable);
/// nothing is imported.
#[super::lane]
#[tokio::test]
async fn an_account_imported_with_the_admin_token_is_refused_naming_the_row() {
    let app = spawn_seeded().await;
    let (s, v) = app
        .post(
            "/api/admin/import",
            ADMIN,
            json!({"accounts": [
                {"id": "ok-one", "role": "platform", "token": "a-token-of-its-own-0123"},
                {"id": "collapsed", "role": "platform", "token": ADMIN},
            ]}),
        )
        .await;
    assert_eq!(s, 422, "{v}");
    assert_envelope(&v, 1003);
    let msg = v["msg"].as_str().unwrap();
    assert!(
        msg.starts_with("accounts row 2 (id collapsed): token is the admin token (RAKUTEN_POLL_ADMIN_TOKEN)"),
        "{msg}"
    );
    let (s, _) = app.get("/api/priority-items", "a-token-of-its-own-0123").await;
    assert_eq!(s, 401, "the batch was refused whole");
}

/// The import's optional keys (`shops[].parent_id`, `accounts[].shop_id`,
/// `devices[].reported_slot_iccid`) may be `null`, read as absent, and the OpenAPI document says
/// so: a client generated from it may send what the server takes.
#[super::lane]
#[tokio::test]
async fn an_import_takes_null_for_an_optional_key_as_its_document_states() {
    let app = spawn_seeded().await;
    let doc = card_polling::http::openapi::document();
    // The document's schemas are components: follow each `$ref`.
    let resolve = |v: &Value| -> Value {
        match v["$ref"].as_str().and_then(|r| r.strip_prefix('#')) {
            Some(pointer) => doc.pointer(pointer).cloned().unwrap_or(Value::Null),
            None => v.clone(),
        }
    };
    let rows = resolve(
        &doc["paths"]["/api/admin/import"]["post"]["requestBody"]["content"]["application/json"]
            ["schema"],
    )["properties"]
        .clone();
    for (list, key) in [("shops", "parent_id"), ("accounts", "shop_id"), ("devices", "reported_slot_iccid")] {
        assert_eq!(
            resolve(&rows[list]["items"])["properties"][key]["type"],
            json!(["string", "null"]),
            "{list}[].{key}"
        );
    }
    let (s, v) = app
        .post(
            "/api/admin/import",
            ADMIN,
            json!({
                "shops": [{"id": "NULLTOP", "parent_id": null, "name": "top"}],
                "devices": [{"device_no": "DNULL1", "shop_id": "NULLTOP", "reported_slot_iccid": null}],
            }),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["data"]["shops"], 1, "{v}");
    assert_eq!(v["data"]["devices"], 1, "{v}");
}
