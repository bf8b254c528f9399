//! Soak: 10,000 cards, random priority triggers (manual and payments), ordinary manual
//! triggers, closes, polling switches, lost hint lanes and carrier failures for a few simulated
//! hours on the injected clock (a cycle per simulated minute, no sleeps), with a 24 h clock jump
//! near the end so the expiry job dequeues items whose hints are still in the lane. Then every
//! invariant is checked over every row.
//!
//! `CARD_POLLING_SOAK_HOURS` (default 3) and `CARD_POLLING_SOAK_CARDS` (default 10,000) make it
//! longer or larger.

use std::collections::HashMap;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use card_polling::domain::asset::{AssetRef, AssetType, BindingRow, CardRow, DeviceRow};
use card_polling::domain::{Account, PackageKind, PaymentStatus, Role, Scope, Shop, TaskTypes};
use card_polling::hints::ChannelLane;
use card_polling::priority::manual::{self, ManualRequest};
use card_polling::store::{ImportBatch, PaymentCallback};
use card_polling::upstream::SimConfig;
use rakuten_types::Clock;

use super::helpers::*;

#[test_util::lane(soak)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_keeps_every_invariant_over_simulated_hours() {
    let hours = env_or("CARD_POLLING_SOAK_HOURS", 3);
    let cards = env_or("CARD_POLLING_SOAK_CARDS", 10_000);
    let unknown: std::collections::HashSet<String> = (0..cards).step_by(97).map(iccid).collect();
    let sim = SimConfig {
        latency: Duration::ZERO,
        failure_rate: 0.15,
        timeout_rate: 0.05,
        unknown_iccids: unknown,
    };
    let app = spawn_with_sim(Backend::Memory, sim, |s| {
        // Long intervals and small shard batches keep the ordinary load (the bulk of the run
        // time in a debug build) at a few thousand polls per simulated hour.
        s.task_types =
            TaskTypes::parse("card_status=14400,data_usage=28800,package=28800").unwrap();
        s.shards = 8;
        s.shard_batch = 50;
        s.backpressure_depth = 20_000;
    })
    .await;
    let store = app.store.clone();
    let types = app.settings.task_types.clone();
    let now = app.clock.now();
    // 10 shops; 500 devices with two bound cards each; the rest standalone.
    let devices = (cards / 20).max(1);
    let batch = ImportBatch {
        shops: (0..10)
            .map(|s| Shop {
                id: format!("S{s}"),
                parent_id: None,
                name: String::new(),
            })
            .collect(),
        cards: (0..cards)
            .map(|i| CardRow {
                iccid: iccid(i),
                shop_id: format!("S{}", i % 10),
                polling_enabled: true,
                stop_locked: i % 50 == 0,
            })
            .collect(),
        devices: (0..devices)
            .map(|d| DeviceRow {
                device_no: format!("DEV{d}"),
                shop_id: format!("S{}", (2 * d) % 10),
                polling_enabled: true,
                reported_slot_iccid: None,
            })
            .collect(),
        bindings: (0..devices)
            .flat_map(|d| {
                [2 * d, 2 * d + 1].map(|i| BindingRow {
                    device_no: format!("DEV{d}"),
                    iccid: iccid(i),
                    active: true,
                })
            })
            .collect(),
        ..ImportBatch::default()
    };
    store.domain_import(&batch, now).await.expect("import");
    let operator = Account {
        id: "soak-operator".into(),
        role: Role::Platform,
        shop_id: None,
        perm_manual_trigger: true,
        perm_card_data: true,
    };
    let mut rng = StdRng::seed_from_u64(6);
    // Calls made for each closed or expired item when it became terminal.
    let mut terminal_calls: HashMap<i64, usize> = HashMap::new();
    let steps = hours * 60;
    let mut orders = 0;
    for step in 0..steps {
        let now = app.clock.now();
        // Priority triggers: manual enqueues of cards and devices.
        for _ in 0..rng.random_range(2..10) {
            let asset = random_asset(&mut rng, cards, devices);
            let tts = [types.names()[rng.random_range(0..3)].clone()];
            let req = ManualRequest {
                asset: &asset,
                task_types: if rng.random_bool(0.3) { &[] } else { &tts },
                reason: Some("soak"),
                event_id: None,
            };
            match manual::enqueue(store.as_ref(), &types, &operator, req, now).await {
                Ok(items) => app.hints.push_items(&items).await,
                Err(e) => assert_expected_refusal(&e),
            }
        }
        // Payments (paid, failed, cancelled; some callbacks replayed).
        for _ in 0..rng.random_range(0..3) {
            orders += 1;
            let id = format!("O{orders}");
            let asset = AssetRef {
                asset_type: AssetType::Card,
                asset_id: iccid(rng.random_range(0..cards)),
            };
            let kind = if rng.random_bool(0.7) {
                PackageKind::Main
            } else {
                PackageKind::Addon
            };
            store.order_create(&id, &asset, kind, now).await.unwrap();
            let status = match rng.random_range(0..10) {
                0 => PaymentStatus::Failed,
                1 => PaymentStatus::Cancelled,
                _ => PaymentStatus::Paid,
            };
            let cb = PaymentCallback {
                payment_id: format!("P{orders}"),
                order_id: id,
                status,
            };
            for _ in 0..rng.random_range(1..3) {
                let out = store.payment_apply(&cb, &types.names(), now).await.unwrap();
                app.hints.push_items(&out.items).await;
            }
        }
        // Ordinary manual triggers (some refused by dedupe or quota).
        for _ in 0..rng.random_range(0..3) {
            let c = iccid(rng.random_range(0..cards));
            let _ = card_polling::manual_trigger::request(
                store.as_ref(),
                &app.hints,
                &types,
                &operator,
                &c,
                &[],
                100,
                now,
            )
            .await
            .unwrap();
        }
        // Closes of random active items.
        let active: Vec<i64> = sqlx::query_scalar(
            "SELECT id FROM priority_items WHERE status IN ('pending', 'running') \
             ORDER BY random() LIMIT $1",
        )
        .bind(rng.random_range(0..3_i64))
        .fetch_all(app.db.pool())
        .await
        .unwrap();
        for id in active {
            store
                .item_close(&Scope::All, id, "soak-operator", "soak close", now)
                .await
                .unwrap();
        }
        // Polling switched off and on again.
        if step % 7 == 0 {
            let c = iccid(rng.random_range(0..cards));
            let on = rng.random_bool(0.3);
            store.card_set_polling(&c, on).await.unwrap();
        }
        // A lost hint lane now and then.
        if step % 11 == 5 {
            for tt in types.names() {
                app.hints.clear(ChannelLane::Hint, &tt).await.unwrap();
            }
        }
        // A day-long jump near the end: the expiry job dequeues items whose hints are still
        // waiting, and every card's ordinary polls fall due at once (the shard batches pace them).
        if step == steps.saturating_sub(15) {
            app.advance(24 * 3600);
        }
        app.expiry.run_once(app.clock.now()).await.unwrap();
        snapshot_terminal(&app, &mut terminal_calls).await;
        let r = app.cycle_and_drain().await;
        assert!(r.errors.is_empty(), "{r:?}");
        snapshot_terminal(&app, &mut terminal_calls).await;
        app.advance(60);
    }
    // Let every queued trigger run once more.
    app.cycle_and_drain().await;
    check_invariants(&app, &terminal_calls).await;
}

async fn snapshot_terminal(app: &TestApp, seen: &mut HashMap<i64, usize>) {
    super::helpers::snapshot_terminal(&app.db, |id| app.sim.calls_for_item(id), seen).await;
}

async fn check_invariants(app: &TestApp, terminal_calls: &HashMap<i64, usize>) {
    let mut calls: HashMap<i64, i64> = HashMap::new();
    for c in app.sim.calls() {
        if let Some(id) = c.item_id {
            *calls.entry(id).or_default() += 1;
        }
    }
    let by_status = assert_soak_invariants(&app.db, &calls, terminal_calls, 1_000).await;
    println!(
        "soak: {by_status:?}, {} upstream calls",
        app.sim.total_poll_calls()
    );
}
