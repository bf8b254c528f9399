//! Property test: random sequences of submit / lease / renew / report / expire / reclaim, run
//! against the store directly with a `ManualClock`, keep every invariant of §3 and §5.

use std::collections::HashMap;
use std::time::Duration;

use order_gateway::LeaseScope;
use order_gateway::store::sqlite::SqliteStore;
use order_gateway::store::{
    LeaseRequest, NewReport, NewTask, OrderStore, ReclaimRequest, RenewRequest, TaskFilter,
};
use proptest::prelude::*;
use rakuten_types::{
    Clock, ManualClock, OrderState, Outcome, TaskEvent, TaskId, TaskStatus, WorkerId,
};

const TTL: Duration = Duration::from_secs(300);

#[derive(Debug, Clone)]
enum Op {
    Submit(u8),
    Lease(u8),
    Renew(u8, u8),
    Report(u8, u8, u8, bool),
    Advance(u16),
    Expire,
    Reclaim(u8, u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..5u8).prop_map(Op::Submit),
        3 => (0..3u8).prop_map(Op::Lease),
        1 => (0..5u8, 0..3u8).prop_map(|(t, w)| Op::Renew(t, w)),
        3 => (0..5u8, 0..3u8, 0..8u8, any::<bool>()).prop_map(|(t, w, s, term)| Op::Report(t, w, s, term)),
        1 => (0..400u16).prop_map(Op::Advance),
        1 => Just(Op::Expire),
        2 => (0..5u8, 0..3u8).prop_map(|(t, w)| Op::Reclaim(t, w)),
    ]
}

fn tid(n: u8) -> TaskId {
    TaskId::parse(&format!("t{n}")).unwrap()
}

fn wid(n: u8) -> WorkerId {
    WorkerId::parse(&format!("w{n}")).unwrap()
}

#[derive(Debug, Clone, PartialEq)]
struct Seen {
    status: TaskStatus,
    lease_count: i64,
    outcome: Option<Outcome>,
}

fn reachable(from: TaskStatus, to: TaskStatus) -> bool {
    let events = [
        TaskEvent::Lease,
        TaskEvent::Regrant,
        TaskEvent::Report,
        TaskEvent::Finish(Outcome::Succeeded),
        TaskEvent::Finish(Outcome::Failed),
        TaskEvent::Finish(Outcome::NeedsHuman),
        TaskEvent::Expire,
        TaskEvent::Reclaim,
    ];
    events.iter().any(|e| from.transition(*e) == Ok(to))
}

async fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("p.db")).await.unwrap();
    let clock = ManualClock::at_fixed_date();
    let mut seen: HashMap<String, Seen> = HashMap::new();
    for op in ops {
        let now = clock.now();
        match op.clone() {
            Op::Submit(t) => {
                store
                    .task_insert(
                        NewTask {
                            task_id: tid(t),
                            site: "rakuten".into(),
                            intent_json: "{}".into(),
                            not_after: None,
                        },
                        now,
                    )
                    .await
                    .unwrap();
            }
            Op::Lease(w) => {
                let req = LeaseRequest {
                    worker_id: wid(w),
                    site: None,
                    ttl: TTL,
                    scope: LeaseScope::Global,
                };
                store.task_lease(req, now).await.unwrap();
            }
            Op::Renew(t, w) => {
                let req = RenewRequest {
                    task_id: tid(t),
                    worker_id: wid(w),
                    lease_token: None,
                    ttl: TTL,
                };
                let _ = store.task_renew(req, now).await;
            }
            Op::Report(t, w, s, terminal) => {
                let state = OrderState::ALL[s as usize];
                let outcome =
                    terminal.then(|| Outcome::implied_by(state).unwrap_or(Outcome::NeedsHuman));
                let r = NewReport {
                    task_id: tid(t),
                    worker_id: wid(w),
                    lease_token: None,
                    state,
                    payable_yen: None,
                    pay_deadline: None,
                    site_order_id: None,
                    evidence_ref: None,
                    detail: None,
                    error_code: None,
                    outcome,
                };
                let _ = store.task_report(r, now).await;
            }
            Op::Advance(secs) => clock.advance(Duration::from_secs(secs.into())),
            Op::Expire => {
                clock.advance(TTL + Duration::from_secs(1));
                store.task_mark_stale_expired(clock.now()).await.unwrap();
            }
            Op::Reclaim(t, w) => {
                let req = ReclaimRequest {
                    task_id: tid(t),
                    worker_id: wid(w),
                    ttl: TTL,
                    scope: LeaseScope::Global,
                    reason: "test".into(),
                    actor: "test".into(),
                };
                let _ = store.task_reclaim(req, now).await;
            }
        }
        let page = store
            .task_list(TaskFilter {
                limit: 200,
                ..Default::default()
            })
            .await
            .unwrap();
        let active = page.items.iter().filter(|t| t.status.is_active()).count();
        prop_assert!(
            active <= 1,
            "two active tasks after {op:?}: {:?}",
            page.items
        );
        for t in &page.items {
            if t.status.is_active() {
                prop_assert!(t.lease_owner.is_some() && t.lease_expires_at.is_some());
            }
            prop_assert_eq!(t.status.has_outcome(), t.outcome.is_some());
            let now_seen = Seen {
                status: t.status,
                lease_count: t.lease_count,
                outcome: t.outcome,
            };
            if let Some(prev) = seen.get(t.task_id.as_str()) {
                prop_assert!(
                    t.lease_count >= prev.lease_count,
                    "lease_count went down: {op:?}"
                );
                if prev.status != TaskStatus::Queued {
                    prop_assert_ne!(
                        t.status,
                        TaskStatus::Queued,
                        "returned to queued after {:?}",
                        op
                    );
                }
                if prev.status.is_terminal() {
                    prop_assert_eq!(&now_seen, prev, "terminal task changed after {:?}", op);
                }
                if t.status == TaskStatus::Stale && prev.status != TaskStatus::Stale {
                    prop_assert!(matches!(op, Op::Expire), "stale without expiry: {op:?}");
                }
                if t.status != prev.status {
                    prop_assert!(
                        reachable(prev.status, t.status),
                        "{} -> {} is not a transition ({op:?})",
                        prev.status,
                        t.status
                    );
                }
            } else {
                prop_assert_eq!(t.status, TaskStatus::Queued);
            }
            seen.insert(t.task_id.to_string(), now_seen);
        }
    }
    store.close().await;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, max_shrink_iters: 200, ..ProptestConfig::default() })]

    #[test]
    fn random_operation_sequences_keep_every_invariant(ops in prop::collection::vec(op(), 1..40)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run(ops))?;
    }
}
