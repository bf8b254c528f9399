//! Every scenario on a fresh PostgreSQL schema per test (`RAKUTEN_POLL_DB_URL` pointed at it).

use card_polling::Application;
use card_polling::settings::{Secret, Settings};

/// This engine's folder under `migrations/`.
pub const MIGRATIONS_DIR: &str = "postgres";

/// The store the raw-SQL fixtures and checks read through.
pub type EngineStore = card_polling::store::postgres::PgStore;

/// A fresh schema, and the settings pointed at it.
pub async fn fresh_database(settings: &mut Settings) -> Option<crate::PgSchema> {
    let schema = crate::PgSchema::new().await;
    settings.db_url = Some(Secret::new(schema.url.clone()));
    Some(schema)
}

/// The app's store.
pub fn engine_store(app: &Application) -> EngineStore {
    app.postgres().expect("the app runs on PostgreSQL").clone()
}

/// Locks the app's `priority_items` table (`ACCESS EXCLUSIVE`) from a second session; the test
/// ends it with `ROLLBACK`.
pub async fn hold_write_lock(settings: &Settings) -> sqlx::PgConnection {
    use sqlx::Connection;
    let url = settings
        .db_url
        .as_ref()
        .expect("a PostgreSQL app")
        .expose()
        .to_owned();
    let mut c = sqlx::PgConnection::connect(&url)
        .await
        .expect("second session");
    sqlx::query("BEGIN").execute(&mut c).await.expect("begin");
    sqlx::query("LOCK TABLE priority_items IN ACCESS EXCLUSIVE MODE")
        .execute(&mut c)
        .await
        .expect("table lock");
    c
}

scenarios!();

/// Issue #12 item 6, card-polling: two instances on one database, one whose clock runs 120 s
/// ahead. By its clock the healthy instance's claim (90 s lease) has lapsed, and it used to take
/// the claim over while the carrier call was in flight (the carrier called twice). Now it checks
/// its clock against the database's, makes no claim, and says so in `/health` and `/metrics`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_whose_clock_runs_ahead_does_not_take_over_a_claim_in_flight() {
    use std::time::Duration;

    use card_polling::executor::ExecOutcome;
    use card_polling::priority::CLAIM_LEASE;
    use rakuten_types::{Clock, Timestamp};
    use serde_json::json;

    use helpers::{ADMIN, Backend, PLATFORM, spawn_with};

    let shared = crate::PgSchema::new().await;
    let on_shared = |s: &mut Settings| {
        s.db_url = Some(Secret::new(shared.url.clone()));
        // Wider than the default 2 s only so that a loaded test machine's pauses between
        // setting the manual clocks and the checks never count as skew; 120 s is far past it.
        s.clock_max_skew_secs = 10;
    };
    let healthy = spawn_with(Backend::Memory, on_shared).await;
    let fast = spawn_with(Backend::Memory, on_shared).await;
    let real = Timestamp::now_utc();
    healthy.clock.set(real);
    fast.clock.set(real.plus(Duration::from_secs(120)));
    healthy.seed().await;
    let (s, v) = healthy
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["card_status"], "reason": "skew test"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let id = v["data"]["items"][0]["item_id"].as_i64().unwrap();

    // The manual clocks stand still: set them again, so the seeding's time is no skew.
    let real = Timestamp::now_utc();
    healthy.clock.set(real);
    fast.clock.set(real.plus(Duration::from_secs(120)));

    // The healthy instance claims; its carrier call is in flight.
    assert!(healthy.executor.clock_guard().may_claim().await);
    let claim = healthy
        .store
        .item_claim(id, "healthy-claim", healthy.clock.now(), CLAIM_LEASE)
        .await
        .unwrap()
        .expect("the healthy instance claims");

    // By the fast clock the claim lapsed 30 s ago: it is due there, but not taken over.
    let report = fast.run_executor().await;
    assert_eq!((report.due, report.skipped), (1, 1), "{report:?}");
    assert_eq!(fast.sim.poll_calls("CA1", "card_status"), 0);
    let (s, h) = fast.get("/health", ADMIN).await;
    assert_eq!(s, 200, "{h}");
    assert_eq!(h["data"]["clock"]["skewed"], true, "{h}");
    assert!(
        h["data"]["clock"]["offset_ms"].as_i64().unwrap() < -100_000,
        "{h}"
    );
    let (s, m) = fast
        .raw(reqwest::Method::GET, "/metrics", Some(ADMIN))
        .await;
    assert_eq!(s, 200);
    assert!(m.contains("cardpoll_clock_skewed 1"), "{m}");
    assert!(
        m.contains("cardpoll_claims_refused_total{reason=\"clock_skew\"} 1"),
        "{m}"
    );

    // The healthy instance finishes its execution: the carrier was called once in all.
    let out = healthy.executor.execute_claimed(claim).await.unwrap();
    assert_eq!(out, ExecOutcome::Completed);
    assert_eq!(healthy.sim.poll_calls("CA1", "card_status"), 1);
    assert_eq!(fast.sim.poll_calls("CA1", "card_status"), 0);
    let (_, h) = healthy.get("/health", ADMIN).await;
    assert_eq!(h["data"]["clock"]["skewed"], false, "{h}");
    drop((healthy, fast));
}
