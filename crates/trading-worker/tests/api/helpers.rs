//! The test harness: the real gateway (ManualClock, temp SQLite) behind a recording proxy, the
//! real shop-sim, and a worker built in-process (or the real binary, for crash tests).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use order_gateway::jobs::query_sweeper::QuerySweeper;
use order_gateway::jobs::sweeper::Sweeper;
use rakuten_types::{Clock, ManualClock, SystemClock};
use serde_json::{Value, json};
use shop_sim::{ShopConfig, SpawnedShop};
use tokio_util::sync::CancellationToken;
use trading_worker::settings::{Secret, SiteKind};
use trading_worker::{Settings, Worker};

pub const TOKEN: &str = "worker-test-token-0123456789";
/// A worker-role token (`RAKUTEN_WORKER_TOKENS`, name `pc`) the gateway also accepts; `TOKEN` is
/// its operator token.
pub const WORKER_ROLE_TOKEN: &str = "worker-role-token-0123456789";
pub const TEA_URL: &str = "https://item.rakuten.co.jp/simshop/sample-tea/";
pub const CAMERA_URL: &str = "https://item.rakuten.co.jp/simshop/sample-camera/";

/// One report as the proxy saw it arrive, with what was on disk at that moment.
#[derive(Debug, Clone)]
pub struct SeenReport {
    pub body: Value,
    /// `.meta.json` existed when the report arrived.
    pub meta_exists: bool,
    /// every file the meta names (`html`, `png`) existed.
    pub files_exist: bool,
}

/// A proxy in front of the gateway: records reports (checking evidence on disk first), can play
/// "gateway down" (503), and can expire the lease on the real gateway right before a renewal.
pub struct ProxyState {
    pub upstream: String,
    pub http: reqwest::Client,
    pub evidence_dir: PathBuf,
    pub down: AtomicBool,
    pub refused: AtomicUsize,
    pub expire_before_renew: AtomicBool,
    pub clock: ManualClock,
    pub sweeper: Sweeper,
    pub ttl: Duration,
    pub reports: Mutex<Vec<SeenReport>>,
    pub renews: AtomicUsize,
    /// When a report of this state arrives: answer 503 and stay down for the duration.
    pub down_on_report: Mutex<Option<(String, Duration)>>,
    /// When a report of this state arrives: expire the lease on the gateway first.
    pub expire_before_report: Mutex<Option<String>>,
    /// Account-query results as they arrived (`{query_id, body}`).
    pub query_results: Mutex<Vec<Value>>,
    /// The gateway's account-query sweeper.
    pub query_sweeper: QuerySweeper,
    /// The gateway's query lease TTL.
    pub query_lease_ttl: Duration,
    /// When a query result arrives: expire the query lease on the gateway (and sweep) first.
    pub expire_before_result: AtomicBool,
    /// Forward this many query results, then answer 503 anyway (the acknowledgement is lost).
    pub lose_result_answers: AtomicUsize,
    /// Answer this many `GET /api/orders/{id}` (task detail) with 503 before forwarding again.
    pub fail_task_reads: AtomicUsize,
    /// `GET /api/orders/{id}` answered 503 by `fail_task_reads`.
    pub failed_task_reads: AtomicUsize,
}

async fn proxy_handler(State(st): State<Arc<ProxyState>>, req: Request) -> Response {
    if st.down.load(Ordering::SeqCst) {
        st.refused.fetch_add(1, Ordering::SeqCst);
        return (StatusCode::SERVICE_UNAVAILABLE, "gateway down (test)").into_response();
    }
    let method = req.method().clone();
    let uri = req.uri().clone();
    let headers: HeaderMap = req.headers().clone();
    let body: Bytes = axum::body::to_bytes(req.into_body(), 8 << 20)
        .await
        .unwrap_or_default();
    let path = uri.path().to_owned();
    if method == Method::GET
        && path.starts_with("/api/orders/")
        && path != "/api/orders/lease"
        && st
            .fail_task_reads
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    {
        st.failed_task_reads.fetch_add(1, Ordering::SeqCst);
        return (StatusCode::SERVICE_UNAVAILABLE, "gateway restarting (test)").into_response();
    }
    if method == Method::POST && path.ends_with("/renew") {
        st.renews.fetch_add(1, Ordering::SeqCst);
        if st.expire_before_renew.swap(false, Ordering::SeqCst) {
            st.clock.advance(st.ttl + Duration::from_secs(1));
            st.sweeper.run_once(st.clock.now()).await.expect("sweep");
        }
    }
    let mut lose_answer = false;
    if method == Method::POST
        && path.starts_with("/api/account/queries/")
        && path.ends_with("/result")
    {
        let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let id = path
            .trim_start_matches("/api/account/queries/")
            .trim_end_matches("/result")
            .to_owned();
        st.query_results
            .lock()
            .unwrap()
            .push(json!({"query_id": id, "body": v}));
        if st.expire_before_result.swap(false, Ordering::SeqCst) {
            st.clock
                .advance(st.query_lease_ttl + Duration::from_secs(1));
            st.query_sweeper
                .run_once(st.clock.now())
                .await
                .expect("query sweep");
        }
        lose_answer = st
            .lose_result_answers
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
    }
    if method == Method::POST && path.ends_with("/report") {
        let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let (meta_exists, files_exist) = match v["evidence_ref"].as_str() {
            Some(r) => check_evidence(&st.evidence_dir, r),
            None => (false, false),
        };
        let state = v["state"].as_str().unwrap_or("").to_owned();
        st.reports.lock().unwrap().push(SeenReport {
            body: v,
            meta_exists,
            files_exist,
        });
        let expire = {
            let mut g = st.expire_before_report.lock().unwrap();
            if g.as_deref() == Some(state.as_str()) {
                g.take().is_some()
            } else {
                false
            }
        };
        if expire {
            st.clock.advance(st.ttl + Duration::from_secs(1));
            st.sweeper.run_once(st.clock.now()).await.expect("sweep");
        }
        let down_for = {
            let mut g = st.down_on_report.lock().unwrap();
            match g.as_ref() {
                Some((s, d)) if *s == state => {
                    let d = *d;
                    *g = None;
                    Some(d)
                }
                _ => None,
            }
        };
        if let Some(d) = down_for {
            st.down.store(true, Ordering::SeqCst);
            st.refused.fetch_add(1, Ordering::SeqCst);
            let st2 = st.clone();
            tokio::spawn(async move {
                // A real delay, the scenario: the gateway stays down for `d`, an outage the
                // worker's retries must outlast.
                tokio::time::sleep(d).await;
                st2.down.store(false, Ordering::SeqCst);
            });
            return (StatusCode::SERVICE_UNAVAILABLE, "gateway down (test)").into_response();
        }
    }
    let url = format!(
        "{}{}",
        st.upstream,
        uri.path_and_query().map(|p| p.as_str()).unwrap_or("/")
    );
    let mut r = st.http.request(method, url).body(body);
    for (k, v) in &headers {
        if k != "host" && k != "content-length" {
            r = r.header(k, v);
        }
    }
    match r.send().await {
        Ok(_) if lose_answer => {
            (StatusCode::SERVICE_UNAVAILABLE, "answer lost (test)").into_response()
        }
        Ok(resp) => {
            let status = StatusCode::from_u16(resp.status().as_u16()).unwrap();
            let bytes = resp.bytes().await.unwrap_or_default();
            (status, [("content-type", "application/json")], bytes).into_response()
        }
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}

/// Whether `{ref}.meta.json` exists and every file it names exists.
pub fn check_evidence(dir: &Path, evidence_ref: &str) -> (bool, bool) {
    let meta = dir.join(format!("{evidence_ref}.meta.json"));
    let Ok(text) = std::fs::read_to_string(&meta) else {
        return (false, false);
    };
    let m: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let task_dir = meta.parent().unwrap().to_path_buf();
    let files_ok = ["html", "png"].iter().all(|k| match m[*k].as_str() {
        Some(f) => task_dir.join(f).exists(),
        None => true,
    });
    (true, files_ok)
}

pub struct Harness {
    pub gw_address: String,
    pub proxy_address: String,
    pub proxy: Arc<ProxyState>,
    pub shop: SpawnedShop,
    pub client: reqwest::Client,
    pub dir: tempfile::TempDir,
    pub evidence_dir: PathBuf,
    pub db_path: PathBuf,
    pub submission_log: PathBuf,
}

impl Harness {
    pub async fn new() -> Self {
        Self::with_shop(ShopConfig::default()).await
    }

    pub async fn with_shop(mut shop_cfg: ShopConfig) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut gs = order_gateway::Settings::for_tests(dir.path().join("gw.db"), TOKEN);
        gs.sweep_interval_seconds = 3600.0;
        gs.lease_max_wait_seconds = 5.0;
        gs.worker_tokens = Some(
            format!("pc:{WORKER_ROLE_TOKEN}")
                .parse()
                .expect("worker tokens"),
        );
        let ttl = Duration::from_secs_f64(gs.lease_ttl_seconds);
        let query_lease_ttl = Duration::from_secs_f64(gs.query_lease_ttl_seconds);
        let clock = ManualClock::new(SystemClock.now());
        let app = order_gateway::Application::build(gs, Arc::new(clock.clone()))
            .await
            .expect("gateway");
        let gw_address = format!("http://127.0.0.1:{}", app.port());
        let sweeper = app.sweeper();
        let query_sweeper = app.query_sweeper();
        tokio::spawn(app.run_until_stopped(std::future::pending()));

        let submission_log = dir.path().join("submissions.jsonl");
        shop_cfg.submission_log = Some(submission_log.clone());
        let shop = shop_sim::spawn(shop_cfg).await.expect("shop");

        let evidence_dir = dir.path().join("evidence");
        let proxy = Arc::new(ProxyState {
            upstream: gw_address.clone(),
            http: reqwest::Client::new(),
            evidence_dir: evidence_dir.clone(),
            down: AtomicBool::new(false),
            refused: AtomicUsize::new(0),
            expire_before_renew: AtomicBool::new(false),
            clock: clock.clone(),
            sweeper,
            ttl,
            reports: Mutex::new(Vec::new()),
            renews: AtomicUsize::new(0),
            down_on_report: Mutex::new(None),
            expire_before_report: Mutex::new(None),
            query_results: Mutex::new(Vec::new()),
            query_sweeper,
            query_lease_ttl,
            expire_before_result: AtomicBool::new(false),
            lose_result_answers: AtomicUsize::new(0),
            fail_task_reads: AtomicUsize::new(0),
            failed_task_reads: AtomicUsize::new(0),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy_address = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new()
            .fallback(proxy_handler)
            .with_state(proxy.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Harness {
            gw_address,
            proxy_address,
            proxy,
            shop,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
            db_path: dir.path().join("trading.db"),
            evidence_dir,
            submission_log,
            dir,
        }
    }

    /// Worker settings: via the proxy, the sim site, short waits.
    pub fn settings(&self) -> Settings {
        Settings {
            gateway_url: self.proxy_address.clone(),
            worker_id: Some("test-worker".into()),
            db_path: self.db_path.clone(),
            evidence_dir: self.evidence_dir.clone(),
            api_token: Secret::new(TOKEN),
            site: SiteKind::Sim,
            site_base_url: self.shop.base_url.clone(),
            lease_wait_seconds: 1,
            retry_max_seconds: 0.5,
            http_timeout_seconds: 10.0,
            ..Settings::default()
        }
    }

    /// The real `trading-worker run` process on this harness (gateway direct, sim site, short
    /// waits), clean environment, as `worker_id`; stdio is left to the caller.
    pub fn worker_command(&self, worker_id: &str) -> std::process::Command {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_trading-worker"));
        c.arg("run")
            .env_clear()
            .env("RAKUTEN_ORDER_GATEWAY_URL", &self.gw_address)
            .env("RAKUTEN_API_TOKEN", TOKEN)
            .env("RAKUTEN_WORKER_ID", worker_id)
            .env("RAKUTEN_TRADING_DB_PATH", &self.db_path)
            .env("RAKUTEN_EVIDENCE_DIR", &self.evidence_dir)
            .env("RAKUTEN_SITE", "sim")
            .env("RAKUTEN_SITE_BASE_URL", &self.shop.base_url)
            .env("RAKUTEN_LEASE_WAIT_SECONDS", "1")
            .env("RAKUTEN_GATEWAY_RETRY_MAX_SECONDS", "0.5")
            .env("RAKUTEN_MONITOR_INTERVAL_SECONDS", "3600")
            .env("RUST_LOG", "warn")
            .current_dir(self.dir.path());
        c
    }

    pub async fn worker(&self) -> Worker {
        self.worker_with(|_| {}).await
    }

    pub async fn worker_with(&self, adjust: impl FnOnce(&mut Settings)) -> Worker {
        self.worker_clocked(Arc::new(SystemClock), adjust).await
    }

    pub async fn worker_clocked(
        &self,
        clock: Arc<dyn Clock>,
        adjust: impl FnOnce(&mut Settings),
    ) -> Worker {
        let mut s = self.settings();
        adjust(&mut s);
        Worker::build(
            s.validate().expect("settings"),
            clock,
            CancellationToken::new(),
        )
        .await
        .expect("worker")
    }

    pub async fn submit(&self, task_id: &str, intent: Value) {
        let v: Value = self
            .client
            .post(format!("{}/api/orders", self.gw_address))
            .bearer_auth(TOKEN)
            .json(&json!({"task_id": task_id, "site": "rakuten", "intent": intent}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(v["code"], 0, "{v}");
    }

    pub async fn submit_tea(&self, task_id: &str) {
        self.submit(task_id, json!({"item_url": TEA_URL, "quantity": 1}))
            .await;
    }

    /// `GET /api/orders/{id}` data.
    pub async fn task(&self, task_id: &str) -> Value {
        let v: Value = self
            .client
            .get(format!("{}/api/orders/{task_id}", self.gw_address))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["data"].clone()
    }

    pub async fn reclaim(&self, task_id: &str, worker: &str) -> Value {
        self.client
            .post(format!("{}/api/orders/{task_id}/reclaim", self.gw_address))
            .json(&serde_json::json!({"worker_id": worker}))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    pub fn submissions(&self) -> usize {
        self.shop.submissions().len()
    }

    /// Lines of the shop's JSONL submission log.
    pub fn logged_submissions(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.submission_log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    pub async fn set_faults(&self, faults: Value) {
        self.client
            .post(format!("{}/admin/faults", self.shop.base_url))
            .json(&faults)
            .send()
            .await
            .unwrap();
    }

    pub fn reports(&self) -> Vec<SeenReport> {
        self.proxy.reports.lock().unwrap().clone()
    }

    /// States in the gateway's history, oldest first.
    pub async fn history_states(&self, task_id: &str) -> Vec<String> {
        self.task(task_id).await["history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["state"].as_str().unwrap().to_owned())
            .collect()
    }
}

/// Runs `run_once` until the task is handled (lease granted and worked on).
pub async fn run_until_handled(w: &Worker) {
    let lp = w.order_loop();
    for _ in 0..10 {
        if let trading_worker::order_loop::Tick::Handled(_) = lp.run_once().await.expect("lease") {
            return;
        }
    }
    panic!("no task handed out");
}

/// Account-query helpers (§11).
impl Harness {
    /// Submits an account query directly to the gateway; asserts it was created.
    pub async fn submit_query(&self, query_id: &str, kind: &str, params: Value) {
        let v: Value = self
            .client
            .post(format!("{}/api/account/queries", self.gw_address))
            .bearer_auth(TOKEN)
            .json(&json!({"query_id": query_id, "site": "rakuten", "kind": kind, "params": params}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(v["data"]["created"], true, "{v}");
    }

    /// `GET /api/account/queries/{id}` data.
    pub async fn query(&self, query_id: &str) -> Value {
        let v: Value = self
            .client
            .get(format!(
                "{}/api/account/queries/{query_id}",
                self.gw_address
            ))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(v["code"], 0, "{v}");
        v["data"].clone()
    }

    /// Seeds past orders in the shop: one per date, newest last.
    pub async fn seed_orders(&self, dates: &[String]) -> Vec<String> {
        let orders: Vec<Value> = dates.iter().map(|d| json!({"order_date": d})).collect();
        let v: Value = self
            .client
            .post(format!("{}/admin/orders/seed", self.shop.base_url))
            .json(&json!({"orders": orders}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["order_numbers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_owned())
            .collect()
    }

    /// Result calls the proxy saw for `query_id`.
    pub fn result_calls(&self, query_id: &str) -> Vec<Value> {
        self.proxy
            .query_results
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r["query_id"] == query_id)
            .map(|r| r["body"].clone())
            .collect()
    }
}
