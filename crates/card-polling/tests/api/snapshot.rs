//! Requirement "入队执行对象为资产当前在用卡".

use serde_json::json;

use card_polling::upstream::SimBehavior;

use super::helpers::*;

#[super::lane]
#[tokio::test]
async fn device_with_three_active_cards_gets_one_item_per_card() {
    let app = spawn_seeded().await;
    // The device reports an inactive card in its slot: never used as the target.
    app.put(
        "/api/devices/DEV1/reported-slot",
        PLATFORM,
        json!({"iccid": "D1C4"}),
    )
    .await;
    let out = app.buy("device", "DEV1", "main").await;
    assert_eq!(
        out["items"].as_array().unwrap().len(),
        9,
        "3 cards x 3 task types"
    );
    for card in ["D1C1", "D1C2", "D1C3"] {
        let items = app.list(&format!("iccid={card}")).await;
        assert_eq!(items.len(), 3, "{card}");
        assert!(
            items
                .iter()
                .all(|i| i["device_no"] == "DEV1" && i["asset_type"] == "device")
        );
    }
    assert_eq!(app.list("iccid=D1C4").await.len(), 0);
    // Each card's result is recorded on its own item.
    app.sim.set_behavior("D1C2", SimBehavior::Unknown);
    app.run_executor().await;
    for card in ["D1C1", "D1C3"] {
        let i = app.item_of(card, "card_status").await;
        assert_eq!(i["status"], "completed", "{i}");
        assert_eq!(i["result"], "ok");
    }
    let failed = app.item_of("D1C2", "card_status").await;
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["failure_reason"], "carrier does not know the card");
    app.assert_invariants().await;
}

#[super::lane]
#[tokio::test]
async fn binding_changes_after_the_trigger_do_not_change_the_frozen_cards() {
    let app = spawn_seeded().await;
    app.buy("device", "DEV1", "addon").await;
    app.put(
        "/api/bindings",
        PLATFORM,
        json!({"device_no": "DEV1", "iccid": "D1C1", "active": false}),
    )
    .await;
    app.put(
        "/api/bindings",
        PLATFORM,
        json!({"device_no": "DEV1", "iccid": "D1C4", "active": true}),
    )
    .await;
    app.put(
        "/api/devices/DEV1/reported-slot",
        PLATFORM,
        json!({"iccid": "D1C4"}),
    )
    .await;
    let cards: std::collections::BTreeSet<String> = app
        .list("limit=200")
        .await
        .iter()
        .map(|i| i["iccid"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        cards.into_iter().collect::<Vec<_>>(),
        ["D1C1", "D1C2", "D1C3"]
    );
    app.run_executor().await;
    assert_eq!(
        app.sim.poll_calls_for_card("D1C4"),
        0,
        "no retroactive new card"
    );
    assert_eq!(
        app.sim.poll_calls_for_card("D1C1"),
        3,
        "the frozen card is still polled"
    );
}
