//! The storage conformance suite: ONE set of checks of the [`OrderStore`] / [`QueryStore`]
//! contract, run unchanged against both drivers (`conformance::sqlite::*` on a temp file,
//! `conformance::postgres::*` on a fresh schema of `DATABASE_URL_TEST`). Every trait method and
//! the invariants: one active task per gate, nothing returns to `queued`, fencing, idempotent
//! reports, reclaim rules, the schema refusing bypasses, concurrent claims; queries: lease,
//! redelivery, attempts, TTL, retention, duplicates. Time is a `ManualClock`.

use std::sync::Arc;
use std::time::Duration;

use order_gateway::LeaseScope;
use order_gateway::store::operator::{
    CancelRequest, GrantEnd, GrantVia, LeaseGrantRecord, OperatorStore, ResolveRequest,
    token_fingerprint,
};
use order_gateway::store::postgres::PgStore;
use order_gateway::store::queries::{
    NewQuery, QueryFilter, QueryLeaseRequest, QueryOutcome, QueryResultRecord,
};
use order_gateway::store::sqlite::SqliteStore;
use order_gateway::store::{
    LeaseAttempt, LeaseRequest, NewReport, NewTask, OrderStore, QueryStore, ReclaimRequest,
    RenewRequest, Seek, SeekPage, StoreError, TaskFilter,
};
use rakuten_types::order::LeaseGrant;
use rakuten_types::query::{QueryKind, QueryStatus};
use rakuten_types::{
    Clock, ManualClock, OrderState, Outcome, QueryId, TaskId, TaskStatus, Timestamp, WorkerId,
};
use sqlx::Connection;

use test_util::PgSchema;

/// The three traits, as one object.
pub trait Store: OrderStore + QueryStore + OperatorStore {}
impl<T: OrderStore + QueryStore + OperatorStore> Store for T {}

/// Raw access to the database, to check that the schema itself refuses bypasses.
enum Raw {
    Sqlite(std::path::PathBuf),
    Postgres(sqlx::PgPool),
}

/// A store under test, its clock and raw access.
pub struct Harness {
    store: Arc<dyn Store>,
    clock: ManualClock,
    raw: Raw,
    _keep: Option<tempfile::TempDir>,
    _db: Option<PgSchema>,
}

impl Harness {
    pub async fn sqlite() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let store = SqliteStore::open(&path).await.unwrap();
        Harness {
            store: Arc::new(store),
            clock: ManualClock::at_fixed_date(),
            raw: Raw::Sqlite(path),
            _keep: Some(dir),
            _db: None,
        }
    }

    pub async fn postgres() -> Harness {
        let db = PgSchema::new().await;
        let store = PgStore::open(&db.url).await.unwrap();
        let pool = store.pool().clone();
        Harness {
            store: Arc::new(store),
            clock: ManualClock::at_fixed_date(),
            raw: Raw::Postgres(pool),
            _keep: None,
            _db: Some(db),
        }
    }

    pub async fn finish(self) {
        self.store.close().await;
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// One parameterless statement, bypassing the store; rows affected or the error text.
    async fn raw(&self, sql: &str) -> Result<u64, String> {
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        match &self.raw {
            Raw::Sqlite(path) => {
                let mut c =
                    sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
                        .await
                        .unwrap();
                let r = sqlx::query(sql).execute(&mut c).await;
                let _ = c.close().await;
                r.map(|d| d.rows_affected()).map_err(|e| e.to_string())
            }
            Raw::Postgres(pool) => sqlx::query(sql)
                .execute(pool)
                .await
                .map(|d| d.rows_affected())
                .map_err(|e| e.to_string()),
        }
    }

    async fn insert(&self, id: &str) {
        self.insert_site(id, "rakuten").await;
    }

    async fn insert_site(&self, id: &str, site: &str) {
        let ack = self
            .store
            .task_insert(
                NewTask {
                    task_id: tid(id),
                    site: site.into(),
                    intent_json: format!(r#"{{"id":"{id}"}}"#),
                    not_after: None,
                },
                self.now(),
            )
            .await
            .unwrap();
        assert!(ack.created, "{id} inserted");
    }

    async fn lease_scoped(&self, worker: &str, scope: LeaseScope) -> LeaseAttempt {
        self.store
            .task_lease(
                LeaseRequest {
                    worker_id: wid(worker),
                    site: None,
                    ttl: TTL,
                    scope,
                },
                self.now(),
            )
            .await
            .unwrap()
    }

    async fn lease(&self, worker: &str) -> LeaseAttempt {
        self.lease_scoped(worker, LeaseScope::Global).await
    }

    async fn granted(&self, worker: &str) -> LeaseGrant {
        match self.lease(worker).await {
            LeaseAttempt::Granted(g) => g,
            other => panic!("expected a grant for {worker}, got {other:?}"),
        }
    }

    async fn report(
        &self,
        id: &str,
        worker: &str,
        token: Option<&str>,
        state: OrderState,
        outcome: Option<Outcome>,
    ) -> Result<rakuten_types::order::ReportAck, StoreError> {
        self.store
            .task_report(
                NewReport {
                    task_id: tid(id),
                    worker_id: wid(worker),
                    lease_token: token.map(str::to_owned),
                    state,
                    payable_yen: Some(1200),
                    pay_deadline: None,
                    site_order_id: Some("ord-1".into()),
                    evidence_ref: None,
                    detail: None,
                    error_code: None,
                    outcome,
                },
                self.now(),
            )
            .await
    }

    async fn status(&self, id: &str) -> TaskStatus {
        self.store
            .task_get(&tid(id))
            .await
            .unwrap()
            .expect("task exists")
            .status
    }

    async fn reclaim(&self, id: &str, worker: &str) -> Result<LeaseGrant, StoreError> {
        self.store
            .task_reclaim(
                ReclaimRequest {
                    task_id: tid(id),
                    worker_id: wid(worker),
                    ttl: TTL,
                    scope: LeaseScope::Global,
                    reason: "test".into(),
                    actor: "test".into(),
                },
                self.now(),
            )
            .await
    }

    async fn insert_query(&self, id: &str, max_attempts: i64) {
        let ack = self
            .store
            .query_insert(
                NewQuery {
                    query_id: qid(id),
                    site: "rakuten".into(),
                    kind: QueryKind::OrderList,
                    params_json: r#"{"max_pages":1}"#.into(),
                    max_attempts,
                },
                self.now(),
            )
            .await
            .unwrap();
        assert!(ack.created);
    }

    async fn lease_query(&self, worker: &str) -> Option<rakuten_types::query::QueryGrant> {
        self.store
            .query_lease_next(
                QueryLeaseRequest {
                    worker_id: wid(worker),
                    site: None,
                    ttl: QUERY_TTL,
                    created_after: self.now().minus(Duration::from_secs(900)),
                },
                self.now(),
            )
            .await
            .unwrap()
    }

    async fn query_result(
        &self,
        id: &str,
        worker: &str,
        token: &str,
        success: bool,
    ) -> Result<rakuten_types::query::QueryResultAck, StoreError> {
        let outcome = if success {
            QueryOutcome::Success {
                result_json: r#"{"orders":[]}"#.into(),
                raw_omitted: false,
            }
        } else {
            QueryOutcome::Failure {
                error_code: Some(5003),
                error_message: "login required".into(),
            }
        };
        self.store
            .query_record_result(
                QueryResultRecord {
                    query_id: qid(id),
                    worker_id: wid(worker),
                    lease_token: Some(token.into()),
                    reported_success: success,
                    outcome,
                },
                self.now(),
            )
            .await
    }

    async fn query_status(&self, id: &str) -> QueryStatus {
        self.store
            .query_get(&qid(id))
            .await
            .unwrap()
            .expect("query exists")
            .status
    }
}

const TTL: Duration = Duration::from_secs(300);
const QUERY_TTL: Duration = Duration::from_secs(180);

fn tid(s: &str) -> TaskId {
    TaskId::parse(s).unwrap()
}
fn wid(s: &str) -> WorkerId {
    WorkerId::parse(s).unwrap()
}
fn qid(s: &str) -> QueryId {
    QueryId::parse(s).unwrap()
}

/// Instantiates every check for both drivers.
/// An older queued task whose stored intent is not JSON (a bad manual edit, a
/// disk fault) made every lease attempt and the list fail.
async fn a_queued_task_whose_row_does_not_decode_is_set_aside_and_the_next_one_is_leased(
    h: &Harness,
) {
    h.insert("poison").await;
    h.clock.advance(Duration::from_millis(5));
    h.insert("healthy").await;
    h.raw("UPDATE tasks SET intent_json = '{not json' WHERE task_id = 'poison'")
        .await
        .unwrap();
    // The queued list shows the poison row rather than failing whole (a list reads the intent's
    // summary, never its text: the row is listed as it stands until a lease reads its intent).
    let queued = h
        .store
        .task_list(TaskFilter {
            status: Some(TaskStatus::Queued),
            limit: 200,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!((queued.total, queued.items.len()), (2, 2));
    // Its detail, which reads the text, says what is wrong with it.
    let detail = h.store.task_get(&tid("poison")).await.unwrap().unwrap();
    assert!(
        detail
            .set_aside_reason
            .as_deref()
            .unwrap()
            .starts_with("undecodable row"),
        "{detail:?}"
    );
    assert_eq!(detail.intent.as_str(), "null");
    let grant = h.granted("w1").await;
    assert_eq!(grant.task_id.as_str(), "healthy");
    let poison = h.store.task_get(&tid("poison")).await.unwrap().unwrap();
    assert_eq!(poison.status, TaskStatus::NeedsHuman);
    assert_eq!(poison.outcome, Some(Outcome::NeedsHuman));
    assert_eq!(poison.lease_count, 0);
    assert!(
        poison
            .set_aside_reason
            .as_deref()
            .unwrap()
            .starts_with("undecodable row")
    );
    let everything = TaskFilter {
        limit: 200,
        ..Default::default()
    };
    assert_eq!(h.store.task_list(everything).await.unwrap().total, 2);
    // The schema allows leaving `queued` without a grant only this way.
    let refused = h
        .raw("UPDATE tasks SET status = 'failed', outcome = 'failed' WHERE task_id = 'poison'")
        .await;
    assert!(refused.is_err(), "a set-aside task is needs_human only");
}

/// Another session holding the database locked until [`LockHolder::release`].
enum LockHolder {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::Transaction<'static, sqlx::Postgres>),
}

impl LockHolder {
    /// Ends the other session's transaction and waits until it has. Dropping a sqlx connection
    /// only asks its worker thread to close it, whenever that thread runs: a local run of
    /// 2026-12-03 got `database is locked` from the lease right after the drop, on a loaded
    /// machine. A test must not depend on that timing.
    async fn release(self) {
        match self {
            LockHolder::Sqlite(mut c) => {
                sqlx::query("ROLLBACK").execute(&mut c).await.unwrap();
                c.close().await.unwrap();
            }
            LockHolder::Postgres(tx) => tx.rollback().await.unwrap(),
        }
    }
}

impl Harness {
    /// Locks the tasks from another session: SQLite's write lock (`BEGIN IMMEDIATE`),
    /// PostgreSQL's `ACCESS EXCLUSIVE` on `tasks` (blocks readers too).
    async fn lock_tasks_elsewhere(&self) -> LockHolder {
        match &self.raw {
            Raw::Sqlite(path) => {
                let url = format!("sqlite://{}", path.display());
                let mut c = sqlx::SqliteConnection::connect(&url).await.unwrap();
                sqlx::query("BEGIN IMMEDIATE")
                    .execute(&mut c)
                    .await
                    .unwrap();
                sqlx::query("UPDATE workers SET last_seen_at = last_seen_at")
                    .execute(&mut c)
                    .await
                    .unwrap();
                LockHolder::Sqlite(c)
            }
            Raw::Postgres(pool) => {
                let mut tx = pool.begin().await.unwrap();
                sqlx::query("LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE")
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                LockHolder::Postgres(tx)
            }
        }
    }
}

/// A long-poll while another session held the tasks locked answered only when
/// the lock went (PostgreSQL: 20 s and more) or with a 500 (SQLite, after its 10 s busy timeout).
async fn a_locked_database_answers_busy_within_the_bound_instead_of_hanging(h: &Harness) {
    h.insert("a").await;
    let holder = h.lock_tasks_elsewhere().await;
    let bound = order_gateway::store::STORE_OP_BOUND + Duration::from_millis(1500);
    let started = std::time::Instant::now();
    let leased = tokio::time::timeout(
        bound,
        h.store.task_lease(
            LeaseRequest {
                worker_id: wid("w1"),
                site: None,
                ttl: TTL,
                scope: LeaseScope::Global,
            },
            h.now(),
        ),
    )
    .await
    .expect("the lease answers within its bound");
    assert!(matches!(leased, Err(StoreError::Busy(_))), "{leased:?}");
    if matches!(holder, LockHolder::Postgres(_)) {
        // PostgreSQL's lock blocks readers too; they answer Busy as well.
        let listed = tokio::time::timeout(
            bound,
            h.store.task_list(TaskFilter {
                limit: 10,
                ..Default::default()
            }),
        )
        .await
        .expect("the list answers within its bound");
        assert!(matches!(listed, Err(StoreError::Busy(_))), "{listed:?}");
    }
    eprintln!("busy answered after {:?}", started.elapsed());
    holder.release().await;
    // Once the lock is gone the queue works again.
    h.granted("w1").await;
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let h = super::Harness::sqlite().await;
                    super::$name(&h).await;
                    h.finish().await;
                }
            )*
        }
        mod postgres {
            $(
                #[test_util::lane(postgres)]
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let h = super::Harness::postgres().await;
                    super::$name(&h).await;
                    h.finish().await;
                }
            )*
        }
    };
}

conformance!(
    insert_is_idempotent_on_task_id,
    query_insert_is_idempotent_only_for_the_same_site_kind_and_params,
    lease_claims_the_oldest_queued_task_and_answers_empty_when_none,
    one_active_task_per_gate_globally_and_per_site,
    a_second_lease_by_the_holder_is_a_regrant_with_a_new_token,
    renew_extends_only_the_current_holders_unexpired_lease,
    reports_run_the_task_to_its_end_and_repeat_idempotently,
    an_expired_lease_makes_the_task_stale_never_queued,
    reclaim_needs_a_stale_task_and_a_free_gate,
    leasable_exists_agrees_with_lease,
    list_and_health_snapshot_see_committed_tasks,
    the_schema_refuses_a_second_active_task_and_a_return_to_queued,
    concurrent_leases_grant_exactly_one_task,
    concurrent_sweeps_stale_each_lease_once,
    a_query_is_leased_answered_once_and_repeats_are_duplicates,
    a_lapsed_query_lease_is_redelivered_then_fails_when_attempts_run_out,
    query_ttl_expiry_retention_and_listing,
    concurrent_query_leases_never_share_a_query,
    concurrent_query_sweeps_redeliver_each_lapsed_lease_once,
    a_lone_instance_is_the_alert_leader,
    a_queued_task_whose_row_does_not_decode_is_set_aside_and_the_next_one_is_leased,
    a_locked_database_answers_busy_within_the_bound_instead_of_hanging,
    lease_history_records_a_grant_its_renewal_and_the_final_report,
    lease_history_records_expiry_reclaim_and_regrant,
    resolving_a_task_ends_its_open_grant,
    console_lists_page_by_keyset_through_ties_in_both_directions,
    console_alerts_page_by_keyset_newest_first_through_ties,
    a_cancelled_task_never_held_a_grant_and_no_grant_ends_as_cancelled,
);

impl Harness {
    /// The task's lease history, newest first.
    async fn grants(&self, id: &str) -> Vec<LeaseGrantRecord> {
        self.store.task_lease_grants(&tid(id), 200).await.unwrap()
    }
}

async fn lease_history_records_a_grant_its_renewal_and_the_final_report(h: &Harness) {
    h.insert("po-1").await;
    assert!(h.grants("po-1").await.is_empty());
    let granted_at = h.now();
    let g = h.granted("w1").await;
    let open = h.grants("po-1").await;
    assert_eq!(open.len(), 1);
    assert_eq!(
        (open[0].grant_no, open[0].worker_id.as_str(), open[0].via),
        (1, "w1", GrantVia::Poll)
    );
    assert_eq!(
        (open[0].granted_at, open[0].expires_at),
        (granted_at, g.lease_expires_at)
    );
    assert_eq!(
        (open[0].renewals, open[0].ended_at, open[0].ended_how),
        (0, None, None)
    );
    // Only the fingerprint is kept: 8 hex digits of the token's SHA-256, never the token.
    assert_eq!(open[0].token_fp, token_fingerprint(&g.lease_token));
    assert_eq!(open[0].token_fp.len(), 8);

    h.clock.advance(Duration::from_secs(60));
    let renewed_at = h.now();
    let ack = h
        .store
        .task_renew(
            RenewRequest {
                task_id: tid("po-1"),
                worker_id: wid("w1"),
                lease_token: Some(g.lease_token.clone()),
                ttl: TTL,
            },
            h.now(),
        )
        .await
        .unwrap();
    let renewed = &h.grants("po-1").await[0];
    assert_eq!(renewed.expires_at, ack.lease_expires_at);
    assert_eq!(
        (renewed.renewals, renewed.last_renewed_at),
        (1, Some(renewed_at))
    );
    assert_eq!(renewed.ended_at, None);

    // A progress report leaves the grant open; the final one ends it, and a monitoring report
    // after the end does not reopen it.
    h.report("po-1", "w1", Some(&g.lease_token), OrderState::InCart, None)
        .await
        .unwrap();
    assert_eq!(h.grants("po-1").await[0].ended_how, None);
    h.clock.advance(Duration::from_secs(10));
    let ended_at = h.now();
    h.report(
        "po-1",
        "w1",
        Some(&g.lease_token),
        OrderState::Ordered,
        Some(Outcome::Succeeded),
    )
    .await
    .unwrap();
    h.clock.advance(Duration::from_secs(10));
    h.report("po-1", "w1", Some(&g.lease_token), OrderState::Paid, None)
        .await
        .unwrap();
    let done = h.grants("po-1").await;
    assert_eq!(done.len(), 1);
    assert_eq!(
        (done[0].ended_at, done[0].ended_how),
        (Some(ended_at), Some(GrantEnd::Reported))
    );
    assert_eq!(done[0].renewals, 1);
}

async fn lease_history_records_expiry_reclaim_and_regrant(h: &Harness) {
    h.insert("po-1").await;
    let first = h.granted("w1").await;
    h.clock.advance(TTL);
    let swept_at = h.now();
    assert_eq!(
        h.store
            .task_mark_stale_expired(h.now())
            .await
            .unwrap()
            .len(),
        1
    );
    let expired = h.grants("po-1").await;
    assert_eq!(expired.len(), 1);
    assert_eq!(
        (expired[0].ended_at, expired[0].ended_how),
        (Some(swept_at), Some(GrantEnd::Expired))
    );
    assert_eq!(expired[0].expires_at, first.lease_expires_at);

    h.clock.advance(Duration::from_secs(30));
    let reclaimed = h.reclaim("po-1", "w2").await.unwrap();
    let after_reclaim = h.grants("po-1").await;
    assert_eq!(after_reclaim.len(), 2);
    assert_eq!(
        (
            after_reclaim[0].grant_no,
            after_reclaim[0].worker_id.as_str(),
            after_reclaim[0].via
        ),
        (2, "w2", GrantVia::Reclaim)
    );
    assert_eq!(
        after_reclaim[0].token_fp,
        token_fingerprint(&reclaimed.lease_token)
    );
    assert_eq!(after_reclaim[0].ended_how, None);

    // The worker's first poll receives the reclaim's own grant: no new row, the lease runs
    // from that poll.
    h.clock.advance(Duration::from_secs(5));
    let received = h.granted("w2").await;
    assert_eq!(received.lease_count, 2);
    let moved = h.grants("po-1").await;
    assert_eq!(moved.len(), 2);
    assert_eq!(moved[0].expires_at, received.lease_expires_at);

    // A second poll while holding it is a re-grant: the reclaim's grant ends, a new one opens.
    h.clock.advance(Duration::from_secs(5));
    let regranted_at = h.now();
    let again = h.granted("w2").await;
    let rows = h.grants("po-1").await;
    let nos: Vec<i64> = rows.iter().map(|g| g.grant_no).collect();
    assert_eq!(nos, vec![3, 2, 1], "newest first");
    assert_eq!((rows[0].via, rows[0].ended_how), (GrantVia::Poll, None));
    assert_eq!(rows[0].token_fp, token_fingerprint(&again.lease_token));
    assert_eq!(
        (rows[1].ended_at, rows[1].ended_how),
        (Some(regranted_at), Some(GrantEnd::Regranted))
    );
    assert_eq!(rows[2].ended_how, Some(GrantEnd::Expired));

    // The schema keeps one open grant per task, whatever the code does.
    let second_open = h
        .raw(
            "INSERT INTO lease_grants (task_id, grant_no, worker_id, via, token_fp, granted_at, \
             expires_at) VALUES ('po-1', 9, 'w9', 'poll', '0123abcd', \
             '2026-07-27T09:00:00.000Z', '2026-07-27T09:05:00.000Z')",
        )
        .await;
    assert!(
        second_open.is_err(),
        "two open grants of one task: {second_open:?}"
    );
}

async fn resolving_a_task_ends_its_open_grant(h: &Harness) {
    h.insert("po-1").await;
    h.granted("w1").await;
    // A fixture: a stale task whose grant is still open (the sweeper ends it on the way to
    // stale; this is the operator's path for a row that got there otherwise).
    h.raw("UPDATE tasks SET status = 'stale' WHERE task_id = 'po-1'")
        .await
        .unwrap();
    assert_eq!(h.grants("po-1").await[0].ended_how, None);
    h.clock.advance(Duration::from_secs(60));
    let resolved_at = h.now();
    h.store
        .task_resolve(
            ResolveRequest {
                task_id: tid("po-1"),
                outcome: Outcome::Failed,
                reason: "no order on the site".into(),
                actor: "test".into(),
                site_order_id: None,
                state: None,
            },
            h.now(),
        )
        .await
        .unwrap();
    assert_eq!(h.status("po-1").await, TaskStatus::Failed);
    let rows = h.grants("po-1").await;
    assert_eq!(
        (rows[0].ended_at, rows[0].ended_how),
        (Some(resolved_at), Some(GrantEnd::Resolved))
    );
    // The console's "needs attention" says who ended a failed task and why, not the
    // worker's last words (here none; the resolve gave no state, so it added no report).
    let attention = h
        .store
        .task_attention(resolved_at.minus(Duration::from_secs(3600)), 10)
        .await
        .unwrap();
    assert_eq!(attention.len(), 1);
    assert_eq!(
        attention[0].ended_by.as_deref(),
        Some("resolved by operator test: no order on the site")
    );
}

async fn insert_is_idempotent_on_task_id(h: &Harness) {
    h.insert("po-1").await;
    let submit = |site: &str, intent_json: &str| NewTask {
        task_id: tid("po-1"),
        site: site.into(),
        intent_json: intent_json.into(),
        not_after: None,
    };
    // The identical body (key order and spacing aside) is the idempotent resubmit.
    let again = h
        .store
        .task_insert(submit("rakuten", r#"{ "id" : "po-1" }"#), h.now())
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(again.status, TaskStatus::Queued);
    // The key reused with another body is refused, naming the field that differs.
    for (site, intent, field) in [
        ("rakuten", r#"{"id":"po-2"}"#, "intent.id"),
        (
            "rakuten",
            r#"{"id":"po-1","quantity":2}"#,
            "intent.quantity",
        ),
        ("rakuten", "{}", "intent.id"),
        ("rakuma", r#"{"id":"po-1"}"#, "site"),
    ] {
        match h.store.task_insert(submit(site, intent), h.now()).await {
            Err(StoreError::IdempotencyMismatch(m)) => {
                assert!(m.contains(&format!("different {field};")), "{m}")
            }
            other => panic!("{intent}: {other:?}"),
        }
    }
    let d = h.store.task_get(&tid("po-1")).await.unwrap().unwrap();
    assert_eq!(
        d.intent.as_str(),
        r#"{"id":"po-1"}"#,
        "the first intent is kept, as sent"
    );
    assert!(h.store.task_get(&tid("nope")).await.unwrap().is_none());
}

async fn query_insert_is_idempotent_only_for_the_same_site_kind_and_params(h: &Harness) {
    h.insert_query("q-1", 3).await;
    let submit = |site: &str, kind: QueryKind, params: &str| NewQuery {
        query_id: qid("q-1"),
        site: site.into(),
        kind,
        params_json: params.into(),
        max_attempts: 5,
    };
    let again = h
        .store
        .query_insert(
            submit("rakuten", QueryKind::OrderList, r#"{ "max_pages": 1 }"#),
            h.now(),
        )
        .await
        .unwrap();
    assert!(!again.created, "identical resubmit");
    for (site, kind, params, field) in [
        (
            "rakuten",
            QueryKind::OrderList,
            r#"{"max_pages":2}"#,
            "params.max_pages",
        ),
        ("rakuten", QueryKind::OrderList, "{}", "params.max_pages"),
        (
            "rakuten",
            QueryKind::OrderDetail,
            r#"{"max_pages":1}"#,
            "kind",
        ),
        ("rakuma", QueryKind::OrderList, r#"{"max_pages":1}"#, "site"),
    ] {
        match h
            .store
            .query_insert(submit(site, kind, params), h.now())
            .await
        {
            Err(StoreError::IdempotencyMismatch(m)) => {
                assert!(m.contains(&format!("different {field};")), "{m}")
            }
            other => panic!("{params}: {other:?}"),
        }
    }
}

async fn lease_claims_the_oldest_queued_task_and_answers_empty_when_none(h: &Harness) {
    assert_eq!(h.lease("w1").await, LeaseAttempt::Empty);
    // Same timestamp for all three: insertion order decides.
    for id in ["c-1", "a-2", "b-3"] {
        h.insert(id).await;
    }
    let g = h.granted("w1").await;
    assert_eq!(g.task_id.as_str(), "c-1");
    assert_eq!(g.lease_count, 1);
    assert_eq!(g.known_state, None);
    assert_eq!(g.lease_expires_at, h.now().plus(TTL));
    h.report(
        "c-1",
        "w1",
        Some(&g.lease_token),
        OrderState::Paid,
        Some(Outcome::Succeeded),
    )
    .await
    .unwrap();
    assert_eq!(h.granted("w2").await.task_id.as_str(), "a-2");
}

async fn one_active_task_per_gate_globally_and_per_site(h: &Harness) {
    h.insert_site("r-1", "rakuten").await;
    h.insert_site("r-2", "rakuten").await;
    h.insert_site("y-1", "yahoo").await;
    let g = h.granted("w1").await;
    assert_eq!(g.task_id.as_str(), "r-1");
    assert_eq!(
        h.lease("w2").await,
        LeaseAttempt::GateBusy,
        "global: one in total"
    );
    h.report(
        "r-1",
        "w1",
        Some(&g.lease_token),
        OrderState::Paid,
        Some(Outcome::Succeeded),
    )
    .await
    .unwrap();
    // Site scope: one per site.
    let site = |w: &'static str| h.lease_scoped(w, LeaseScope::Site);
    match site("w2").await {
        LeaseAttempt::Granted(g) => assert_eq!(g.task_id.as_str(), "r-2"),
        o => panic!("expected r-2, got {o:?}"),
    }
    match site("w3").await {
        LeaseAttempt::Granted(g) => assert_eq!(g.task_id.as_str(), "y-1"),
        o => panic!("expected y-1, got {o:?}"),
    }
    h.insert_site("r-3", "rakuten").await;
    assert_eq!(site("w4").await, LeaseAttempt::GateBusy);
    assert_eq!(h.status("r-3").await, TaskStatus::Queued);
}

async fn a_second_lease_by_the_holder_is_a_regrant_with_a_new_token(h: &Harness) {
    h.insert("po-1").await;
    let g1 = h.granted("w1").await;
    h.report(
        "po-1",
        "w1",
        Some(&g1.lease_token),
        OrderState::Ordered,
        None,
    )
    .await
    .unwrap();
    h.clock.advance(Duration::from_secs(10));
    let g2 = h.granted("w1").await;
    assert_eq!(g2.task_id, g1.task_id);
    assert_eq!(g2.lease_count, 2);
    assert_ne!(g2.lease_token, g1.lease_token);
    assert_eq!(g2.known_state, Some(OrderState::Ordered));
    assert_eq!(
        h.status("po-1").await,
        TaskStatus::Leased,
        "a re-grant is a new lease"
    );
    // The first grant's token is fenced off.
    let old = h
        .report(
            "po-1",
            "w1",
            Some(&g1.lease_token),
            OrderState::AwaitingPayment,
            None,
        )
        .await;
    assert!(matches!(old, Err(StoreError::LeaseInvalid(_))), "{old:?}");
    // A token never issued is refused in the same words: the message does not claim to know
    // it was an earlier grant's (D-fencing-token).
    let never = h
        .report(
            "po-1",
            "w1",
            Some("not-a-token"),
            OrderState::AwaitingPayment,
            None,
        )
        .await;
    match never {
        Err(StoreError::LeaseInvalid(m)) => {
            assert!(
                m.contains("not the token of this task's current grant"),
                "{m}"
            );
        }
        other => panic!("{other:?}"),
    }
}

async fn renew_extends_only_the_current_holders_unexpired_lease(h: &Harness) {
    h.insert("po-1").await;
    let g = h.granted("w1").await;
    let renew = |worker: &str, token: Option<&str>| RenewRequest {
        task_id: tid("po-1"),
        worker_id: wid(worker),
        lease_token: token.map(str::to_owned),
        ttl: TTL,
    };
    h.clock.advance(Duration::from_secs(200));
    let ack = h
        .store
        .task_renew(renew("w1", Some(&g.lease_token)), h.now())
        .await
        .unwrap();
    assert_eq!(ack.lease_expires_at, h.now().plus(TTL));
    let intruder = h.store.task_renew(renew("w2", None), h.now()).await;
    assert!(matches!(intruder, Err(StoreError::LeaseInvalid(_))));
    let wrong = h
        .store
        .task_renew(renew("w1", Some("forged")), h.now())
        .await;
    assert!(matches!(wrong, Err(StoreError::LeaseInvalid(_))));
    let missing = h
        .store
        .task_renew(
            RenewRequest {
                task_id: tid("nope"),
                ..renew("w1", None)
            },
            h.now(),
        )
        .await;
    assert!(matches!(missing, Err(StoreError::TaskNotFound(_))));
    h.clock.advance(TTL + Duration::from_secs(1));
    let late = h.store.task_renew(renew("w1", None), h.now()).await;
    assert!(matches!(late, Err(StoreError::LeaseInvalid(_))), "{late:?}");
}

async fn reports_run_the_task_to_its_end_and_repeat_idempotently(h: &Harness) {
    h.insert("po-1").await;
    let g = h.granted("w1").await;
    let t = Some(g.lease_token.as_str());
    let a = h
        .report("po-1", "w1", t, OrderState::Ordered, None)
        .await
        .unwrap();
    assert_eq!((a.status, a.duplicate), (TaskStatus::Running, false));
    let again = h
        .report("po-1", "w1", t, OrderState::Ordered, None)
        .await
        .unwrap();
    assert!(again.duplicate, "a repeated state overwrites its row");
    let stranger = h.report("po-1", "w2", None, OrderState::Paid, None).await;
    assert!(matches!(stranger, Err(StoreError::LeaseInvalid(_))));
    let end = h
        .report(
            "po-1",
            "w1",
            t,
            OrderState::AwaitingPayment,
            Some(Outcome::Succeeded),
        )
        .await
        .unwrap();
    assert_eq!(end.status, TaskStatus::Succeeded);
    // Post-terminal monitoring by the last holder is appended; the status stays.
    let later = h
        .report("po-1", "w1", t, OrderState::Paid, None)
        .await
        .unwrap();
    assert_eq!(later.status, TaskStatus::Succeeded);
    let d = h.store.task_get(&tid("po-1")).await.unwrap().unwrap();
    let states: Vec<_> = d.history.iter().map(|r| r.state).collect();
    assert_eq!(
        states,
        [
            OrderState::Ordered,
            OrderState::AwaitingPayment,
            OrderState::Paid
        ]
    );
    assert_eq!(d.latest_state, Some(OrderState::Paid));
    assert_eq!(d.outcome, Some(Outcome::Succeeded));
    assert_eq!(d.history[0].payable_yen, Some(1200));
    // The gate is free: the next task can be leased; a finished task cannot be renewed.
    h.insert("po-2").await;
    assert_eq!(h.granted("w2").await.task_id.as_str(), "po-2");
    let renew = h
        .store
        .task_renew(
            RenewRequest {
                task_id: tid("po-1"),
                worker_id: wid("w1"),
                lease_token: None,
                ttl: TTL,
            },
            h.now(),
        )
        .await;
    assert!(matches!(renew, Err(StoreError::LeaseInvalid(_))));
    let missing = h.report("nope", "w1", None, OrderState::Paid, None).await;
    assert!(matches!(missing, Err(StoreError::TaskNotFound(_))));
}

async fn an_expired_lease_makes_the_task_stale_never_queued(h: &Harness) {
    h.insert("po-1").await;
    let g = h.granted("w1").await;
    h.clock.advance(TTL - Duration::from_secs(1));
    assert!(
        h.store
            .task_mark_stale_expired(h.now())
            .await
            .unwrap()
            .is_empty()
    );
    h.clock.advance(Duration::from_secs(1));
    let staled = h.store.task_mark_stale_expired(h.now()).await.unwrap();
    assert_eq!(staled.len(), 1);
    assert_eq!(staled[0].task_id.as_str(), "po-1");
    assert_eq!(staled[0].lease_owner.as_deref(), Some("w1"));
    assert_eq!(staled[0].lease_expires_at, Some(g.lease_expires_at));
    assert_eq!(staled[0].lease_count, 1);
    assert_eq!(h.status("po-1").await, TaskStatus::Stale);
    assert!(
        h.store
            .task_mark_stale_expired(h.now())
            .await
            .unwrap()
            .is_empty(),
        "once"
    );
    // Not handed out again, not even to its holder; its report is refused.
    assert_eq!(h.lease("w1").await, LeaseAttempt::Empty);
    let late = h
        .report("po-1", "w1", None, OrderState::Ordered, None)
        .await;
    assert!(matches!(late, Err(StoreError::LeaseInvalid(_))), "{late:?}");
}

async fn reclaim_needs_a_stale_task_and_a_free_gate(h: &Harness) {
    h.insert("po-1").await;
    h.granted("w1").await;
    let not_stale = h.reclaim("po-1", "w2").await;
    assert!(
        matches!(not_stale, Err(StoreError::StateConflict { .. })),
        "{not_stale:?}"
    );
    h.clock.advance(TTL);
    h.store.task_mark_stale_expired(h.now()).await.unwrap();
    h.insert("po-2").await;
    h.granted("w3").await;
    let busy = h.reclaim("po-1", "w2").await;
    assert!(matches!(busy, Err(StoreError::GateBusy(_))), "{busy:?}");
    h.clock.advance(TTL);
    h.store.task_mark_stale_expired(h.now()).await.unwrap();
    let g = h.reclaim("po-1", "w2").await.unwrap();
    assert_eq!(g.lease_count, 2);
    assert_eq!(h.status("po-1").await, TaskStatus::Leased);
    // The named worker's first poll receives that very grant (same token and count),
    // nobody else gets anything; a later poll is a re-grant as always.
    assert_eq!(h.lease("w9").await, LeaseAttempt::Empty);
    let first = h.granted("w2").await;
    assert_eq!(
        (
            first.task_id.as_str(),
            first.lease_count,
            first.lease_token.as_str()
        ),
        ("po-1", 2, g.lease_token.as_str())
    );
    let again = h.granted("w2").await;
    assert_eq!((again.task_id.as_str(), again.lease_count), ("po-1", 3));
    assert_ne!(again.lease_token, g.lease_token);
    let missing = h.reclaim("nope", "w2").await;
    assert!(matches!(missing, Err(StoreError::TaskNotFound(_))));
}

async fn leasable_exists_agrees_with_lease(h: &Harness) {
    let exists = |w: &'static str| {
        let store = h.store.clone();
        let now = h.now();
        async move {
            store
                .task_leasable_exists(&wid(w), None, LeaseScope::Global, now)
                .await
                .unwrap()
        }
    };
    assert!(!exists("w1").await);
    h.insert("po-1").await;
    h.insert("po-2").await;
    assert!(exists("w1").await);
    h.granted("w1").await;
    assert!(exists("w1").await, "the holder can be re-granted");
    assert!(!exists("w2").await, "the gate is held");
    let site_only = h
        .store
        .task_leasable_exists(&wid("w2"), Some("yahoo"), LeaseScope::Site, h.now())
        .await
        .unwrap();
    assert!(!site_only);
}

async fn list_and_health_snapshot_see_committed_tasks(h: &Harness) {
    for i in 0..5 {
        h.insert(&format!("po-{i}")).await;
    }
    h.insert_site("y-0", "yahoo").await;
    h.granted("w1").await;
    let page = h
        .store
        .task_list(TaskFilter {
            status: Some(TaskStatus::Queued),
            site: Some("rakuten".into()),
            limit: 2,
            offset: 1,
        })
        .await
        .unwrap();
    assert_eq!(page.total, 4);
    let ids: Vec<_> = page.items.iter().map(|t| t.task_id.as_str()).collect();
    assert_eq!(ids, ["po-2", "po-3"]);
    let all = h
        .store
        .task_list(TaskFilter {
            limit: 200,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.total, 6);
    h.clock.advance(Duration::from_secs(700));
    let snap = h
        .store
        .health_snapshot(h.now().minus(Duration::from_secs(600)))
        .await
        .unwrap();
    assert_eq!(snap.queued, 5);
    assert_eq!(snap.active.len(), 1);
    assert_eq!(snap.active[0].task_id.as_str(), "po-0");
    assert_eq!(snap.queued_too_long.len(), 5);
    assert_eq!(snap.stale_count, 0);
    assert_eq!(snap.workers.len(), 1);
    assert_eq!(snap.workers[0].worker_id, "w1");
}

async fn the_schema_refuses_a_second_active_task_and_a_return_to_queued(h: &Harness) {
    h.insert("a").await;
    h.insert("b").await;
    h.granted("w1").await;
    let second = h
        .raw(
            "UPDATE tasks SET status = 'leased', lease_owner = 'w2', \
             lease_expires_at = '2030-01-01T00:00:00.000Z', lease_count = 1, lease_token = 'x', \
             gate_key = '*' WHERE task_id = 'b'",
        )
        .await;
    let err = second.expect_err("two active tasks must be refused by the schema");
    assert!(
        err.contains("UNIQUE") || err.contains("one_active_task"),
        "{err}"
    );
    assert!(
        h.raw("UPDATE tasks SET status = 'queued' WHERE task_id = 'a'")
            .await
            .is_err()
    );
    assert!(
        h.raw("UPDATE tasks SET status = 'succeeded' WHERE task_id = 'a'")
            .await
            .is_err()
    );
    assert!(
        h.raw("UPDATE account_queries SET status = 'leased' WHERE query_id = 'none'")
            .await
            .is_ok(),
        "the table exists (no row matched)"
    );
}

async fn concurrent_leases_grant_exactly_one_task(h: &Harness) {
    for i in 0..8 {
        h.insert(&format!("po-{i}")).await;
    }
    for round in 0..8 {
        let mut handles = Vec::new();
        for w in 0..8 {
            let (store, now) = (h.store.clone(), h.now());
            handles.push(tokio::spawn(async move {
                store
                    .task_lease(
                        LeaseRequest {
                            worker_id: wid(&format!("r{round}-w{w}")),
                            site: None,
                            ttl: TTL,
                            scope: LeaseScope::Global,
                        },
                        now,
                    )
                    .await
                    .unwrap()
            }));
        }
        let mut grants = Vec::new();
        for hd in handles {
            if let LeaseAttempt::Granted(g) = hd.await.unwrap() {
                grants.push(g);
            }
        }
        assert_eq!(grants.len(), 1, "round {round}: {grants:?}");
        let g = &grants[0];
        let holder = h
            .store
            .task_get(&g.task_id)
            .await
            .unwrap()
            .unwrap()
            .lease_owner
            .unwrap();
        h.report(
            g.task_id.as_str(),
            &holder,
            Some(&g.lease_token),
            OrderState::Paid,
            Some(Outcome::Succeeded),
        )
        .await
        .unwrap();
    }
    let snap = h.store.health_snapshot(h.now()).await.unwrap();
    assert_eq!((snap.queued, snap.active.len()), (0, 0));
}

async fn concurrent_sweeps_stale_each_lease_once(h: &Harness) {
    h.insert_site("a", "s1").await;
    h.insert_site("b", "s2").await;
    h.insert_site("c", "s3").await;
    for w in ["w1", "w2", "w3"] {
        assert!(matches!(
            h.lease_scoped(w, LeaseScope::Site).await,
            LeaseAttempt::Granted(_)
        ));
    }
    h.clock.advance(TTL);
    let mut handles = Vec::new();
    for _ in 0..4 {
        let (store, now) = (h.store.clone(), h.now());
        handles.push(tokio::spawn(async move {
            store.task_mark_stale_expired(now).await.unwrap()
        }));
    }
    let mut total = Vec::new();
    for hd in handles {
        total.extend(hd.await.unwrap().into_iter().map(|t| t.task_id.to_string()));
    }
    total.sort();
    assert_eq!(
        total,
        ["a", "b", "c"],
        "each lapsed lease reported exactly once"
    );
}

async fn a_query_is_leased_answered_once_and_repeats_are_duplicates(h: &Harness) {
    assert!(h.lease_query("w1").await.is_none());
    h.insert_query("q-1", 3).await;
    let created_after = h.now().minus(Duration::from_secs(900));
    assert!(
        h.store
            .query_leasable_exists(None, created_after)
            .await
            .unwrap()
    );
    let g = h.lease_query("w1").await.expect("granted");
    assert_eq!((g.query_id.as_str(), g.attempt), ("q-1", 1));
    assert!(
        !h.store
            .query_leasable_exists(None, created_after)
            .await
            .unwrap()
    );
    assert!(
        h.lease_query("w2").await.is_none(),
        "leased to one worker only"
    );
    let stranger = h.query_result("q-1", "w2", &g.lease_token, true).await;
    assert!(matches!(stranger, Err(StoreError::QueryLeaseInvalid(_))));
    let ack = h
        .query_result("q-1", "w1", &g.lease_token, true)
        .await
        .unwrap();
    assert_eq!((ack.status, ack.duplicate), (QueryStatus::Succeeded, false));
    let again = h
        .query_result("q-1", "w1", &g.lease_token, true)
        .await
        .unwrap();
    assert!(again.duplicate);
    let flipped = h.query_result("q-1", "w1", &g.lease_token, false).await;
    assert!(matches!(flipped, Err(StoreError::QueryLeaseInvalid(_))));
    let v = h.store.query_get(&qid("q-1")).await.unwrap().unwrap();
    assert_eq!(v.result.unwrap()["orders"], serde_json::json!([]));
    let missing = h.query_result("nope", "w1", "t", true).await;
    assert!(matches!(missing, Err(StoreError::QueryNotFound(_))));
    // Failure results are stored with their error.
    h.insert_query("q-2", 3).await;
    let g2 = h.lease_query("w1").await.unwrap();
    let f = h
        .query_result("q-2", "w1", &g2.lease_token, false)
        .await
        .unwrap();
    assert_eq!((f.status, f.error_code), (QueryStatus::Failed, Some(5003)));
    assert!(
        !h.store
            .query_insert(
                NewQuery {
                    query_id: qid("q-2"),
                    site: "rakuten".into(),
                    kind: QueryKind::OrderList,
                    params_json: r#"{"max_pages":1}"#.into(),
                    max_attempts: 3,
                },
                h.now(),
            )
            .await
            .unwrap()
            .created
    );
}

async fn a_lapsed_query_lease_is_redelivered_then_fails_when_attempts_run_out(h: &Harness) {
    h.insert_query("q-1", 2).await;
    let g1 = h.lease_query("w1").await.unwrap();
    h.clock.advance(QUERY_TTL);
    let lapsed = h.store.query_requeue_expired_leases(h.now()).await.unwrap();
    assert_eq!(lapsed.len(), 1);
    assert_eq!(
        (lapsed[0].status, lapsed[0].attempt),
        (QueryStatus::Queued, 1)
    );
    assert_eq!(lapsed[0].lease_owner.as_deref(), Some("w1"));
    let late = h.query_result("q-1", "w1", &g1.lease_token, true).await;
    assert!(
        matches!(late, Err(StoreError::QueryLeaseInvalid(_))),
        "fenced after redelivery"
    );
    let g2 = h.lease_query("w2").await.unwrap();
    assert_eq!(g2.attempt, 2);
    h.clock.advance(QUERY_TTL);
    let lapsed = h.store.query_requeue_expired_leases(h.now()).await.unwrap();
    assert_eq!(lapsed[0].status, QueryStatus::Failed);
    assert_eq!(h.query_status("q-1").await, QueryStatus::Failed);
    assert!(
        h.store
            .query_requeue_expired_leases(h.now())
            .await
            .unwrap()
            .is_empty()
    );
    assert!(h.lease_query("w3").await.is_none());
}

async fn query_ttl_expiry_retention_and_listing(h: &Harness) {
    h.insert_query("q-old", 3).await;
    h.insert_query("q-leased", 3).await;
    h.lease_query("w1").await.unwrap(); // q-old
    h.clock.advance(Duration::from_secs(100));
    h.insert_query("q-new", 3).await;
    // TTL: created at or before the cutoff → expired (queued or leased alike), never leased.
    let cutoff = h.now().minus(Duration::from_secs(50));
    let mut expired: Vec<_> = h
        .store
        .query_mark_expired(cutoff, h.now())
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.to_string())
        .collect();
    expired.sort();
    assert_eq!(expired, ["q-leased", "q-old"]);
    assert_eq!(h.query_status("q-old").await, QueryStatus::Expired);
    let leasable = h
        .store
        .query_leasable_exists(None, h.now().minus(Duration::from_secs(50)))
        .await
        .unwrap();
    assert!(leasable, "q-new");
    let page = h
        .store
        .query_list(QueryFilter {
            status: Some(QueryStatus::Expired),
            kind: Some(QueryKind::OrderList),
            limit: 1,
            offset: 0,
        })
        .await
        .unwrap();
    assert_eq!((page.total, page.items.len()), (2, 1));
    assert_eq!(page.items[0].query_id.as_str(), "q-old");
    // Retention: terminal ones finished before the cutoff go; open ones stay.
    h.clock.advance(Duration::from_secs(10));
    assert_eq!(
        h.store.query_delete_terminal_before(h.now()).await.unwrap(),
        2
    );
    assert!(h.store.query_get(&qid("q-old")).await.unwrap().is_none());
    assert_eq!(h.query_status("q-new").await, QueryStatus::Queued);
}

async fn concurrent_query_leases_never_share_a_query(h: &Harness) {
    for i in 0..10 {
        h.insert_query(&format!("q-{i}"), 3).await;
    }
    let mut handles = Vec::new();
    for w in 0..16 {
        let (store, now) = (h.store.clone(), h.now());
        handles.push(tokio::spawn(async move {
            store
                .query_lease_next(
                    QueryLeaseRequest {
                        worker_id: wid(&format!("w{w}")),
                        site: None,
                        ttl: QUERY_TTL,
                        created_after: now.minus(Duration::from_secs(900)),
                    },
                    now,
                )
                .await
                .unwrap()
        }));
    }
    let mut got: Vec<String> = Vec::new();
    for hd in handles {
        if let Some(g) = hd.await.unwrap() {
            got.push(g.query_id.to_string());
        }
    }
    got.sort();
    let n = got.len();
    got.dedup();
    assert_eq!(got.len(), n, "a query leased twice");
    assert_eq!(n, 10);
}

async fn concurrent_query_sweeps_redeliver_each_lapsed_lease_once(h: &Harness) {
    for i in 0..6 {
        h.insert_query(&format!("q-{i}"), 3).await;
        h.lease_query(&format!("w{i}")).await.unwrap();
    }
    h.clock.advance(QUERY_TTL);
    let mut handles = Vec::new();
    for _ in 0..4 {
        let (store, now) = (h.store.clone(), h.now());
        handles.push(tokio::spawn(async move {
            store.query_requeue_expired_leases(now).await.unwrap()
        }));
    }
    let mut ids: Vec<String> = Vec::new();
    for hd in handles {
        ids.extend(
            hd.await
                .unwrap()
                .into_iter()
                .map(|q| q.query_id.to_string()),
        );
    }
    ids.sort();
    assert_eq!(ids, ["q-0", "q-1", "q-2", "q-3", "q-4", "q-5"], "each once");
    for i in 0..6 {
        assert_eq!(h.query_status(&format!("q-{i}")).await, QueryStatus::Queued);
    }
}

async fn a_lone_instance_is_the_alert_leader(h: &Harness) {
    assert!(h.store.alerts_leader().await.unwrap());
    assert!(h.store.alerts_leader().await.unwrap());
}

/// PostgreSQL only: instances sharing a schema elect exactly one alert logger, and a new one
/// takes over when the leader's session ends.
#[test_util::lane(postgres)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_instances_elect_one_alert_leader_and_take_over_when_it_goes() {
    let db = PgSchema::new().await;
    let a = PgStore::open(&db.url).await.unwrap();
    let b = PgStore::open(&db.url).await.unwrap();
    assert!(a.alerts_leader().await.unwrap());
    assert!(a.alerts_leader().await.unwrap(), "stays leader");
    assert!(!b.alerts_leader().await.unwrap());
    a.close().await;
    assert!(b.alerts_leader().await.unwrap(), "b takes over");
    b.close().await;
}

/// The ids of a keyset page and its (older, newer) flags.
fn seek_ids<T>(page: &SeekPage<T>, id: impl Fn(&T) -> String) -> (Vec<String>, bool, bool) {
    (page.items.iter().map(id).collect(), page.older, page.newer)
}

async fn console_lists_page_by_keyset_through_ties_in_both_directions(h: &Harness) {
    // Four tasks share one created_at (the tie is broken by insertion order), three come a second
    // later; a yahoo task and a leased one are filtered out.
    for i in 0..4 {
        h.insert(&format!("a{i}")).await;
    }
    h.insert_site("y", "yahoo").await;
    h.clock.advance(Duration::from_secs(1));
    for i in 0..3 {
        h.insert(&format!("b{i}")).await;
    }
    h.granted("w1").await; // a0
    let seek = |seek: Seek| {
        let store = h.store.clone();
        async move {
            let page = store
                .task_seek(Some(TaskStatus::Queued), Some("rakuten".into()), seek, 2)
                .await
                .unwrap();
            assert_eq!(page.total, 6);
            let edges = page.edges.clone();
            (seek_ids(&page, |t| t.task_id.to_string()), edges)
        }
    };
    let mut forward = Vec::new();
    let (mut page, mut edges) = seek(Seek::Oldest).await;
    assert_eq!((page.1, page.2), (false, true), "oldest page");
    loop {
        forward.extend(page.0.clone());
        if !page.2 {
            break;
        }
        assert!(forward.len() < 10, "the walk ends");
        (page, edges) = seek(Seek::After(edges.unwrap().1)).await;
        assert!(page.1, "a newer page has an older one");
    }
    assert_eq!(forward, ["a1", "a2", "a3", "b0", "b1", "b2"]);
    let mut backward = Vec::new();
    (page, edges) = seek(Seek::Newest).await;
    assert_eq!(page.0, ["b1", "b2"]);
    assert_eq!((page.1, page.2), (true, false), "newest page");
    loop {
        backward.splice(0..0, page.0.clone());
        if !page.1 {
            break;
        }
        assert!(backward.len() < 10, "the walk ends");
        (page, edges) = seek(Seek::Before(edges.unwrap().0)).await;
        assert!(page.2, "an older page has a newer one");
    }
    assert_eq!(backward, forward);
    // A cursor survives a link: its text form parses back to the same position.
    let (_, edges) = seek(Seek::Oldest).await;
    let last = edges.unwrap().1;
    let reparsed = order_gateway::store::SeekCursor::parse(&last.encode()).unwrap();
    assert_eq!(seek(Seek::After(reparsed)).await.0.0, ["a3", "b0"]);
    assert!(order_gateway::store::SeekCursor::parse("2026-01-01T00:00:00Z_x").is_none());
    assert!(order_gateway::store::SeekCursor::parse("yesterday_1").is_none());
    // Unfiltered: every task, the leased one and the yahoo one included.
    let all = h
        .store
        .task_seek(None, None, Seek::Oldest, 50)
        .await
        .unwrap();
    assert_eq!((all.items.len(), all.total, all.newer), (8, 8, false));
    // The account-query list pages the same way.
    for i in 0..3 {
        h.insert_query(&format!("q{i}"), 3).await;
    }
    let q = h
        .store
        .query_seek(None, None, Seek::Oldest, 2)
        .await
        .unwrap();
    assert_eq!(
        seek_ids(&q, |q| q.query_id.to_string()),
        (vec!["q0".into(), "q1".into()], false, true)
    );
    let next = Seek::After(q.edges.unwrap().1);
    let q = h
        .store
        .query_seek(
            Some(QueryStatus::Queued),
            Some(QueryKind::OrderList),
            next,
            2,
        )
        .await
        .unwrap();
    assert_eq!(
        seek_ids(&q, |q| q.query_id.to_string()),
        (vec!["q2".into()], true, false)
    );
    assert_eq!(q.total, 3);
    // Counts by status are capped like the list totals, and exact below the cap.
    let counts = h.store.task_status_counts().await.unwrap();
    let queued = counts
        .by_status
        .iter()
        .find(|(s, _)| *s == TaskStatus::Queued)
        .unwrap()
        .1;
    assert_eq!(queued, 7);
}

/// The console's alerts page pages by keyset on `(raised_at, insertion order)`
/// (no OFFSET), open alerts only unless asked for all, with a capped total.
async fn console_alerts_page_by_keyset_newest_first_through_ties(h: &Harness) {
    // Five alerts: al0..al2 raised at the same instant (insertion order breaks the tie), al3 and
    // al4 later; al1 and al4 are cleared.
    for (i, (at, cleared)) in [
        ("2026-07-27T09:00:00.000Z", false),
        ("2026-07-27T09:00:00.000Z", true),
        ("2026-07-27T09:00:00.000Z", false),
        ("2026-07-27T09:01:00.000Z", false),
        ("2026-07-27T09:02:00.000Z", true),
    ]
    .into_iter()
    .enumerate()
    {
        let (state, cleared_at) = if cleared {
            ("cleared", "'2026-07-27T10:00:00.000Z'")
        } else {
            ("open", "NULL")
        };
        h.raw(&format!(
            "INSERT INTO alerts (alert_id, kind, subject, state, summary, raised_at, cleared_at) \
             VALUES ('al{i}', 'worker_offline', 'w{i}', '{state}', 'worker w{i} is offline', '{at}', {cleared_at})"
        ))
        .await
        .unwrap();
    }
    let seek = |open_only: bool, seek: Seek| {
        let store = h.store.clone();
        async move {
            let page = store.alert_seek(open_only, None, seek, 2).await.unwrap();
            let edges = page.edges.clone();
            (seek_ids(&page, |a| a.alert_id.clone()), edges, page.total)
        }
    };
    // The newest page first (the page's default), then older ones by the cursor of its first row.
    let (page, edges, total) = seek(true, Seek::Newest).await;
    assert_eq!(total, 3);
    assert_eq!(page, (vec!["al2".into(), "al3".into()], true, false));
    let (page, _, _) = seek(true, Seek::Before(edges.unwrap().0)).await;
    assert_eq!(page, (vec!["al0".into()], false, true));
    // Every alert, oldest first from the oldest page.
    let mut walked = Vec::new();
    let (mut page, mut edges, total) = seek(false, Seek::Oldest).await;
    assert_eq!(total, 5);
    loop {
        walked.extend(page.0.clone());
        if !page.2 {
            break;
        }
        assert!(walked.len() < 10, "the walk ends");
        (page, edges, _) = seek(false, Seek::After(edges.unwrap().1)).await;
    }
    assert_eq!(walked, ["al0", "al1", "al2", "al3", "al4"]);
    // Filtered by kind: none of another kind.
    let none = h
        .store
        .alert_seek(
            false,
            Some(rakuten_types::alert::AlertKind::TaskStale),
            Seek::Newest,
            2,
        )
        .await
        .unwrap();
    assert_eq!((none.items.len(), none.total), (0, 0));
}

/// An operator may cancel only a queued task (D-resolve-and-cancel), which has never been
/// granted, so a cancel ends no lease grant; the schema no longer admits a `cancelled` ending
/// (migration 0009, D-lease-grant-history).
async fn a_cancelled_task_never_held_a_grant_and_no_grant_ends_as_cancelled(h: &Harness) {
    h.insert("po-1").await;
    h.store
        .task_cancel(
            CancelRequest {
                task_id: tid("po-1"),
                reason: "not wanted".into(),
                actor: "test".into(),
            },
            h.now(),
        )
        .await
        .unwrap();
    assert_eq!(h.status("po-1").await, TaskStatus::Failed);
    assert!(
        h.grants("po-1").await.is_empty(),
        "a queued task was never granted"
    );
    // A leased task cannot be cancelled: its grant stays open.
    h.insert("po-2").await;
    h.granted("w1").await;
    let refused = h
        .store
        .task_cancel(
            CancelRequest {
                task_id: tid("po-2"),
                reason: "not wanted".into(),
                actor: "test".into(),
            },
            h.now(),
        )
        .await;
    assert!(
        matches!(refused, Err(StoreError::StateConflict { .. })),
        "{refused:?}"
    );
    assert_eq!(h.grants("po-2").await[0].ended_how, None);
    let bypass = h
        .raw(
            "UPDATE lease_grants SET ended_at = '2026-07-27T09:00:00.000Z', \
             ended_how = 'cancelled' WHERE task_id = 'po-2'",
        )
        .await;
    assert!(bypass.is_err(), "a cancelled ending is refused: {bypass:?}");
}
