//! Operator console benchmark (pages stay fast at volume): a plain binary
//! (`harness = false`).
//!
//! `cargo bench -p order-gateway --bench console` (release), or `--profile dev` for an upper bound
//! on a machine without release artifacts; `BENCH_TASKS=N` (default 100,000), `BENCH_ROUNDS=N`
//! (default 20). `-- --backend postgres` (or `BENCH_BACKEND=postgres`): on PostgreSQL instead, in a
//! schema of its own in `DATABASE_URL_TEST` (default `postgres://postgres@127.0.0.1:5432/test`),
//! dropped at the end.
//!
//! Loads N tasks into a fresh gateway database in one SQL statement (a quarter each queued, failed,
//! stale and succeeded, with a report per non-queued task: `paid` for the succeeded, `in_cart` for
//! the rest), signs in through the console's form, checks that the list total and the counts by
//! status are capped ("10,000+"), then GETs every console page `BENCH_ROUNDS` times over loopback
//! and prints the median, p99 and maximum time per page, then times one alert-job pass (every
//! cause read) as many times. The deep page is the "older" link of the newest `failed` page
//! (keyset paging). The client is on loopback in the same process, so the time is the server's
//! (routing, store reads, rendering) plus a loopback round trip.

use std::sync::Arc;
use std::time::{Duration, Instant};

use order_gateway::{Application, Settings};
use rakuten_types::{Clock, SystemClock};
use test_util::PgSchema;

const TOKEN: &str = "bench-token-0123456789";

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
    match arg
        .or_else(|| std::env::var("BENCH_BACKEND").ok())
        .as_deref()
    {
        None | Some("sqlite") => false,
        Some("postgres") => true,
        Some(other) => panic!("--backend {other}: sqlite or postgres"),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n = env_or("BENCH_TASKS", 100_000);
    let rounds = env_or("BENCH_ROUNDS", 20);
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("gw.db");
    let mut settings = Settings::for_tests(&db, TOKEN);
    let schema = if postgres_wanted() {
        let s = PgSchema::new().await;
        settings.db_url = Some(order_gateway::settings::Secret::new(s.url.clone()));
        Some(s)
    } else {
        None
    };
    let clock = SystemClock;
    let now = clock.now();
    // Let the gateway create and migrate the schema, then stop it and load the rows.
    {
        let app = Application::build(settings.clone(), Arc::new(SystemClock)).await?;
        drop(app);
    }
    match &schema {
        Some(s) => load_pg(&s.url, n, now).await?,
        None => load(&db, n, now).await?,
    }
    println!(
        "{}",
        if schema.is_some() {
            "PostgreSQL"
        } else {
            "SQLite"
        }
    );
    let app = Application::build(settings, Arc::new(SystemClock)).await?;
    let alert_job = app.alert_job();
    let base = format!("http://127.0.0.1:{}", app.port());
    tokio::spawn(app.run_until_stopped(std::future::pending()));
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let signed = client
        .post(format!("{base}/console/sign-in"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={TOKEN}"))
        .send()
        .await?;
    let cookie = signed
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .expect("a session cookie")
        .to_owned();
    let get = |path: String| {
        let (client, cookie, base) = (client.clone(), cookie.clone(), base.clone());
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
    // The capped count: every status holds n / 4 tasks, past the cap at the default n.
    let unfiltered = get("/console/tasks".to_owned()).await?;
    if n / 4 > 10_000 {
        assert!(
            unfiltered.contains("of 10,000+"),
            "the list total is capped"
        );
        let overview = get("/console".to_owned()).await?;
        assert!(
            overview.contains("10,000+"),
            "the counts by status are capped"
        );
    }
    // The "older" page deep in a status: the one before the newest failed page, through the
    // cursor its link carries (the offset paging it replaces scanned ~24,950 rows to get there).
    let newest = get("/console/tasks?status=failed&before=newest".to_owned()).await?;
    let older = link_of(&newest, "older").expect("the newest failed page links to an older one");
    let pages = [
        ("/console", "/console".to_owned()),
        ("/console/attention", "/console/attention".to_owned()),
        ("/console/tasks", "/console/tasks".to_owned()),
        (
            "/console/tasks?status=queued",
            "/console/tasks?status=queued".to_owned(),
        ),
        (
            "/console/tasks?status=failed&before=newest",
            "/console/tasks?status=failed&before=newest".to_owned(),
        ),
        ("/console/tasks?status=failed&before=<cursor>", older),
        (
            "/console/tasks/{id}",
            "/console/tasks/bench-000002".to_owned(),
        ),
        ("/console/alerts", "/console/alerts".to_owned()),
        ("/console/queries", "/console/queries".to_owned()),
    ];
    println!("{n} tasks, {rounds} rounds per page");
    println!(
        "{:<50} {:>10} {:>10} {:>10}",
        "page", "median ms", "p99 ms", "max ms"
    );
    for (label, p) in &pages {
        let mut times = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let t = Instant::now();
            let resp = client
                .get(format!("{base}{p}"))
                .header("cookie", &cookie)
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
        println!(
            "{:<50} {:>10.2} {:>10.2} {:>10.2}",
            label,
            ms(times[times.len() / 2]),
            ms(p99),
            ms(*times.last().unwrap())
        );
    }
    // One alert-job pass, as the job runs it every sweep interval (1 s by default): every cause
    // read, nothing left to raise after the first pass. The background job runs beside it.
    alert_job.run_once(clock.now()).await?;
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        alert_job.run_once(clock.now()).await?;
        times.push(t.elapsed());
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{:<50} {:>10.2} {:>10.2} {:>10.2}",
        "(alert job pass, every sweep interval)",
        ms(times[times.len() / 2]),
        ms(times[(times.len() * 99).div_ceil(100) - 1]),
        ms(*times.last().unwrap())
    );
    drop(schema);
    Ok(())
}

/// The path of the pager link `id` in a console page (its `&amp;` unescaped).
fn link_of(html: &str, id: &str) -> Option<String> {
    let at = html.find(&format!("id=\"{id}\""))?;
    let href = html[..at].rfind("href=\"")? + "href=\"".len();
    let end = href + html[href..].find('"')?;
    Some(html[href..end].replace("&amp;", "&"))
}

/// The task rows keep their latest report's state, as the report path writes it
/// (D-latest-state-on-the-task).
const LATEST_STATE: &str = "UPDATE tasks SET latest_state = CASE status WHEN 'queued' THEN NULL \
     WHEN 'succeeded' THEN 'paid' ELSE 'in_cart' END";

/// Inserts `n` tasks with one recursive SQL statement (and one report per non-queued task).
async fn load(db: &std::path::Path, n: usize, now: rakuten_types::Timestamp) -> anyhow::Result<()> {
    use sqlx::ConnectOptions;
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(db)
        .connect()
        .await?;
    let start = now.minus(Duration::from_secs(n as u64 + 10)).to_rfc3339();
    let sql = format!(
        "WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < {n}) \
         INSERT INTO tasks (task_id, site, intent_json, status, lease_owner, lease_expires_at, \
           lease_count, created_at, updated_at, outcome, lease_token, gate_key) \
         SELECT printf('bench-%06d', i), 'rakuten', \
           '{{\"item_url\":\"https://item.rakuten.co.jp/shop/a/\",\"quantity\":1}}', \
           CASE i % 4 WHEN 0 THEN 'queued' WHEN 1 THEN 'failed' WHEN 2 THEN 'stale' ELSE 'succeeded' END, \
           CASE i % 4 WHEN 0 THEN NULL ELSE 'w1' END, \
           CASE i % 4 WHEN 0 THEN NULL ELSE '{start}' END, \
           CASE i % 4 WHEN 0 THEN 0 ELSE 1 END, \
           strftime('%Y-%m-%dT%H:%M:%fZ', '{start}', '+' || i || ' seconds'), \
           strftime('%Y-%m-%dT%H:%M:%fZ', '{start}', '+' || i || ' seconds'), \
           CASE i % 4 WHEN 1 THEN 'failed' WHEN 3 THEN 'succeeded' ELSE NULL END, \
           CASE i % 4 WHEN 0 THEN NULL ELSE 'tok' END, NULL FROM k"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(&mut conn)
        .await?;
    sqlx::query(
        "INSERT INTO task_reports (task_id, state, detail, reported_at, worker_id, seq) \
         SELECT task_id, CASE status WHEN 'succeeded' THEN 'paid' ELSE 'in_cart' END, \
         'reported', updated_at, 'w1', 1 FROM tasks WHERE status <> 'queued'",
    )
    .execute(&mut conn)
    .await?;
    sqlx::query(LATEST_STATE).execute(&mut conn).await?;
    Ok(())
}

/// [`load`] on PostgreSQL, then `VACUUM ANALYZE`: the same rows, the series from `generate_series` and the timestamps
/// formatted as the gateway stores them (RFC 3339, milliseconds, `Z`).
async fn load_pg(url: &str, n: usize, now: rakuten_types::Timestamp) -> anyhow::Result<()> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(url).await?;
    let start = now.minus(Duration::from_secs(n as u64 + 10)).to_rfc3339();
    let sql = format!(
        "INSERT INTO tasks (task_id, site, intent_json, status, lease_owner, lease_expires_at, \
           lease_count, created_at, updated_at, outcome, lease_token, gate_key) \
         SELECT 'bench-' || lpad(i::text, 6, '0'), 'rakuten', \
           '{{\"item_url\":\"https://item.rakuten.co.jp/shop/a/\",\"quantity\":1}}', \
           CASE i % 4 WHEN 0 THEN 'queued' WHEN 1 THEN 'failed' WHEN 2 THEN 'stale' ELSE 'succeeded' END, \
           CASE i % 4 WHEN 0 THEN NULL ELSE 'w1' END, \
           CASE i % 4 WHEN 0 THEN NULL ELSE '{start}' END, \
           CASE i % 4 WHEN 0 THEN 0 ELSE 1 END, \
           to_char(('{start}'::timestamptz + i * interval '1 second') AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), \
           to_char(('{start}'::timestamptz + i * interval '1 second') AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), \
           CASE i % 4 WHEN 1 THEN 'failed' WHEN 3 THEN 'succeeded' ELSE NULL END, \
           CASE i % 4 WHEN 0 THEN NULL ELSE 'tok' END, NULL FROM generate_series(0, {}) AS k(i)",
        n.max(1) - 1
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(&mut conn)
        .await?;
    sqlx::query(
        "INSERT INTO task_reports (task_id, state, detail, reported_at, worker_id, seq) \
         SELECT task_id, CASE status WHEN 'succeeded' THEN 'paid' ELSE 'in_cart' END, \
         'reported', updated_at, 'w1', 1 FROM tasks WHERE status <> 'queued'",
    )
    .execute(&mut conn)
    .await?;
    sqlx::query(LATEST_STATE).execute(&mut conn).await?;
    // What autovacuum does after a bulk insert (the test server runs with autovacuum off): the
    // statistics, and the visibility map that lets the capped counts read the index alone.
    sqlx::query("VACUUM ANALYZE").execute(&mut conn).await?;
    Ok(())
}
