//! The ordinary schedule's take: each due card once per interval, each shard at most its share,
//! two takes at once never sharing a card.

use super::*;

both!(
    the_schedule_hands_each_due_card_out_once_per_interval,
    one_take_limits_each_shard_and_two_at_once_never_share_a_card,
);

async fn the_schedule_hands_each_due_card_out_once_per_interval(h: &Harness) {
    use crate::domain::asset::{BindingRow, DeviceRow};
    use crate::store::CardScope;

    let types = TaskTypes::parse("card_status=300").unwrap();
    h.store.schedule_sync(&types, 2, h.now()).await.unwrap();
    // Every scope the take reports (D-ordinary-scope-read-by-take): 0 in scope, 1 polling off, 2 stop-locked,
    // 3 bound to a device whose polling is off.
    h.store
        .domain_import(
            &ImportBatch {
                devices: vec![DeviceRow {
                    device_no: "dev-off".into(),
                    shop_id: "s1".into(),
                    polling_enabled: true,
                    reported_slot_iccid: None,
                }],
                bindings: vec![BindingRow {
                    device_no: "dev-off".into(),
                    iccid: "89860003".into(),
                    active: true,
                }],
                ..Default::default()
            },
            h.now(),
        )
        .await
        .unwrap();
    h.store.card_set_polling("89860001", false).await.unwrap();
    h.store.card_set_stop_lock("89860002", true).await.unwrap();
    h.store.device_set_polling("dev-off", false).await.unwrap();
    h.clock.advance(Duration::from_secs(300));
    let interval = Duration::from_secs(300);
    let got = h
        .store
        .schedule_take_due("card_status", interval, &[0, 1], 100, h.now())
        .await
        .unwrap();
    let mut all: Vec<(String, CardScope)> = got.iter().flat_map(|b| b.cards.clone()).collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    let expected = [
        ("89860000", CardScope::InScope { stop_locked: false }),
        ("89860001", CardScope::CardPollingOff),
        ("89860002", CardScope::InScope { stop_locked: true }),
        ("89860003", CardScope::DevicePollingOff),
    ];
    assert_eq!(
        all,
        expected.clone().map(|(i, s)| (i.to_owned(), s)),
        "the take's scopes"
    );
    // The same scopes as the per-card read, which also knows a card that does not exist.
    for (iccid, scope) in expected {
        assert_eq!(h.store.card_polling_scope(iccid).await.unwrap(), scope);
    }
    assert_eq!(
        h.store.card_polling_scope("89869999").await.unwrap(),
        CardScope::Missing
    );
    let again = h
        .store
        .schedule_take_due("card_status", interval, &[0, 1], 100, h.now())
        .await
        .unwrap();
    assert!(again.iter().all(|b| b.cards.is_empty()));
    h.store
        .poll_record(&[PollRecord {
            iccid: "89860000".into(),
            task_type: "card_status".into(),
            manual_trigger_id: None,
            result: "ok".into(),
            logs: vec![],
            at: h.now(),
            next_poll_at: h.now().plus(interval),
        }])
        .await
        .unwrap();
    let state = h
        .store
        .card_package_state("89860000", h.now())
        .await
        .unwrap()
        .expect("the card exists");
    assert_eq!(state.asset, card("89860000"));
    assert!(!state.valid_main && !state.pending_usage && !state.lapsed_usage);
    assert!(!state.needs_write());
    assert_eq!(
        h.store
            .card_package_state("89869999", h.now())
            .await
            .unwrap(),
        None
    );
}

/// The take is one statement for all the shards asked for (D-schedule-take-one-statement): each shard gets at most
/// its share, every card comes back in its own shard's batch, the batches in the order asked, a
/// shard not asked for is left alone; and two takes at once (two connections on PostgreSQL, where
/// `SKIP LOCKED` decides) never hand out one card twice, and together hand out every due card.
async fn one_take_limits_each_shard_and_two_at_once_never_share_a_card(h: &Harness) {
    use crate::scheduler::shard_queue::shard_of;

    const SHARDS: u32 = 4;
    let cards: Vec<String> = (100..160).map(|i| format!("8986{i:04}")).collect();
    h.store
        .domain_import(
            &ImportBatch {
                cards: cards
                    .iter()
                    .map(|iccid| CardRow {
                        iccid: iccid.clone(),
                        shop_id: "s1".into(),
                        polling_enabled: true,
                        stop_locked: false,
                    })
                    .collect(),
                ..Default::default()
            },
            h.now(),
        )
        .await
        .unwrap();
    let types = TaskTypes::parse("card_status=300").unwrap();
    h.store
        .schedule_sync(&types, SHARDS, h.now())
        .await
        .unwrap();
    h.clock.advance(Duration::from_secs(300));
    let interval = Duration::from_secs(300);
    let per_shard = |shard: u32| {
        (0..4)
            .map(|i| format!("8986{i:04}"))
            .chain(cards.iter().cloned())
            .filter(|c| shard_of(c, SHARDS) == shard)
            .count()
    };
    assert!(
        (0..SHARDS).all(|s| per_shard(s) > 3),
        "every shard holds more than one share"
    );

    let got = h
        .store
        .schedule_take_due("card_status", interval, &[2, 0], 3, h.now())
        .await
        .unwrap();
    assert_eq!(got.iter().map(|b| b.shard).collect::<Vec<_>>(), [2, 0]);
    for b in &got {
        assert_eq!(b.cards.len(), 3, "shard {}: {b:?}", b.shard);
        assert!(
            b.cards.iter().all(|(c, _)| shard_of(c, SHARDS) == b.shard),
            "{b:?}"
        );
    }

    // The rest of every shard, by two takers at once.
    let all = [0, 1, 2, 3];
    let (a, b) = futures::join!(
        h.store
            .schedule_take_due("card_status", interval, &all, 1000, h.now()),
        h.store
            .schedule_take_due("card_status", interval, &all, 1000, h.now()),
    );
    let mut seen: Vec<String> = got
        .iter()
        .chain(a.unwrap().iter())
        .chain(b.unwrap().iter())
        .flat_map(|b| b.cards.iter().map(|(c, _)| c.clone()))
        .collect();
    let handed_out = seen.len();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), handed_out, "a card was handed out twice");
    assert_eq!(seen.len(), 4 + cards.len(), "every due card was handed out");
}
