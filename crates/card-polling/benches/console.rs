//! Operator console benchmark of card-polling (pages stay fast at volume): a plain
//! binary (`harness = false`), modelled on order-gateway's `benches/console.rs`.
//!
//! `cargo bench -p card-polling --bench console` (release) on a fresh SQLite file, or
//! `cargo bench -p card-polling --bench console -- --backend postgres` (also
//! `BENCH_BACKEND=postgres`) on a schema of its own in `DATABASE_URL_TEST` (default
//! `postgres://postgres@127.0.0.1:5432/test`), dropped at the end. `BENCH_ITEMS=N` (default
//! 100,000), `BENCH_ROUNDS=N` (default 20).
//!
//! Imports 100 shops (10 agents with 9 sub-shops each) and an agent account for `ag3`, loads N
//! priority items in one SQL statement (three task types; 5 % pending, 5 % running, 10 % failed,
//! 5 % expired, 5 % closed, the rest completed; five audit facts and two carrier calls for each of
//! the newest 2,000), signs in through the console's form (the admin token, and the agent),
//! checks that the capped counts say "10,000+", then GETs every console page `BENCH_ROUNDS`
//! times over loopback and prints the median, p99 and maximum per page. The client is in the same
//! process on loopback, so the time is the server's (routing, store reads, rendering) plus a
//! loopback round trip. Exits non-zero when a page's median is 50 ms or more.

use std::sync::Arc;
use std::time::{Duration, Instant};

use card_polling::Application;
use card_polling::settings::{Secret, Settings};
use card_polling::upstream::{SimCarrier, SimConfig};
use rakuten_types::{Clock, SystemClock};
use serde_json::json;
use test_util::PgSchema;

const ADMIN: &str = "bench-admin-token-0123456789";
const AGENT: &str = "bench-agent-token-0123456789";
const AGENTS: usize = 10;
const SUBSHOPS: usize = 9;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// PostgreSQL when `--backend postgres` or `BENCH_BACKEND=postgres`.
fn postgres_wanted() -> bool {
    let args: Vec<String> = std::env::args().collect();
    let arg = args
        .windows(2)
        .find(|w| w[0] == "--backend")
        .map(|w| w[1].clone());
    let chosen = arg.or_else(|| std::env::var("BENCH_BACKEND").ok());
    match chosen.as_deref() {
        None | Some("sqlite") => false,
        Some("postgres") => true,
        Some(other) => panic!("--backend {other}: sqlite or postgres"),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n = env_or("BENCH_ITEMS", 100_000);
    let rounds = env_or("BENCH_ROUNDS", 20);
    let dir = tempfile::tempdir()?;
    let mut settings = Settings::for_tests(dir.path().join("cp.db"), ADMIN);
    let schema = if postgres_wanted() {
        let s = PgSchema::new().await;
        settings.db_url = Some(Secret::new(s.url.clone()));
        Some(s)
    } else {
        None
    };
    let engine = if schema.is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    let now = SystemClock.now();
    let app = Application::build(
        settings.clone(),
        Arc::new(SystemClock),
        Arc::new(SimCarrier::new(SimConfig::default())),
    )
    .await?;
    let base = format!("http://127.0.0.1:{}", app.port());
    let task_types: Vec<String> = app.state().task_types.names();
    let t = Instant::now();
    for sql in load_sql(n, now, &task_types, app.postgres().is_some()) {
        let sql = sqlx::AssertSqlSafe(sql);
        let _rows = match app.postgres() {
            Some(pg) => sqlx::query(sql)
                .execute(pg.fixture_pool())
                .await?
                .rows_affected(),
            None => sqlx::query(sql)
                .execute(app.sqlite().fixture_pool())
                .await?
                .rows_affected(),
        };
    }
    let loaded = t.elapsed();
    let shutdown = tokio_util::sync::CancellationToken::new();
    tokio::spawn(app.serve_http(shutdown.clone()));
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    import_shops(&client, &base).await?;
    let admin = sign_in(&client, &base, ADMIN).await?;
    let agent = sign_in(&client, &base, AGENT).await?;
    let get = |path: String, cookie: String| {
        let (client, base) = (client.clone(), base.clone());
        async move {
            let resp = client
                .get(format!("{base}{path}"))
                .header("cookie", &cookie)
                .send()
                .await?;
            assert_eq!(resp.status(), 200, "{path}");
            anyhow::Ok(resp.text().await?)
        }
    };
    // The capped counts: every task type and the exceptions hold more than 10,000 items at the
    // default n.
    let unfiltered = get("/console/items".into(), admin.clone()).await?;
    let exceptions = get("/console/exceptions".into(), admin.clone()).await?;
    if n >= 100_000 {
        assert!(
            unfiltered.contains("of 10,000+"),
            "the list total is capped"
        );
        assert!(
            exceptions.contains("of 10,000+"),
            "the exceptions total is capped"
        );
    }
    // Deep pages through the links the pages carry: the page below the newest one, and the one
    // above the oldest.
    let older = link_of(&unfiltered, "older").expect("the newest page links to an older one");
    let oldest = link_of(&unfiltered, "oldest").expect("the newest page links to the oldest");
    let exc_older =
        link_of(&exceptions, "older").expect("the newest exceptions link to older ones");
    let middle = format!("/console/items?before={}", n / 2);
    let iccid = format!("89{}", 100_000_000_000_000_000u64 + (n as u64 / 2) / 3);
    let tt = &task_types[0];
    let leaf_id = n as i64 - 7;
    let pages: Vec<(String, String, &String)> = vec![
        (
            "/console (queue depths, last cycle)".into(),
            "/console".into(),
            &admin,
        ),
        ("/console/items".into(), "/console/items".into(), &admin),
        (
            "/console/items?before=<newest page's last>".into(),
            older,
            &admin,
        ),
        ("/console/items?before=<n/2>".into(), middle, &admin),
        (
            "/console/items?after=0 (oldest page)".into(),
            oldest,
            &admin,
        ),
        (
            "/console/items?status=pending".into(),
            "/console/items?status=pending".into(),
            &admin,
        ),
        (
            "/console/items?status=failed".into(),
            "/console/items?status=failed".into(),
            &admin,
        ),
        (
            format!("/console/items?task_type={tt}"),
            format!("/console/items?task_type={tt}"),
            &admin,
        ),
        (
            "/console/items?iccid=<one card>".into(),
            format!("/console/items?iccid={iccid}"),
            &admin,
        ),
        (
            "/console/items?shop=ag3 (tree of 10)".into(),
            "/console/items?shop=ag3".into(),
            &admin,
        ),
        (
            "/console/items?shop=ag3-s4 (leaf)".into(),
            "/console/items?shop=ag3-s4".into(),
            &admin,
        ),
        (
            "/console/items?status=pending&task_type&shop=ag3".into(),
            format!("/console/items?status=pending&task_type={tt}&shop=ag3"),
            &admin,
        ),
        (
            "/console/exceptions".into(),
            "/console/exceptions".into(),
            &admin,
        ),
        (
            "/console/exceptions?before=<cursor>".into(),
            exc_older,
            &admin,
        ),
        (
            "/console/exceptions?status=expired".into(),
            "/console/exceptions?status=expired".into(),
            &admin,
        ),
        (
            "/console/items/{id} (5 facts, 2 calls)".into(),
            format!("/console/items/{leaf_id}"),
            &admin,
        ),
        ("agent ag3: /console".into(), "/console".into(), &agent),
        (
            "agent ag3: /console/items".into(),
            "/console/items".into(),
            &agent,
        ),
        (
            "agent ag3: /console/items?shop=ag3-s4".into(),
            "/console/items?shop=ag3-s4".into(),
            &agent,
        ),
        (
            "agent ag3: /console/items?shop=ag4 (outside)".into(),
            "/console/items?shop=ag4".into(),
            &agent,
        ),
        (
            "agent ag3: /console/exceptions".into(),
            "/console/exceptions".into(),
            &agent,
        ),
    ];
    println!(
        "{engine}: {n} items (loaded in {:.1} s), {rounds} rounds per page",
        loaded.as_secs_f64()
    );
    println!(
        "{:<55} {:>10} {:>10} {:>10}",
        "page", "median ms", "p99 ms", "max ms"
    );
    let mut slow = Vec::new();
    for (label, p, cookie) in &pages {
        let mut times = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let t = Instant::now();
            let resp = client
                .get(format!("{base}{p}"))
                .header("cookie", cookie.as_str())
                .send()
                .await?;
            assert_eq!(resp.status(), 200, "{p}");
            let _ = resp.bytes().await?;
            times.push(t.elapsed());
        }
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        // Nearest rank: with fewer than 100 rounds the p99 is the maximum.
        let p99 = times[(times.len() * 99).div_ceil(100) - 1];
        let median = times[times.len() / 2];
        println!(
            "{:<55} {:>10.2} {:>10.2} {:>10.2}",
            label,
            ms(median),
            ms(p99),
            ms(*times.last().unwrap())
        );
        if median >= Duration::from_millis(50) {
            slow.push(label.clone());
        }
    }
    shutdown.cancel();
    drop(schema);
    anyhow::ensure!(slow.is_empty(), "pages at 50 ms or more: {slow:?}");
    Ok(())
}

/// The shops (`ag0`…`ag9`, each with `ag{a}-s0`…`ag{a}-s8`) and the agent account of `ag3`.
async fn import_shops(client: &reqwest::Client, base: &str) -> anyhow::Result<()> {
    let mut shops = Vec::new();
    for a in 0..AGENTS {
        shops.push(json!({"id": format!("ag{a}"), "name": format!("Agent {a}")}));
        for s in 0..SUBSHOPS {
            shops.push(
                json!({"id": format!("ag{a}-s{s}"), "parent_id": format!("ag{a}"), "name": ""}),
            );
        }
    }
    let body = json!({
        "shops": shops,
        "accounts": [{"id": "agent-ag3", "role": "agent", "shop_id": "ag3", "token": AGENT}],
    });
    let resp = client
        .post(format!("{base}/api/admin/import"))
        .bearer_auth(ADMIN)
        .json(&body)
        .send()
        .await?;
    anyhow::ensure!(resp.status().is_success(), "import: {}", resp.text().await?);
    Ok(())
}

/// Signs in through the console's form; the session cookie.
async fn sign_in(client: &reqwest::Client, base: &str, token: &str) -> anyhow::Result<String> {
    let signed = client
        .post(format!("{base}/console/sign-in"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={token}"))
        .send()
        .await?;
    Ok(signed
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .ok_or_else(|| anyhow::anyhow!("no session cookie for {token}"))?
        .to_owned())
}

/// The path of the pager link `id` in a console page (its `&amp;` unescaped).
fn link_of(html: &str, id: &str) -> Option<String> {
    let at = html.find(&format!("id=\"{id}\""))?;
    let href = html[..at].rfind("href=\"")? + "href=\"".len();
    let end = href + html[href..].find('"')?;
    Some(html[href..end].replace("&amp;", "&"))
}

/// The `SELECT` list of the item load over a series `k(i)`; the same SQL on both engines.
fn item_select(now: rakuten_types::Timestamp, task_types: &[String]) -> String {
    let enq = now.minus(Duration::from_secs(3600)).to_rfc3339();
    let lease = now.plus(Duration::from_secs(90)).to_rfc3339();
    let tts = task_types.len();
    let tt_case = task_types
        .iter()
        .enumerate()
        .map(|(k, t)| format!("WHEN {k} THEN '{t}'"))
        .collect::<Vec<_>>()
        .join(" ");
    // Status by i % 20: 0 pending, 1 running, 2-3 failed, 4 expired, 5 closed, else completed.
    format!(
        "SELECT '89' || (100000000000000000 + i / {tts}), \
           CASE i % {tts} {tt_case} END, 'card', '89' || (100000000000000000 + i / {tts}), \
           'ag' || (i % {AGENTS}) || '-s' || ((i / {AGENTS}) % {SUBSHOPS}), \
           CASE WHEN i % 20 = 0 THEN 'pending' WHEN i % 20 = 1 THEN 'running' \
                WHEN i % 20 IN (2, 3) THEN 'failed' WHEN i % 20 = 4 THEN 'expired' \
                WHEN i % 20 = 5 THEN 'closed' ELSE 'completed' END, \
           'purchase_activated', 'purchase_activated', 1, '{enq}', '{enq}', \
           CASE WHEN i % 20 IN (2, 3) THEN 3 WHEN i % 20 = 0 THEN 0 ELSE 1 END, 3, '{enq}', \
           CASE WHEN i % 20 = 1 THEN 'bench-claim' END, \
           CASE WHEN i % 20 = 1 THEN '{lease}' END, \
           CASE WHEN i % 20 IN (0, 1) THEN NULL ELSE '{enq}' END, \
           CASE WHEN i % 20 IN (2, 3) THEN 'carrier answered 503 three times' END, \
           CASE WHEN i % 20 = 5 THEN 'bench' END, \
           CASE WHEN i % 20 = 5 THEN 'closed by the bench' END"
    )
}

/// The load: `n` items in one statement, then five audit facts and two carrier calls for each of
/// the newest 2,000, then the planner's statistics (and on PostgreSQL a vacuum).
fn load_sql(
    n: usize,
    now: rakuten_types::Timestamp,
    task_types: &[String],
    postgres: bool,
) -> Vec<String> {
    let columns = "iccid, task_type, asset_type, asset_id, shop_id, status, trigger_type, \
        last_trigger_type, trigger_count, enqueued_at, last_triggered_at, attempts, max_attempts, \
        next_run_at, claim_token, claim_expires_at, dequeued_at, failure_reason, closed_by, close_reason";
    let select = item_select(now, task_types);
    let series = |m: usize| {
        if postgres {
            format!("generate_series(0, {}) AS k(i)", m.max(1) - 1)
        } else {
            format!(
                "(WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < {m}) SELECT i FROM s) AS k"
            )
        }
    };
    let at = now.minus(Duration::from_secs(600)).to_rfc3339();
    let first = n.saturating_sub(2_000);
    vec![
        format!(
            "INSERT INTO priority_items ({columns}) {select} FROM {}",
            series(n)
        ),
        format!(
            "INSERT INTO priority_item_events (item_id, kind, trigger_type, source, operator, reason, result, at) \
             SELECT i.id, CASE k.i % 5 WHEN 0 THEN 'enqueue' WHEN 1 THEN 'claim' WHEN 2 THEN 'failure' \
               WHEN 3 THEN 'retry' ELSE 'complete' END, 'purchase_activated', 'bench', NULL, NULL, 'ok', '{at}' \
             FROM priority_items i, {} WHERE i.id > {first}",
            series(5)
        ),
        format!(
            "INSERT INTO integration_logs (item_id, iccid, task_type, operation, request_summary, \
               response_summary, latency_ms, outcome, at) \
             SELECT i.id, i.iccid, i.task_type, 'query_card', 'iccid=' || i.iccid, 'status=active', 42, 'ok', '{at}' \
             FROM priority_items i, {} WHERE i.id > {first}",
            series(2)
        ),
        // What autovacuum does after a bulk insert (the test server runs with autovacuum off):
        // the statistics, and on PostgreSQL the visibility map that lets the capped counts read
        // an index alone.
        if postgres {
            "VACUUM ANALYZE"
        } else {
            "ANALYZE"
        }
        .to_owned(),
    ]
}
