//! Several gateway instances on one PostgreSQL schema: concurrent leases across
//! instances never hand out two order tasks; a submit on one instance wakes a long-poll waiting on
//! another (through `LISTEN/NOTIFY`, well before the 1 s fallback check); kill -9 of an instance
//! mid-lease loses nothing (the real binary).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rakuten_types::ManualClock;
use serde_json::{Value, json};

use crate::binary::Binary;
use crate::helpers::{TOKEN, TestApp, spawn_pg_app};
use test_util::PgSchema;

async fn three_instances() -> (Arc<PgSchema>, Vec<TestApp>) {
    let db = Arc::new(PgSchema::new().await);
    let clock = ManualClock::at_fixed_date();
    let mut apps = Vec::new();
    for _ in 0..3 {
        apps.push(spawn_pg_app(db.clone(), clock.clone(), |_| {}).await);
    }
    (db, apps)
}

#[test_util::lane(postgres)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_leases_across_three_instances_never_hand_out_two_order_tasks() {
    let (_db, apps) = three_instances().await;
    let apps = Arc::new(apps);
    const TASKS: usize = 15;
    for i in 0..TASKS {
        apps[i % 3].submit(&format!("po-{i:02}")).await.assert_ok();
    }
    let mut done = Vec::new();
    for round in 0..TASKS {
        // Six workers, two per instance, poll at once.
        let mut polls = Vec::new();
        for w in 0..6 {
            let apps = apps.clone();
            polls.push(tokio::spawn(async move {
                let worker = format!("w{w}");
                (worker.clone(), apps[w % 3].lease(&worker, 0.0).await)
            }));
        }
        let mut grants = Vec::new();
        for p in polls {
            let (worker, a) = p.await.unwrap();
            // 0 with a grant or null, or 6004 (gate busy) with null.
            assert_eq!(a.status, 200, "{:?}", a.body);
            assert!(matches!(a.code(), 0 | 6004), "{:?}", a.body);
            let data = a.data().clone();
            if !data.is_null() {
                grants.push((worker, data));
            }
        }
        assert_eq!(grants.len(), 1, "round {round}: {grants:?}");
        let (worker, g) = &grants[0];
        let id = g["task_id"].as_str().unwrap().to_owned();
        // The holder finishes through yet another instance.
        apps[(round + 1) % 3]
            .report(&id, json!({"worker_id": worker, "lease_token": g["lease_token"], "state": "paid", "terminal": true}))
            .await
            .assert_ok();
        done.push(id);
    }
    let mut unique = done.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), TASKS, "every task exactly once: {done:?}");
    let h = apps[2].health().await;
    assert_eq!(h.data()["queued"], 0);
    assert_eq!(h.data()["active"], json!([]));
}

/// Long-polls on `waiter`, submits on `submitter` once the poll is waiting; returns the time from
/// the submit's acknowledgement to the poll's answer.
async fn wake_latency(waiter: &TestApp, submitter: &TestApp, task_id: &str) -> Duration {
    let url = waiter.url("/api/orders/lease?worker_id=w-wait&wait=10");
    let client = waiter.client.clone();
    let poll = tokio::spawn(async move {
        let r = client.get(url).bearer_auth(TOKEN).send().await.unwrap();
        let v: Value = r.json().await.unwrap();
        (Instant::now(), v)
    });
    waiter.wait_for_long_polls("orders", 1).await;
    submitter.submit(task_id).await.assert_ok();
    let acked = Instant::now();
    let (answered, v) = poll.await.unwrap();
    assert_eq!(v["data"]["task_id"], task_id, "{v}");
    answered.saturating_duration_since(acked)
}

#[test_util::lane(postgres)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_submitted_on_one_instance_wakes_a_long_poll_waiting_on_another() {
    let (_db, apps) = three_instances().await;
    let mut worst = Duration::ZERO;
    for i in 0..5 {
        let (waiter, submitter) = (&apps[i % 3], &apps[(i + 1) % 3]);
        let id = format!("po-wake-{i}");
        let d = wake_latency(waiter, submitter, &id).await;
        eprintln!(
            "cross-instance hand-off {i}: {:.1} ms",
            d.as_secs_f64() * 1e3
        );
        worst = worst.max(d);
        // Finish it so the gate is free for the next round.
        let t = waiter.task(&id).await;
        let owner = t.data()["lease_owner"].as_str().unwrap().to_owned();
        waiter
            .report(
                &id,
                json!({"worker_id": owner, "state": "paid", "terminal": true}),
            )
            .await
            .assert_ok();
    }
    eprintln!(
        "cross-instance hand-off worst of 5: {:.1} ms (issue bound 100 ms)",
        worst.as_secs_f64() * 1e3
    );
    // The fallback check alone would take up to 1000 ms; NOTIFY must beat it clearly. The margin
    // over the 100 ms target is for loaded CI machines; the figure above is what was measured.
    assert!(
        worst < Duration::from_millis(500),
        "worst hand-off {worst:?}"
    );

    // The account-query channel wakes across instances the same way.
    let client = apps[0].client.clone();
    let url = apps[0].url("/api/account/queries/lease?worker_id=w-q&wait=10");
    let poll = tokio::spawn(async move {
        let v: Value = client
            .get(url)
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        (Instant::now(), v)
    });
    apps[0].wait_for_long_polls("queries", 1).await;
    apps[2].submit_list_query("q-wake").await.assert_ok();
    let acked = Instant::now();
    let (answered, v) = poll.await.unwrap();
    assert_eq!(v["data"]["query_id"], "q-wake", "{v}");
    let d = answered.saturating_duration_since(acked);
    eprintln!(
        "cross-instance query hand-off: {:.1} ms",
        d.as_secs_f64() * 1e3
    );
    assert!(d < Duration::from_millis(500), "query hand-off {d:?}");
}

#[test_util::lane(postgres)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_whose_connection_is_killed_reconnects_and_still_wakes_long_polls() {
    let db = Arc::new(PgSchema::new().await);
    let clock = ManualClock::at_fixed_date();
    let a = spawn_pg_app(db.clone(), clock.clone(), |_| {}).await;
    let b = spawn_pg_app(db.clone(), clock.clone(), |_| {}).await;
    let admin = sqlx::PgPool::connect(&test_util::pg::base_url())
        .await
        .unwrap();
    let listen_name = format!("{}/listen", db.name);
    // Listener sessions other than `old` that have run their LISTEN and wait for notifications.
    let listening = async |old: &[i32]| {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 \
             AND NOT pid = ANY($2) AND state = 'idle' AND query ILIKE '%LISTEN%'",
        )
        .bind(&listen_name)
        .bind(old)
        .fetch_one(&admin)
        .await
        .unwrap()
    };
    // Both listeners are up (they connect right after start).
    test_util::wait_until(
        "both listeners to connect",
        Duration::from_secs(10),
        async || listening(&[]).await == 2,
    )
    .await;
    let old: Vec<i32> =
        sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE application_name = $1")
            .bind(&listen_name)
            .fetch_all(&admin)
            .await
            .unwrap();
    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
    )
    .bind(&listen_name)
    .fetch_all(&admin)
    .await
    .unwrap();
    assert_eq!(killed.len(), 2);
    // They reconnect and listen again, on new sessions.
    test_util::wait_until(
        "both listeners to reconnect and LISTEN",
        Duration::from_secs(10),
        async || listening(&old).await == 2,
    )
    .await;
    let d = wake_latency(&a, &b, "po-after-reconnect").await;
    eprintln!(
        "hand-off after listener reconnect: {:.1} ms",
        d.as_secs_f64() * 1e3
    );
    assert!(d < Duration::from_millis(500), "hand-off {d:?}");
    admin.close().await;
}

async fn call(req: reqwest::RequestBuilder) -> Value {
    req.bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[test_util::lane(postgres)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_an_instance_mid_lease_loses_nothing_and_the_others_serve_then_expire_it() {
    let db = PgSchema::new().await;
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let env = [("RAKUTEN_GATEWAY_DB_URL", db.url.as_str())];
    let mut a = Binary::start(dir.path(), &env).await;
    let b = Binary::start(dir.path(), &env).await;
    let (a_url, b_url) = (a.base.clone(), b.base.clone());

    // Two tasks submitted on A; w1 leases the first on A.
    for id in ["po-k1", "po-k2"] {
        let s = call(
            client
                .post(format!("{a_url}/api/orders"))
                .json(&json!({"task_id": id, "site": "rakuten", "intent": {"item_url": "https://item.rakuten.co.jp/shop/a/", "quantity": 1}})),
        )
        .await;
        assert_eq!(s["data"]["created"], true, "{s}");
    }
    let g = call(client.get(format!("{a_url}/api/orders/lease?worker_id=w1&wait=0"))).await;
    assert_eq!(g["data"]["task_id"], "po-k1", "{g}");
    let token = g["data"]["lease_token"].as_str().unwrap().to_owned();

    // kill -9 A mid-lease.
    a.child.kill().unwrap();
    a.child.wait().unwrap();

    // B sees the acknowledged lease intact and serves its holder.
    let t = call(client.get(format!("{b_url}/api/orders/po-k1"))).await;
    assert_eq!(t["data"]["status"], "leased", "{t}");
    assert_eq!(t["data"]["lease_owner"], "w1");
    assert_eq!(t["data"]["lease_count"], 1);
    let r = call(
        client
            .post(format!("{b_url}/api/orders/po-k1/renew"))
            .json(&json!({"worker_id": "w1", "lease_token": token})),
    )
    .await;
    assert_eq!(r["success"], true, "{r}");
    let rep = call(client.post(format!("{b_url}/api/orders/po-k1/report")).json(
        &json!({"worker_id": "w1", "lease_token": token, "state": "ordered", "site_order_id": "X1"}),
    ))
    .await;
    assert_eq!(rep["data"]["status"], "running", "{rep}");
    // Nobody else gets a task while po-k1 holds the gate.
    let other = call(client.get(format!("{b_url}/api/orders/lease?worker_id=w2&wait=0"))).await;
    assert!(other["data"].is_null(), "{other}");

    // w1 goes silent too: B's sweeper expires the lease to stale (never queued).
    test_util::wait_for(
        "the lease to go stale",
        Duration::from_secs(15),
        async || {
            let t = call(client.get(format!("{b_url}/api/orders/po-k1"))).await;
            match t["data"]["status"].as_str().unwrap() {
                "stale" => {
                    assert_eq!(t["data"]["history"][0]["state"], "ordered");
                    assert_eq!(t["data"]["history"][0]["site_order_id"], "X1");
                    Ok(())
                }
                "running" => Err(t),
                s => panic!("unexpected status {s}: {t}"),
            }
        },
    )
    .await;
    // The gate is free again: the second task goes to the next worker, through B.
    let g2 = call(client.get(format!("{b_url}/api/orders/lease?worker_id=w2&wait=5"))).await;
    assert_eq!(g2["data"]["task_id"], "po-k2", "{g2}");
    assert_eq!(g2["data"]["lease_count"], 1);
    drop(b);
}

/// With several instances on PostgreSQL each stamped and swept leases with its
/// own clock; one instance running 120 s ahead made another instance's healthy 60 s lease `stale`
/// at its next sweep. An instance whose clock is off from the database's now raises `clock_skew`
/// and leaves the sweeping to the others.
#[test_util::lane(postgres)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_whose_clock_runs_ahead_does_not_stale_a_healthy_lease() {
    let db = Arc::new(PgSchema::new().await);
    let real = rakuten_types::Timestamp::now_utc();
    let checked = |s: &mut order_gateway::Settings| {
        s.clock_skew_alert_seconds = 2.0;
        s.lease_ttl_seconds = 60.0;
    };
    let fast = spawn_pg_app(
        db.clone(),
        ManualClock::new(real.plus(Duration::from_secs(120))),
        checked,
    )
    .await;
    let healthy = spawn_pg_app(db.clone(), ManualClock::new(real), checked).await;
    healthy.leased("po-1", "w1").await;
    assert!(
        fast.sweep().await.is_empty(),
        "the fast instance does not sweep"
    );
    assert_eq!(healthy.status_of("po-1").await, "leased");
    assert!(healthy.sweep().await.is_empty());
    assert_eq!(fast.status_of("po-1").await, "leased");
}
