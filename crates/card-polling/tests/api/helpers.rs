//! `spawn_app()` and typed request helpers. Compiled once per engine (see `main.rs`): `super` is
//! the engine module, which names its store type and how a test gets a fresh database.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use card_polling::Application;
use card_polling::executor::{Executor, RunReport};
use card_polling::hints::Hints;
use card_polling::jobs::expiry::ExpiryJob;
use card_polling::jobs::retention::RetentionJob;
use card_polling::jobs::schedule_config::ScheduleConfigJob;
use card_polling::scheduler::{CycleReport, Scheduler};
use card_polling::settings::{HintChannelSetting, Secret, Settings};
use card_polling::store::Store;
use card_polling::upstream::{SimCarrier, SimConfig};
use rakuten_types::{Clock, ManualClock};

pub const ADMIN: &str = "admin-token-0123456789";
pub const PLATFORM: &str = "tok-platform-0000000001";
pub const PLATFORM_NO_DATA: &str = "tok-platform-nodata-001";
pub const AGENT_A: &str = "tok-agent-a-00000000001";
pub const AGENT_A1: &str = "tok-agent-a1-0000000001";
pub const AGENT_B: &str = "tok-agent-b-00000000001";
pub const ENTERPRISE: &str = "tok-enterprise-00000001";

pub struct TestApp {
    pub base: String,
    pub client: reqwest::Client,
    pub clock: ManualClock,
    pub sim: Arc<SimCarrier>,
    pub store: Arc<dyn Store>,
    /// The engine's store (raw SQL of fixtures and invariant checks goes through its pool).
    pub db: super::EngineStore,
    pub executor: Executor,
    pub expiry: ExpiryJob,
    pub retention: RetentionJob,
    pub schedule_config: ScheduleConfigJob,
    pub scheduler: Scheduler,
    pub hints: Hints,
    pub settings: Settings,
    shutdown: CancellationToken,
    _dir: tempfile::TempDir,
    _schema: Option<crate::PgSchema>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

pub async fn spawn_app() -> TestApp {
    spawn_with(Backend::Memory, |_| {}).await
}

/// Where the hint and manual lanes live in a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// In-process.
    Memory,
    /// The machine's Redis (`REDIS_URL_TEST`, default `redis://127.0.0.1:6379/`).
    Redis,
}

pub fn redis_url() -> String {
    std::env::var("REDIS_URL_TEST").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into())
}

/// A test app on `backend` with settings changed by `f`. A Redis backend gets a key prefix of
/// its own; when Redis does not answer the test fails here, loudly.
pub async fn spawn_with(backend: Backend, f: impl FnOnce(&mut Settings)) -> TestApp {
    spawn_with_sim(backend, SimConfig::default(), f).await
}

pub async fn spawn_with_sim(
    backend: Backend,
    sim_config: SimConfig,
    f: impl FnOnce(&mut Settings),
) -> TestApp {
    let dir = tempfile::tempdir().expect("temp dir");
    let db_path = dir.path().join("card-polling.db");
    let mut settings = Settings::for_tests(db_path, ADMIN);
    let schema = super::fresh_database(&mut settings).await;
    if backend == Backend::Redis {
        settings.hint_channel = HintChannelSetting::Redis(Secret::new(redis_url()));
        settings.hint_prefix = format!("card-polling-test:{}:", uuid::Uuid::now_v7());
    }
    f(&mut settings);
    let clock = ManualClock::at_fixed_date();
    let sim = Arc::new(SimCarrier::new(sim_config));
    sim.record_calls();
    let app = match Application::build(settings.clone(), Arc::new(clock.clone()), sim.clone()).await
    {
        Ok(app) => app,
        Err(e) if backend == Backend::Redis => panic!(
            "REDIS IS NOT ANSWERING at {} ({e:#}): the Redis hint-channel tests need the \
             machine's Redis server (start it, or point REDIS_URL_TEST at one)",
            redis_url()
        ),
        Err(e) => panic!("build app: {e:#}"),
    };
    let base = format!("http://127.0.0.1:{}", app.port());
    let store = app.state().store.clone();
    let db = super::engine_store(&app);
    let executor = app.executor().clone();
    let expiry = app.expiry().clone();
    let retention = app.retention().clone();
    let schedule_config = app.schedule_config().clone();
    let scheduler = app.scheduler().clone();
    let hints = app.state().hints.clone();
    let shutdown = CancellationToken::new();
    tokio::spawn(app.serve_http(shutdown.clone()));
    TestApp {
        base,
        client: reqwest::Client::new(),
        clock,
        sim,
        store,
        db,
        executor,
        expiry,
        retention,
        schedule_config,
        scheduler,
        hints,
        settings,
        shutdown,
        _dir: dir,
        _schema: schema,
    }
}

/// A test app loaded with the standard world (see [`TestApp::seed`]).
pub async fn spawn_seeded() -> TestApp {
    let app = spawn_app().await;
    app.seed().await;
    app
}

impl TestApp {
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("body");
        let v = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
        (status, v)
    }

    pub async fn raw(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
    ) -> (u16, String) {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.expect("request");
        (resp.status().as_u16(), resp.text().await.expect("body"))
    }

    pub async fn post(&self, path: &str, token: &str, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, Some(token), Some(body))
            .await
    }

    pub async fn put(&self, path: &str, token: &str, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::PUT, path, Some(token), Some(body))
            .await
    }

    pub async fn get(&self, path: &str, token: &str) -> (u16, Value) {
        self.send(reqwest::Method::GET, path, Some(token), None)
            .await
    }

    /// POST expecting success; returns `data`.
    pub async fn post_ok(&self, path: &str, token: &str, body: Value) -> Value {
        let (s, v) = self.post(path, token, body).await;
        assert_eq!(s, 200, "{path}: {v}");
        assert_eq!(v["success"], true, "{v}");
        v["data"].clone()
    }

    /// The standard world:
    /// shops `A` ⊃ `A1` ⊃ `A11`, `B`; accounts platform, platform without card data permission,
    /// agent of A, agent of A1, agent of B, enterprise; standalone cards `CA1` (A), `CA11` (A11),
    /// `CB1` (B); device `DEV1` (A1) with active cards `D1C1`, `D1C2`, `D1C3` and an inactive
    /// binding to `D1C4`.
    pub async fn seed(&self) {
        self.seed_as(ADMIN).await;
    }

    /// [`Self::seed`] by the bootstrap admin holding `admin_token`.
    pub async fn seed_as(&self, admin_token: &str) {
        let body = json!({
            "shops": [
                {"id": "A11", "parent_id": "A1", "name": "A11"},
                {"id": "A", "name": "Agent A"},
                {"id": "A1", "parent_id": "A", "name": "A1"},
                {"id": "B", "name": "Agent B"}
            ],
            "accounts": [
                {"id": "plat", "role": "platform", "token": PLATFORM},
                {"id": "plat-nodata", "role": "platform", "token": PLATFORM_NO_DATA, "perm_card_data": false},
                {"id": "agent-a", "role": "agent", "shop_id": "A", "token": AGENT_A},
                {"id": "agent-a1", "role": "agent", "shop_id": "A1", "token": AGENT_A1},
                {"id": "agent-b", "role": "agent", "shop_id": "B", "token": AGENT_B},
                {"id": "ent", "role": "enterprise", "shop_id": "A", "token": ENTERPRISE}
            ],
            "cards": [
                {"iccid": "CA1", "shop_id": "A"},
                {"iccid": "CA11", "shop_id": "A11"},
                {"iccid": "CB1", "shop_id": "B"},
                {"iccid": "D1C1", "shop_id": "A1"},
                {"iccid": "D1C2", "shop_id": "A1"},
                {"iccid": "D1C3", "shop_id": "A1"},
                {"iccid": "D1C4", "shop_id": "A1"}
            ],
            "devices": [{"device_no": "DEV1", "shop_id": "A1"}],
            "bindings": [
                {"device_no": "DEV1", "iccid": "D1C1"},
                {"device_no": "DEV1", "iccid": "D1C2"},
                {"device_no": "DEV1", "iccid": "D1C3"},
                {"device_no": "DEV1", "iccid": "D1C4", "active": false}
            ]
        });
        self.post_ok("/api/admin/import", admin_token, body).await;
    }

    /// Creates an order and returns its id.
    pub async fn order(&self, asset_type: &str, asset_id: &str, kind: &str) -> String {
        let d = self
            .post_ok(
                "/api/orders",
                PLATFORM,
                json!({"asset_type": asset_type, "asset_id": asset_id, "kind": kind}),
            )
            .await;
        d["id"].as_str().expect("order id").to_owned()
    }

    /// Sends a payment callback; returns `data`.
    pub async fn pay(&self, order_id: &str, payment_id: &str, status: &str) -> Value {
        self.post_ok(
            "/api/payments/callback",
            PLATFORM,
            json!({"payment_id": payment_id, "order_id": order_id, "status": status}),
        )
        .await
    }

    /// Creates and pays an order; returns the callback's `data`.
    pub async fn buy(&self, asset_type: &str, asset_id: &str, kind: &str) -> Value {
        let o = self.order(asset_type, asset_id, kind).await;
        self.pay(&o, &format!("pay-{o}"), "paid").await
    }

    /// Manual enqueue; returns the HTTP status and envelope.
    pub async fn enqueue(&self, token: &str, body: Value) -> (u16, Value) {
        self.post("/api/priority-items", token, body).await
    }

    /// Lists items with a query string (as platform unless told).
    pub async fn list_as(&self, token: &str, query: &str) -> Vec<Value> {
        let (s, v) = self
            .get(&format!("/api/priority-items?{query}"), token)
            .await;
        assert_eq!(s, 200, "{v}");
        v["data"]["items"].as_array().expect("items").clone()
    }

    /// Lists items as platform.
    pub async fn list(&self, query: &str) -> Vec<Value> {
        self.list_as(PLATFORM, query).await
    }

    /// Item detail as platform.
    pub async fn detail(&self, id: i64) -> Value {
        let (s, v) = self
            .get(&format!("/api/priority-items/{id}"), PLATFORM)
            .await;
        assert_eq!(s, 200, "{v}");
        v["data"].clone()
    }

    /// The one item of a card and task type (newest).
    pub async fn item_of(&self, iccid: &str, task_type: &str) -> Value {
        let items = self
            .list(&format!("iccid={iccid}&task_type={task_type}&limit=1"))
            .await;
        items.into_iter().next().expect("an item")
    }

    /// Count of active items.
    pub async fn active_count(&self) -> usize {
        self.list("status=pending&limit=200").await.len()
            + self.list("status=running&limit=200").await.len()
    }

    /// One executor round at the clock's now.
    pub async fn run_executor(&self) -> RunReport {
        self.executor
            .run_once(self.clock.now())
            .await
            .expect("executor round")
    }

    /// One scheduling cycle at the clock's now (fills the execution queues; runs nothing).
    pub async fn cycle(&self) -> CycleReport {
        self.scheduler.run_once(self.clock.now()).await
    }

    /// Runs every queued entry of the executor pool and writes the ordinary outcomes.
    pub async fn drain(&self) {
        self.scheduler.pool().drain().await.expect("drain");
    }

    /// A cycle, then everything it queued.
    pub async fn cycle_and_drain(&self) -> CycleReport {
        let r = self.cycle().await;
        self.drain().await;
        r
    }

    /// Moves the clock.
    pub fn advance(&self, secs: u64) {
        self.clock.advance(Duration::from_secs(secs));
    }

    /// Audit kinds of an item, in order.
    pub async fn audit_kinds(&self, id: i64) -> Vec<String> {
        self.detail(id).await["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|e| e["kind"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

/// A console session cookie for `token` (sign-in over plain HTTP, the redirect not followed).
pub async fn console_cookie(app: &TestApp, token: &str) -> String {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let resp = client
        .post(format!("{}/console/sign-in", app.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={token}"))
        .send()
        .await
        .unwrap();
    let set = resp
        .headers()
        .get("set-cookie")
        .unwrap_or_else(|| panic!("no session cookie: {}", resp.status()))
        .to_str()
        .unwrap();
    set.split(';').next().unwrap().to_owned()
}

pub fn id_of(v: &Value) -> i64 {
    v["id"]
        .as_i64()
        .or_else(|| v["item_id"].as_i64())
        .expect("id")
}

impl TestApp {
    /// Checks the queue's invariants over every row: attempts within the limit, every item's
    /// first audit fact is its creation, every terminal item has its terminal fact, and no
    /// terminal item holds a claim.
    pub async fn assert_invariants(&self) {
        assert_invariants_in(&self.db).await;
    }
}

/// [`TestApp::assert_invariants`] over the database of `db` (several instances share one).
pub async fn assert_invariants_in(db: &super::EngineStore) {
    let pool = db.pool();
    let bad_attempts: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM priority_items WHERE attempts > max_attempts OR max_attempts <> 3",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(bad_attempts, 0, "attempts beyond the limit");
    let bad_first: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM priority_items i WHERE (SELECT e.kind FROM priority_item_events e \
         WHERE e.item_id = i.id ORDER BY e.id LIMIT 1) NOT IN ('enqueue', 'retrigger')",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(bad_first, 0, "an item whose first fact is not its creation");
    let unaudited_terminal: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM priority_items i WHERE i.status NOT IN ('pending', 'running') AND NOT EXISTS \
         (SELECT 1 FROM priority_item_events e WHERE e.item_id = i.id AND e.kind = CASE i.status \
            WHEN 'completed' THEN 'complete' WHEN 'failed' THEN 'fail_dequeue' \
            WHEN 'closed' THEN 'close' WHEN 'expired' THEN 'expire' END)",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(
        unaudited_terminal, 0,
        "a terminal item without its terminal fact"
    );
    let dup_active: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT iccid, task_type FROM priority_items \
         WHERE status IN ('pending', 'running') GROUP BY iccid, task_type HAVING count(*) > 1) AS d",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(dup_active, 0, "two active items for one card and task type");
}

/// Closed and expired items, each with the upstream calls made for it so far (`calls_for_item`),
/// added to `seen` the first time they are seen terminal: later calls for them are a violation
/// ([`assert_soak_invariants`]).
pub async fn snapshot_terminal(
    db: &super::EngineStore,
    calls_for_item: impl Fn(i64) -> usize,
    seen: &mut std::collections::HashMap<i64, usize>,
) {
    let ids: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM priority_items WHERE status IN ('closed', 'expired')")
            .fetch_all(db.pool())
            .await
            .unwrap();
    for id in ids {
        seen.entry(id).or_insert_with(|| calls_for_item(id));
    }
}

/// Every invariant the soak checks after its run (shared by the soak and the multi-instance
/// test): [`assert_invariants_in`]; nothing left running; at most 3 attempts and exactly one
/// upstream call per counted attempt (`calls`: every priority call made, by item); no call for
/// an item after it was seen closed or expired (`terminal_calls`, from [`snapshot_terminal`]);
/// every terminal status reached (at least `min_items` items); every transition audited; every
/// accepted ordinary manual trigger ran.
pub async fn assert_soak_invariants(
    db: &super::EngineStore,
    calls: &std::collections::HashMap<i64, i64>,
    terminal_calls: &std::collections::HashMap<i64, usize>,
    min_items: usize,
) -> std::collections::HashMap<String, usize> {
    use std::collections::HashMap;
    let pool = db.pool();
    assert_invariants_in(db).await;
    let running: i64 =
        sqlx::query_scalar("SELECT count(*) FROM priority_items WHERE status = 'running'")
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(
        running, 0,
        "every item terminal or waiting after the last drain"
    );
    let rows: Vec<(i64, String, i64, i64)> =
        sqlx::query_as("SELECT id, status, attempts, trigger_count FROM priority_items")
            .fetch_all(pool)
            .await
            .unwrap();
    assert!(
        rows.len() > min_items,
        "the run made items: {} (expected over {min_items})",
        rows.len()
    );
    let mut by_status: HashMap<String, usize> = HashMap::new();
    for (id, status, attempts, _) in &rows {
        *by_status.entry(status.clone()).or_default() += 1;
        assert!(*attempts <= 3, "item {id}: {attempts} attempts");
        assert_eq!(
            calls.get(id).copied().unwrap_or(0),
            *attempts,
            "item {id}: upstream calls and counted attempts differ"
        );
    }
    for (id, at_terminal) in terminal_calls {
        assert_eq!(
            calls.get(id).copied().unwrap_or(0) as usize,
            *at_terminal,
            "an upstream call for closed/expired item {id}"
        );
    }
    for s in ["completed", "failed", "closed", "expired"] {
        assert!(
            by_status.get(s).copied().unwrap_or(0) > 0,
            "no {s} item: {by_status:?}"
        );
    }
    // Every transition audited.
    let bad: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM priority_items i WHERE \
           (SELECT count(*) FROM priority_item_events e WHERE e.item_id = i.id AND e.kind = 'claim') < i.attempts \
        OR (SELECT count(*) FROM priority_item_events e WHERE e.item_id = i.id AND e.kind = 'retry') <> \
           (SELECT count(*) FROM priority_item_events e WHERE e.item_id = i.id AND e.kind = 'failure' AND e.result = 'recoverable') \
        OR (SELECT count(*) FROM priority_item_events e WHERE e.item_id = i.id AND e.kind IN ('enqueue', 'retrigger')) <> 1 \
        OR (SELECT count(*) FROM priority_item_events e WHERE e.item_id = i.id AND e.kind = 'merge' AND e.result = 'merged') \
           <> i.trigger_count - 1 \
        OR (i.status = 'completed' AND (SELECT count(*) FROM priority_item_events e WHERE e.item_id = i.id AND e.kind = 'complete') <> 1)",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(
        bad, 0,
        "items whose audit facts do not match their transitions"
    );
    let queued: i64 =
        sqlx::query_scalar("SELECT count(*) FROM manual_triggers WHERE status = 'queued'")
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(queued, 0, "every accepted manual trigger ran");
    by_status
}

/// `name` from the environment as a count, `default` when unset or not a number (the soak's and
/// the multi-instance run's size knobs).
pub fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The ICCID of fixture card `i` in the random runs: `89` and 18 digits.
pub fn iccid(i: usize) -> String {
    format!("89{i:018}")
}

/// A random asset of the random runs' fixtures: device `DEV{n}` one time in five, otherwise card
/// [`iccid`]`(n)`.
pub fn random_asset(
    rng: &mut impl rand::Rng,
    cards: usize,
    devices: usize,
) -> card_polling::domain::asset::AssetRef {
    use card_polling::domain::asset::{AssetRef, AssetType};
    if rng.random_bool(0.2) {
        AssetRef {
            asset_type: AssetType::Device,
            asset_id: format!("DEV{}", rng.random_range(0..devices)),
        }
    } else {
        AssetRef {
            asset_type: AssetType::Card,
            asset_id: iccid(rng.random_range(0..cards)),
        }
    }
}

/// Panics unless `e` is a refusal a random enqueue may meet: the asset has no card with an active
/// binding, or it is unknown.
pub fn assert_expected_refusal(e: &dyn std::fmt::Display) {
    let e = e.to_string();
    assert!(
        e.contains("no card with an active binding") || e.contains("not found"),
        "{e}"
    );
}
