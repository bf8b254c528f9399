//! `spawn_app()`: the real application on 127.0.0.1:0 with a fresh temporary database, a
//! `ManualClock`, and typed request helpers.

use std::sync::Arc;
use std::time::Duration;

use order_gateway::Application;
use order_gateway::Settings;
use order_gateway::jobs::alerts::{AlertJob, AlertRun};
use order_gateway::jobs::query_sweeper::{QuerySweep, QuerySweeper};
use order_gateway::jobs::sweeper::Sweeper;
use order_gateway::jobs::webhooks::{DeliveryRun, WebhookDelivery};
use order_gateway::settings::Secret;
use order_gateway::store::StaleTask;
use rakuten_types::{Clock, ManualClock};
use serde_json::{Value, json};

use test_util::PgSchema;

pub const TOKEN: &str = "test-token-0123456789";

pub struct TestApp {
    pub address: String,
    pub client: reqwest::Client,
    pub clock: ManualClock,
    pub token: String,
    pub sweeper: Sweeper,
    pub query_sweeper: QuerySweeper,
    pub alert_job: AlertJob,
    pub webhooks: WebhookDelivery,
    pub settings: Settings,
    /// The handlers' shared state (store, metrics, …) of this app.
    pub state: order_gateway::state::AppState,
    pub _tempdir: tempfile::TempDir,
    /// The PostgreSQL schema, when the app runs on PostgreSQL (kept alive as long as the app).
    pub _db: Option<Arc<PgSchema>>,
}

/// A plain answer: HTTP status and the parsed envelope.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

impl Answer {
    pub fn code(&self) -> i64 {
        self.body["code"].as_i64().unwrap_or(-1)
    }
    pub fn data(&self) -> &Value {
        &self.body["data"]
    }
    #[track_caller]
    pub fn assert_ok(&self) -> &Value {
        assert_eq!((self.status, self.code()), (200, 0), "{:?}", self.body);
        assert_eq!(self.body["success"], true);
        &self.body["data"]
    }
    #[track_caller]
    pub fn assert_err(&self, status: u16, code: i64) {
        assert_eq!(
            (self.status, self.code()),
            (status, code),
            "{:?}",
            self.body
        );
        assert_eq!(self.body["success"], false, "{:?}", self.body);
        assert!(self.body["data"].is_null());
        assert!(
            !self.body["msg"].as_str().unwrap_or_default().is_empty(),
            "error without msg"
        );
    }
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// Spawns with adjusted settings. The background sweeper runs hourly here (its first tick one
/// hour after start): tests drive expiry with the clock and `sweep()` so nothing races them by
/// surprise.
pub async fn spawn_app_with(adjust: impl FnOnce(&mut Settings)) -> TestApp {
    spawn_on(None, ManualClock::at_fixed_date(), adjust).await
}

/// The application on PostgreSQL (`db`'s schema); several apps on one `db` and one `clock` are
/// several instances sharing one queue.
pub async fn spawn_pg_app(
    db: Arc<PgSchema>,
    clock: ManualClock,
    adjust: impl FnOnce(&mut Settings),
) -> TestApp {
    spawn_on(Some(db), clock, adjust).await
}

async fn spawn_on(
    db: Option<Arc<PgSchema>>,
    clock: ManualClock,
    adjust: impl FnOnce(&mut Settings),
) -> TestApp {
    let tempdir = tempfile::tempdir().expect("tempdir");
    let mut settings = Settings::for_tests(tempdir.path().join("gw.db"), TOKEN);
    settings.sweep_interval_seconds = 3600.0;
    settings.db_url = db.as_ref().map(|d| Secret::new(d.url.clone()));
    adjust(&mut settings);
    let app = Application::build(settings.clone(), Arc::new(clock.clone()))
        .await
        .expect("build");
    let address = format!("http://127.0.0.1:{}", app.port());
    let sweeper = app.sweeper();
    let query_sweeper = app.query_sweeper();
    let alert_job = app.alert_job();
    let webhooks = app.webhooks();
    let state = app.state();
    tokio::spawn(app.run_until_stopped(std::future::pending()));
    TestApp {
        address,
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap(),
        clock,
        token: TOKEN.into(),
        sweeper,
        query_sweeper,
        alert_job,
        webhooks,
        settings,
        state,
        _tempdir: tempdir,
        _db: db,
    }
}

pub async fn answer(resp: reqwest::Response) -> Answer {
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|_| panic!("not JSON (status {status}): {text:?}"));
    Answer { status, body }
}

/// Waits until `n` long-polls of `channel` (`orders`, `queries`) wait on the gateway at `base`,
/// by its `gateway_open_long_polls` gauge (read with the operator token [`TOKEN`]). A poll counts
/// from the moment its handler listens for wake-ups, so a submit after this reaches it.
pub async fn wait_for_long_polls(client: &reqwest::Client, base: &str, channel: &str, n: u32) {
    let series = format!("gateway_open_long_polls{{channel=\"{channel}\"}} ");
    test_util::wait_for(
        &format!("{n} waiting long-poll(s) on {channel}"),
        Duration::from_secs(30),
        async || {
            let text = client
                .get(format!("{base}/metrics"))
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            let open = text
                .lines()
                .find_map(|l| l.strip_prefix(&series))
                .map(str::to_owned)
                .unwrap_or_default();
            if open == n.to_string() {
                Ok(())
            } else {
                Err(format!("{series}{open}"))
            }
        },
    )
    .await;
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    /// [`wait_for_long_polls`] on this app.
    pub async fn wait_for_long_polls(&self, channel: &str, n: u32) {
        wait_for_long_polls(&self.client, &self.address, channel, n).await;
    }

    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.get(self.url(path)).bearer_auth(&self.token)
    }

    pub fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.post(self.url(path)).bearer_auth(&self.token)
    }

    pub async fn submit(&self, task_id: &str) -> Answer {
        self.submit_body(json!({"task_id": task_id, "site": "rakuten", "intent": {"item_url": "https://item.rakuten.co.jp/shop/a/", "quantity": 1}}))
            .await
    }

    pub async fn submit_body(&self, body: Value) -> Answer {
        answer(self.post("/api/orders").json(&body).send().await.unwrap()).await
    }

    pub async fn lease(&self, worker: &str, wait: f64) -> Answer {
        answer(
            self.get(&format!("/api/orders/lease?worker_id={worker}&wait={wait}"))
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    pub async fn report(&self, task_id: &str, body: Value) -> Answer {
        answer(
            self.post(&format!("/api/orders/{task_id}/report"))
                .json(&body)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    pub async fn renew(&self, task_id: &str, body: Value) -> Answer {
        answer(
            self.post(&format!("/api/orders/{task_id}/renew"))
                .json(&body)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    pub async fn reclaim(&self, task_id: &str, worker: &str) -> Answer {
        answer(
            self.post(&format!("/api/orders/{task_id}/reclaim"))
                .json(&json!({"worker_id": worker}))
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    pub async fn task(&self, task_id: &str) -> Answer {
        answer(
            self.get(&format!("/api/orders/{task_id}"))
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    pub async fn status_of(&self, task_id: &str) -> String {
        let a = self.task(task_id).await;
        a.assert_ok()["status"].as_str().unwrap().to_owned()
    }

    pub async fn list(&self, query: &str) -> Answer {
        answer(
            self.get(&format!("/api/orders{query}"))
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    /// `/health` with the token: the whole answer.
    pub async fn health(&self) -> Answer {
        answer(self.get("/health").send().await.unwrap()).await
    }

    /// `/health` without a token: the status alone.
    pub async fn health_anonymous(&self) -> Answer {
        answer(self.client.get(self.url("/health")).send().await.unwrap()).await
    }

    /// Moves the clock past the lease TTL.
    pub fn expire_leases(&self) {
        self.clock.advance(Duration::from_secs_f64(
            self.settings.lease_ttl_seconds + 1.0,
        ));
    }

    /// One sweep at the clock's now.
    pub async fn sweep(&self) -> Vec<StaleTask> {
        self.sweeper.run_once(self.clock.now()).await.unwrap()
    }

    /// Submits and leases a task to `worker`; returns the grant.
    pub async fn leased(&self, task_id: &str, worker: &str) -> Value {
        self.submit(task_id).await.assert_ok();
        let g = self.lease(worker, 0.0).await;
        let data = g.assert_ok().clone();
        assert_eq!(data["task_id"], task_id);
        data
    }
}

/// Account-query helpers (§11).
impl TestApp {
    pub async fn submit_query(&self, body: Value) -> Answer {
        answer(
            self.post("/api/account/queries")
                .json(&body)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    /// Submits an `order_list` query with this id.
    pub async fn submit_list_query(&self, query_id: &str) -> Answer {
        self.submit_query(json!({"query_id": query_id, "site": "rakuten", "kind": "order_list", "params": {"max_pages": 2}}))
            .await
    }

    pub async fn lease_query(&self, worker: &str, wait: f64) -> Answer {
        answer(
            self.get(&format!(
                "/api/account/queries/lease?worker_id={worker}&wait={wait}"
            ))
            .send()
            .await
            .unwrap(),
        )
        .await
    }

    pub async fn query_result(&self, query_id: &str, body: Value) -> Answer {
        answer(
            self.post(&format!("/api/account/queries/{query_id}/result"))
                .json(&body)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    pub async fn query(&self, query_id: &str) -> Answer {
        answer(
            self.get(&format!("/api/account/queries/{query_id}"))
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    pub async fn query_status(&self, query_id: &str) -> String {
        let a = self.query(query_id).await;
        a.assert_ok()["status"].as_str().unwrap().to_owned()
    }

    /// One account-query sweep at the clock's now.
    pub async fn sweep_queries(&self) -> QuerySweep {
        self.query_sweeper.run_once(self.clock.now()).await.unwrap()
    }

    /// Moves the clock past the query lease TTL.
    pub fn expire_query_leases(&self) {
        self.clock.advance(Duration::from_secs_f64(
            self.settings.query_lease_ttl_seconds + 1.0,
        ));
    }
}

/// The storage engine a test runs on (the store-facing HTTP tests run on both).
#[derive(Debug, Clone, Copy)]
pub enum Engine {
    Sqlite,
    Postgres,
}

impl Engine {
    /// A fresh app on this engine (PostgreSQL: a fresh schema).
    pub async fn spawn(self, adjust: impl FnOnce(&mut Settings)) -> TestApp {
        match self {
            Engine::Sqlite => spawn_app_with(adjust).await,
            Engine::Postgres => {
                let db = Arc::new(PgSchema::new().await);
                spawn_pg_app(db, ManualClock::at_fixed_date(), adjust).await
            }
        }
    }
}

/// Runs each named `async fn(Engine)` once per engine: `<module>::sqlite::<name>` and
/// `<module>::postgres::<name>`.
#[macro_export]
macro_rules! on_both_engines {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::helpers::Engine::Sqlite).await
                }
            )*
        }
        mod postgres {
            $(
                #[test_util::lane(postgres)]
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::helpers::Engine::Postgres).await
                }
            )*
        }
    };
}

impl TestApp {
    /// Runs `sql` on this app's database from a session of its own (a manual edit, a disk
    /// fault); returns the rows affected.
    pub async fn raw_sql(&self, sql: &'static str) -> u64 {
        use sqlx::Connection;
        match &self._db {
            Some(db) => {
                let mut c = sqlx::PgConnection::connect(&db.url).await.expect("connect");
                let n = sqlx::query(sql).execute(&mut c).await.expect(sql);
                let _ = c.close().await;
                n.rows_affected()
            }
            None => {
                let url = format!("sqlite://{}", self.settings.db_path.display());
                let mut c = sqlx::SqliteConnection::connect(&url)
                    .await
                    .expect("connect");
                let n = sqlx::query(sql).execute(&mut c).await.expect(sql);
                let _ = c.close().await;
                n.rows_affected()
            }
        }
    }
}

/// Operator helpers.
impl TestApp {
    pub async fn alerts(&self, query: &str) -> Answer {
        answer(
            self.get(&format!("/api/alerts{query}"))
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    pub async fn resolve(&self, task_id: &str, body: Value) -> Answer {
        answer(
            self.post(&format!("/api/orders/{task_id}/resolve"))
                .json(&body)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    pub async fn cancel(&self, task_id: &str, reason: &str) -> Answer {
        answer(
            self.post(&format!("/api/orders/{task_id}/cancel"))
                .json(&json!({ "reason": reason }))
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    /// One alert-job run at the clock's now.
    pub async fn run_alerts(&self) -> AlertRun {
        self.alert_job.run_once(self.clock.now()).await.unwrap()
    }

    /// One webhook delivery run at the clock's now.
    pub async fn deliver(&self) -> DeliveryRun {
        self.webhooks.run_once(self.clock.now()).await.unwrap()
    }

    /// Submits, leases to `worker`, expires and sweeps: the task is stale.
    pub async fn stale(&self, task_id: &str, worker: &str) {
        self.leased(task_id, worker).await;
        self.expire_leases();
        let staled = self.sweep().await;
        assert!(staled.iter().any(|t| t.task_id.as_str() == task_id));
    }
}
