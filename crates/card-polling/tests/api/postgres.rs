//! Every scenario on a fresh PostgreSQL schema per test (`RAKUTEN_POLL_DB_URL` pointed at it).

use card_polling::Application;
use card_polling::settings::{Secret, Settings};

/// The lanes a scenario test needs on this engine besides its own (`#[super::lane]`,
/// `#[super::lane(redis)]`): the `postgres` lane.
pub use test_util::postgres_lane as lane;

/// This engine's folder under `migrations/`.
pub const MIGRATIONS_DIR: &str = "postgres";
pub use card_polling::store::postgres::RELEASED;

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

// Several instances on one database (D-poll-postgres-concurrent-writes): PostgreSQL only.
#[path = "multi_instance.rs"]
mod multi_instance;

/// Two instances on one database, one whose clock runs 120 s
/// ahead. By its clock the healthy instance's claim (90 s lease) has lapsed, and it used to take
/// the claim over while the carrier call was in flight (the carrier called twice). Now it checks
/// its clock against the database's, makes no claim, and says so in `/health` and `/metrics`.
#[test_util::lane(postgres)]
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

/// A `card-polling serve` process on port 0 (the address it wrote to `RAKUTEN_POLL_ADDR_FILE`),
/// killed when dropped.
struct Proc {
    child: std::process::Child,
    base: String,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    /// Starts the binary with `env`; with `fake_offset` (`"+120s"`) under libfaketime, its wall
    /// clock moved and its monotonic clock not (`FAKETIME_DONT_FAKE_MONOTONIC`: tokio's timers
    /// run normally).
    async fn start(
        dir: &std::path::Path,
        name: &str,
        env: &[(&str, &str)],
        fake_offset: Option<&str>,
    ) -> Proc {
        use std::time::Duration;
        let addr_file = dir.join(format!("{name}.addr"));
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_card-polling"));
        cmd.arg("serve")
            .env("RAKUTEN_POLL_LISTEN", "127.0.0.1:0")
            .env("RAKUTEN_POLL_ADDR_FILE", &addr_file)
            .env("RAKUTEN_POLL_INSTANCE_ID", name)
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        if let Some(offset) = fake_offset {
            cmd.env("LD_PRELOAD", crate::libfaketime())
                .env("FAKETIME", offset)
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        let mut child = cmd.spawn().expect("start card-polling");
        let addr = test_util::wait_for_addr_file(
            &mut child,
            &addr_file,
            Duration::from_secs(30),
            &format!("card-polling {name}"),
        )
        .await;
        Proc {
            child,
            base: format!("http://{addr}"),
        }
    }

    /// The sum of the samples of `name` in its `/metrics`.
    async fn metric_sum(&self, client: &reqwest::Client, token: &str, name: &str) -> f64 {
        let text = client
            .get(format!("{}/metrics", self.base))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .filter(|l| {
                l.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

/// Real processes and a real clock step (libfaketime, not an injected
/// clock): two `card-polling` processes on one PostgreSQL schema, one 120 s ahead. By the fast
/// clock the healthy instance's claim (90 s lease) lapsed the moment it was made; while the
/// carrier call is in flight (3 s of simulated latency) the fast instance used to take the claim
/// over and call the carrier a second time. It now makes no claim while skewed: the carrier is
/// called once in all, and the fast instance's `/health` and `/metrics` say why.
#[test_util::lane(postgres, faketime)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_120_s_ahead_under_libfaketime_does_not_take_over_a_claim_in_flight() {
    use std::time::Duration;

    use serde_json::{Value, json};

    use helpers::{ADMIN, PLATFORM};

    let shared = crate::PgSchema::new().await;
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("RAKUTEN_POLL_DB_URL", shared.url.as_str()),
        ("RAKUTEN_POLL_ADMIN_TOKEN", ADMIN),
        ("RAKUTEN_POLL_EXECUTOR_TICK_MS", "100"),
        ("RAKUTEN_POLL_SIM_LATENCY_MS", "3000"),
        ("RAKUTEN_POLL_CLOCK_MAX_SKEW_SECS", "2"),
    ];
    let healthy = Proc::start(dir.path(), "healthy", &env, None).await;
    let fast = Proc::start(dir.path(), "fast", &env, Some("+120s")).await;
    let client = reqwest::Client::new();
    let post = |base: &str, path: &str, token: &str, body: Value| {
        client
            .post(format!("{base}{path}"))
            .bearer_auth(token)
            .json(&body)
            .send()
    };
    let r = post(
        &healthy.base,
        "/api/admin/import",
        ADMIN,
        json!({"shops": [{"id": "A", "name": "Agent A"}],
               "accounts": [{"id": "plat", "role": "platform", "token": PLATFORM}],
               "cards": [{"iccid": "CA1", "shop_id": "A"}]}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let r = post(
        &healthy.base,
        "/api/priority-items",
        PLATFORM,
        json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["card_status"],
               "reason": "libfaketime"}),
    )
    .await
    .unwrap();
    let v: Value = r.json().await.unwrap();
    let id = v["data"]["items"][0]["item_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("{v}"));

    // The healthy instance claims and calls the carrier (3 s); meanwhile the fast one ticks
    // every 100 ms with the claim lapsed by its clock.
    let detail = test_util::wait_for(
        "the item to complete",
        Duration::from_secs(30),
        async || {
            let d: Value = client
                .get(format!("{}/api/priority-items/{id}", healthy.base))
                .bearer_auth(PLATFORM)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if d["data"]["item"]["status"] == "completed" {
                Ok(d)
            } else {
                Err(d)
            }
        },
    )
    .await;
    // One claim, by the healthy instance, no takeover; one carrier call logged.
    let events: Vec<(String, String)> = detail["data"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap_or("").to_owned(),
                e["actor"].as_str().unwrap_or("-").to_owned(),
            )
        })
        .collect();
    let claims: Vec<_> = events
        .iter()
        .filter(|(k, _)| k == "claim" || k == "takeover")
        .collect();
    assert_eq!(
        claims,
        [&("claim".to_owned(), "healthy".to_owned())],
        "{detail}"
    );
    assert_eq!(
        detail["data"]["logs"].as_array().unwrap().len(),
        1,
        "{detail}"
    );
    const CALLS: &str = "cardpoll_carrier_calls_total";
    let h_calls = healthy.metric_sum(&client, ADMIN, CALLS).await;
    let f_calls = fast.metric_sum(&client, ADMIN, CALLS).await;
    assert_eq!(
        (h_calls, f_calls),
        (1.0, 0.0),
        "the carrier is called once in all"
    );
    let refused = fast
        .metric_sum(&client, ADMIN, "cardpoll_claims_refused_total")
        .await;
    assert!(
        refused >= 1.0,
        "the fast instance tried and refused: {refused}"
    );
    assert_eq!(
        fast.metric_sum(&client, ADMIN, "cardpoll_clock_skewed")
            .await,
        1.0
    );
    let h: Value = client
        .get(format!("{}/health", fast.base))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(h["data"]["clock"]["skewed"], true, "{h}");
    let offset = h["data"]["clock"]["offset_ms"].as_i64().unwrap();
    assert!((-125_000..-115_000).contains(&offset), "{offset}");
    drop((healthy, fast));
}

/// D-database-url-printing: on PostgreSQL the start line said only
/// `(postgres: RAKUTEN_POLL_DB_URL)`, so an operator with several databases could not tell which
/// one an instance uses. It names the scheme, host, port and database, never the password.
#[test_util::lane(postgres)]
#[tokio::test]
async fn the_start_line_names_the_postgresql_host_and_database_without_the_password() {
    use std::io::BufRead;
    let shared = crate::PgSchema::new().await;
    // Trust authentication ignores the password; the start line must not print it.
    let mut parsed = reqwest::Url::parse(&shared.url).unwrap();
    parsed.set_password(Some("Pr1ntMeN0t")).unwrap();
    let url = parsed.to_string();
    let port = parsed.port().map(|p| format!(":{p}")).unwrap_or_default();
    let expected = format!(
        "(postgres: postgres://{}{port}{})",
        parsed.host_str().unwrap(),
        parsed.path()
    );
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_card-polling"))
        .arg("serve")
        .env("RAKUTEN_POLL_LISTEN", "127.0.0.1:0")
        .env("RAKUTEN_POLL_DB_URL", &url)
        .env("RAKUTEN_POLL_ADMIN_TOKEN", helpers::ADMIN)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start card-polling");
    let stdout = child.stdout.take().unwrap();
    let line = std::thread::spawn(move || {
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find(|l| l.contains("card-polling listening"))
    })
    .join()
    .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let line = line.expect("a start line");
    assert!(line.contains(&expected), "{expected} not in {line}");
    assert!(!line.contains("Pr1ntMeN0t"), "{line}");
}
