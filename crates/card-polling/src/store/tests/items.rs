//! The priority item's life in the store: one active item per (card, task type) with merges and
//! replays, exclusive claims and takeover after a lapsed lease, the claim token guarding finish,
//! validity expiry, and concurrent enqueues and claims.

use super::*;

both!(
    enqueue_merges_into_the_one_active_item_and_replays_add_nothing,
    a_claim_is_exclusive_and_only_its_token_finishes_the_item,
    a_lapsed_claim_is_taken_over_and_the_old_token_is_refused,
    active_items_expire_after_their_validity,
    concurrent_enqueues_keep_one_active_item,
    concurrent_claims_grant_one_claimer,
);

async fn enqueue_merges_into_the_one_active_item_and_replays_add_nothing(h: &Harness) {
    assert_eq!(h.enqueue("89860000", "e1").await, EnqueueAction::Created);
    assert_eq!(h.enqueue("89860000", "e2").await, EnqueueAction::Merged);
    assert_eq!(h.enqueue("89860000", "e1").await, EnqueueAction::Replayed);
    let items = h.items("89860000").await;
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].trigger_count, 2);
    assert_eq!(items[0].status, ItemStatus::Pending);
    assert_eq!(items[0].trigger_sources, ["manual:e1", "manual:e2"]);
    assert_eq!(items[0].agent_chain, ["s1"]);
    assert_eq!(items[0].valid_until, h.now().plus(VALIDITY));
}

async fn a_claim_is_exclusive_and_only_its_token_finishes_the_item(h: &Harness) {
    h.enqueue("89860001", "e1").await;
    let due = h.store.item_due(h.now(), 10).await.unwrap();
    assert_eq!(due.len(), 1);
    let id = due[0];
    let typed = h.store.item_due_typed(h.now(), 10).await.unwrap();
    assert_eq!(typed[0].task_type, "card_status");
    let a = h
        .store
        .item_claim(id, "tok-a", h.now(), LEASE)
        .await
        .unwrap()
        .expect("claimed");
    assert!(!a.took_over);
    assert!(
        h.store
            .item_claim(id, "tok-b", h.now(), LEASE)
            .await
            .unwrap()
            .is_none()
    );
    let a = h.store.item_begin_attempt(&a, h.now()).await.unwrap();
    assert_eq!(a.attempts, 1);
    let forged = crate::store::ClaimedItem {
        token: "tok-x".into(),
        ..a.clone()
    };
    let done = Finish::Completed {
        result: "ok".into(),
    };
    let lost = h.store.item_finish(&forged, &done, &[], h.now()).await;
    assert!(matches!(lost, Err(StoreError::ClaimLost)), "{lost:?}");
    h.clock.advance(Duration::from_millis(1500));
    let log = NewLog {
        operation: "poll".into(),
        request_summary: "iccid=89860001".into(),
        response_summary: "status=active".into(),
        latency_ms: 12,
        outcome: "ok".into(),
    };
    let status = h
        .store
        .item_finish(&a, &done, &[log], h.now())
        .await
        .unwrap();
    assert_eq!(status, ItemStatus::Completed);
    let detail = h.store.item_get(&Scope::All, id).await.unwrap().unwrap();
    assert_eq!(detail.item.duration_ms, Some(1500));
    assert_eq!(detail.logs.len(), 1);
    let kinds: Vec<_> = detail.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["enqueue", "claim", "complete"]);
    // The slot is free: the next demand creates a new item.
    assert_eq!(h.enqueue("89860001", "e2").await, EnqueueAction::Created);
}

async fn a_lapsed_claim_is_taken_over_and_the_old_token_is_refused(h: &Harness) {
    h.enqueue("89860002", "e1").await;
    let id = h.store.item_due(h.now(), 10).await.unwrap()[0];
    let a = h
        .store
        .item_claim(id, "tok-a", h.now(), LEASE)
        .await
        .unwrap()
        .unwrap();
    h.clock.advance(LEASE);
    assert_eq!(h.store.item_due(h.now(), 10).await.unwrap(), [id]);
    let b = h
        .store
        .item_claim(id, "tok-b", h.now(), LEASE)
        .await
        .unwrap()
        .unwrap();
    assert!(b.took_over);
    let done = Finish::Completed {
        result: "ok".into(),
    };
    let old = h.store.item_finish(&a, &done, &[], h.now()).await;
    assert!(matches!(old, Err(StoreError::ClaimLost)));
    assert_eq!(
        h.store.item_finish(&b, &done, &[], h.now()).await.unwrap(),
        ItemStatus::Completed
    );
}

async fn active_items_expire_after_their_validity(h: &Harness) {
    h.enqueue("89860003", "e1").await;
    h.clock.advance(VALIDITY - Duration::from_secs(1));
    assert_eq!(
        h.store
            .item_mark_expired(h.now(), VALIDITY, 100)
            .await
            .unwrap(),
        0
    );
    h.clock.advance(Duration::from_secs(1));
    assert_eq!(
        h.store
            .item_mark_expired(h.now(), VALIDITY, 100)
            .await
            .unwrap(),
        1
    );
    let items = h.items("89860003").await;
    assert_eq!(items[0].status, ItemStatus::Expired);
    assert!(items[0].dequeued_at.is_some());
    let again = h
        .store
        .item_retrigger(&Scope::All, items[0].id, "alice", "retry", h.now())
        .await
        .unwrap();
    assert_eq!(again.action, EnqueueAction::Created);
    assert_ne!(again.item_id, items[0].id);
}

async fn concurrent_enqueues_keep_one_active_item(h: &Harness) {
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (store, now) = (h.store.clone(), h.now());
        tasks.push(tokio::spawn(async move {
            store
                .item_enqueue_manual(
                    &Scope::All,
                    &card("89860000"),
                    &demand(&format!("c{i}")),
                    now,
                )
                .await
                .unwrap()
        }));
    }
    let mut created = 0;
    for t in tasks {
        if t.await.unwrap()[0].action == EnqueueAction::Created {
            created += 1;
        }
    }
    assert_eq!(created, 1);
    let items = h.items("89860000").await;
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].trigger_count, 8);
}

async fn concurrent_claims_grant_one_claimer(h: &Harness) {
    h.enqueue("89860000", "e1").await;
    let id = h.store.item_due(h.now(), 10).await.unwrap()[0];
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (store, now) = (h.store.clone(), h.now());
        tasks.push(tokio::spawn(async move {
            store
                .item_claim(id, &format!("tok-{i}"), now, LEASE)
                .await
                .unwrap()
        }));
    }
    let mut won = 0;
    for t in tasks {
        won += usize::from(t.await.unwrap().is_some());
    }
    assert_eq!(won, 1);
}
