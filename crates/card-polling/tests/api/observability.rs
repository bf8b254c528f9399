//! Probes and `/metrics`: `/livez`, `/readyz`, `/health` in full only
//! with a token, and Prometheus text that a parser reads and that moves when items move.

use prometheus_parse::{Scrape, Value};
use serde_json::json;

use super::helpers::*;

async fn scrape(app: &TestApp) -> Scrape {
    let resp = app
        .client
        .get(format!("{}/metrics", app.base))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The value of `name` with exactly these labels among its own; 0 when the series is absent.
fn value(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<f64> = s
        .samples
        .iter()
        .filter(|x| x.metric == name && labels.iter().all(|(k, v)| x.labels.get(k) == Some(v)))
        .map(|x| match &x.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            Value::Histogram(h) => h.iter().map(|b| b.count).fold(0.0, f64::max),
            Value::Summary(_) => f64::NAN,
        })
        .collect();
    assert!(found.len() <= 1, "{name}{labels:?}: {found:?}");
    found.first().copied().unwrap_or(0.0)
}

#[super::lane]
#[tokio::test]
async fn metrics_parse_and_move_when_an_item_is_enqueued_and_executed() {
    let app = spawn_seeded().await;
    let s = scrape(&app).await;
    // Present and 0, not absent, with nothing open (D-metrics).
    for status in ["pending", "running"] {
        assert!(
            s.samples.iter().any(|x| x.metric == "cardpoll_items"
                && x.labels.get("status") == Some(status)
                && x.labels.get("task_type") == Some("package")
                && matches!(x.value, Value::Gauge(v) if v == 0.0)),
            "{status}"
        );
    }

    let (st, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["card_status"], "reason": "metrics test"}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let s = scrape(&app).await;
    let pending = [("status", "pending"), ("task_type", "card_status")];
    assert_eq!(value(&s, "cardpoll_items", &pending), 1.0);
    assert_eq!(
        value(
            &s,
            "cardpoll_lane_depth",
            &[("task_type", "card_status"), ("lane", "hint_channel")]
        ),
        1.0
    );

    app.cycle().await;
    let s = scrape(&app).await;
    let queued = [("task_type", "card_status"), ("lane", "priority")];
    assert_eq!(value(&s, "cardpoll_lane_depth", &queued), 1.0);

    app.drain().await;
    let s = scrape(&app).await;
    assert_eq!(value(&s, "cardpoll_items", &pending), 0.0);
    assert_eq!(value(&s, "cardpoll_lane_depth", &queued), 0.0);
    assert!(
        value(
            &s,
            "cardpoll_carrier_calls_total",
            &[("operation", "poll"), ("result", "ok")]
        ) >= 1.0
    );
    assert!(value(&s, "cardpoll_cycle_seconds_count", &[]) >= 1.0);
    assert_eq!(
        value(&s, "cardpoll_hint_to_execution_seconds_count", &[]),
        1.0
    );
}

#[super::lane]
#[tokio::test]
async fn metrics_need_an_administering_account() {
    let app = spawn_seeded().await;
    let (s, _) = app.raw(reqwest::Method::GET, "/metrics", None).await;
    assert_eq!(s, 401);
    // RFC 9110 §11.6.1: a 401 names its scheme (D-metrics).
    let resp = app
        .client
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.headers().get("www-authenticate").map(|v| v.to_str().unwrap()),
        Some("Bearer")
    );
    let (s, _) = app
        .raw(reqwest::Method::GET, "/metrics", Some(AGENT_A))
        .await;
    assert_eq!(s, 403);
    let (s, _) = app
        .raw(reqwest::Method::GET, "/metrics", Some(PLATFORM))
        .await;
    assert_eq!(s, 200);
}

#[super::lane]
#[tokio::test]
async fn probes_answer_and_anonymous_health_shows_only_the_status() {
    let app = spawn_seeded().await;
    let (s, v) = app.send(reqwest::Method::GET, "/livez", None, None).await;
    assert_eq!((s, v["data"]["status"].as_str()), (200, Some("alive")));
    let (s, v) = app.send(reqwest::Method::GET, "/readyz", None, None).await;
    assert_eq!((s, v["data"]["status"].as_str()), (200, Some("ready")));
    let (s, v) = app.send(reqwest::Method::GET, "/health", None, None).await;
    assert_eq!(
        (s, &v["data"]),
        (200, &json!({"status": "ok", "database": "reachable"}))
    );
    // An agent sees what an anonymous probe sees; the queues are an operator's
    // (D-access-health-by-role).
    let (s, v) = app.get("/health", AGENT_A).await;
    assert_eq!(
        (s, &v["data"]),
        (200, &json!({"status": "ok", "database": "reachable"}))
    );
    let (s, v) = app.get("/health", PLATFORM).await;
    assert_eq!(s, 200);
    assert!(v["data"]["queues"].is_array(), "{v}");
    let (s, _) = app.get("/health", "not-a-token").await;
    assert_eq!(s, 401);
}

#[super::lane]
#[tokio::test]
async fn readyz_is_503_when_the_database_is_closed() {
    let app = spawn_seeded().await;
    app.db.pool().close().await;
    let (s, v) = app.send(reqwest::Method::GET, "/readyz", None, None).await;
    assert_eq!((s, v["code"].as_i64()), (503, Some(1503)), "{v}");
    let (s, _) = app.send(reqwest::Method::GET, "/livez", None, None).await;
    assert_eq!(s, 200);
}

#[super::lane]
#[tokio::test]
async fn the_bearer_scheme_is_matched_case_insensitively() {
    let app = spawn_seeded().await;
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let resp = app
            .client
            .get(format!("{}/api/priority-items", app.base))
            .header("Authorization", format!("{scheme} {PLATFORM}"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{scheme}");
    }
}

#[super::lane]
#[tokio::test]
async fn health_counts_open_items_by_status_and_ages_the_oldest_pending_one() {
    let app = spawn_seeded().await;
    let (s, v) = app.get("/health", PLATFORM).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["data"]["database"],
        json!({"reachable": true, "items": {"pending": 0, "running": 0}, "oldest_pending_age_secs": null, "writes_failing": false})
    );

    let (st, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["card_status"], "reason": "health test"}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    app.advance(90);
    let (st, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA11", "task_types": ["card_status"], "reason": "health test"}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    app.advance(10);
    let (s, v) = app.get("/health", PLATFORM).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["data"]["status"], "ok");
    assert_eq!(
        v["data"]["database"],
        json!({"reachable": true, "items": {"pending": 2, "running": 0}, "oldest_pending_age_secs": 100, "writes_failing": false})
    );
}

#[super::lane]
#[tokio::test]
async fn health_is_503_with_its_state_when_the_items_table_is_gone() {
    let app = spawn_seeded().await;
    sqlx::query("ALTER TABLE priority_items RENAME TO priority_items_gone")
        .execute(app.db.fixture_pool())
        .await
        .unwrap();
    // `SELECT 1` still answers: readiness alone would call this database fine.
    let (s, _) = app.send(reqwest::Method::GET, "/readyz", None, None).await;
    assert_eq!(s, 200);

    let (s, v) = app.send(reqwest::Method::GET, "/health", None, None).await;
    assert_eq!((s, v["code"].as_i64()), (503, Some(1503)), "{v}");
    assert_eq!(v["success"], false, "{v}");
    assert_eq!(
        v["data"],
        json!({"status": "unavailable", "database": "unreachable"})
    );

    let (s, v) = app.get("/health", PLATFORM).await;
    assert_eq!((s, v["code"].as_i64()), (503, Some(1503)), "{v}");
    assert_eq!(v["data"]["status"], "unavailable", "{v}");
    assert_eq!(
        v["data"]["database"],
        json!({"reachable": false, "items": null, "oldest_pending_age_secs": null, "writes_failing": false})
    );
    assert!(v["data"]["queues"].is_array(), "{v}");
}

/// During a database outage `/metrics` answered 503, so the dashboard lost
/// every in-process series (carrier calls, cycles, lanes) exactly when it was needed. The scrape
/// now answers 200 without the item counts and with `cardpoll_database_up 0` (D-metrics).
#[super::lane]
#[tokio::test]
async fn metrics_still_answer_during_a_database_outage_and_say_it_is_down() {
    let app = spawn_seeded().await;
    let (st, v) = app
        .enqueue(
            PLATFORM,
            json!({"asset_type": "card", "asset_id": "CA1", "task_types": ["card_status"], "reason": "outage test"}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let s = scrape(&app).await;
    assert_eq!(value(&s, "cardpoll_database_up", &[]), 1.0);
    assert_eq!(value(&s, "cardpoll_hint_channel_up", &[]), 1.0);
    assert!(s.samples.iter().any(|x| x.metric == "cardpoll_items"));

    sqlx::query("ALTER TABLE priority_items RENAME TO priority_items_gone")
        .execute(app.db.fixture_pool())
        .await
        .unwrap();
    // The bootstrap admin token needs no database read.
    let s = scrape(&app).await;
    assert_eq!(value(&s, "cardpoll_database_up", &[]), 0.0);
    assert_eq!(value(&s, "cardpoll_hint_channel_up", &[]), 1.0);
    assert!(!s.samples.iter().any(|x| x.metric == "cardpoll_items"));
    assert!(
        s.samples
            .iter()
            .any(|x| x.metric == "cardpoll_lane_depth"),
        "lane depths come from memory and stay"
    );
}

#[super::lane]
#[tokio::test]
async fn health_is_503_when_the_database_is_closed() {
    let app = spawn_seeded().await;
    app.db.pool().close().await;
    let (s, v) = app.send(reqwest::Method::GET, "/health", None, None).await;
    assert_eq!((s, v["code"].as_i64()), (503, Some(1503)), "{v}");
    assert_eq!(v["data"]["database"], "unreachable", "{v}");
}

/// `/health`'s `clock` was `null` until this instance's first claim, the
/// same `null` as "the check is off" or "SQLite has no other clock". It is now an object from the
/// start: `status` (`off`, `no_shared_clock`, `not_yet_measured`, `ok`, `skewed`), this instance's
/// own clock reading `now`, the tolerance, and the last measurement's fields (`null` until one
/// was made) (D-poll-clock-skew-no-claims).
#[super::lane]
#[tokio::test]
async fn health_says_what_the_clock_check_is_from_the_start() {
    use rakuten_types::Clock;

    // The tests' default: RAKUTEN_POLL_CLOCK_MAX_SKEW_SECS=0, the check off.
    let app = spawn_app().await;
    let (s, v) = app.get("/health", ADMIN).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["data"]["clock"],
        json!({"status": "off", "now": app.clock.now(), "max_skew_ms": null, "offset_ms": null,
               "skewed": false, "checked_at": null}),
        "{v}"
    );
    drop(app);

    let app = spawn_with(Backend::Memory, |s| s.clock_max_skew_secs = 2).await;
    let shared = app.settings.db_url.is_some();
    let (s, v) = app.get("/health", ADMIN).await;
    assert_eq!(s, 200, "{v}");
    let before = if shared {
        "not_yet_measured"
    } else {
        "no_shared_clock"
    };
    assert_eq!(
        v["data"]["clock"],
        json!({"status": before, "now": app.clock.now(), "max_skew_ms": 2000, "offset_ms": null,
               "skewed": false, "checked_at": null}),
        "{v}"
    );
    // A measurement (the executor makes one before a claim). The manual clock stands at a fixed
    // date years away from PostgreSQL's own: skewed there.
    let allowed = app.executor.clock_guard().may_claim().await;
    let (_, v) = app.get("/health", ADMIN).await;
    let clock = &v["data"]["clock"];
    if shared {
        assert!(!allowed);
        assert_eq!(clock["status"], "skewed", "{v}");
        assert_eq!(clock["skewed"], true, "{v}");
        assert!(clock["offset_ms"].as_i64().unwrap().unsigned_abs() > 2000, "{v}");
        assert_eq!(clock["checked_at"], json!(app.clock.now()), "{v}");
    } else {
        assert!(allowed);
        assert_eq!(clock["status"], "no_shared_clock", "{v}");
        assert!(clock["offset_ms"].is_null(), "{v}");
    }
}

/// An instance started with other `RAKUTEN_POLL_TASK_TYPES` /
/// `RAKUTEN_POLL_SHARDS` rewrites the stored schedule configuration for every instance (a WARN
/// in its own log, `ef5c945`), and the instances already running were never told. Each now reads
/// the stored configuration every 30 s (the schedule configuration job, driven here on the manual
/// clock): `/health`'s `schedule_config` says `differs` with both configurations, and the WARN is
/// logged once per stored value, not at every check (D-schedule-config-check).
#[super::lane]
#[tokio::test]
async fn a_running_instance_reports_a_schedule_configuration_another_instance_rewrote() {
    use card_polling::domain::TaskTypes;
    use rakuten_types::Clock;

    let app = spawn_seeded().await;
    let shards = app.settings.shards;
    let health = || async {
        let (s, v) = app.get("/health", ADMIN).await;
        assert_eq!(s, 200, "{v}");
        v["data"]["schedule_config"].clone()
    };
    let ours = json!({"shards": shards, "task_types": {"card_status": 300, "data_usage": 600, "package": 1800}});
    assert_eq!(
        health().await,
        json!({"status": "not_yet_checked", "checked_at": null, "instance": ours, "stored": null})
    );
    let check = app.schedule_config.run_once(app.clock.now()).await.unwrap();
    assert!(!check.differs && !check.warned, "{check:?}");
    assert_eq!(
        health().await,
        json!({"status": "same", "checked_at": app.clock.now(), "instance": ours, "stored": ours})
    );

    // Another instance starts without `package`: its start-up sync rewrites the stored
    // configuration for every instance.
    let theirs = TaskTypes::parse("card_status=300,data_usage=600").unwrap();
    app.store
        .schedule_sync(&theirs, shards, app.clock.now())
        .await
        .unwrap();
    app.advance(30);
    let check = app.schedule_config.run_once(app.clock.now()).await.unwrap();
    assert!(check.differs && check.warned, "{check:?}");
    let stored = json!({"shards": shards, "task_types": {"card_status": 300, "data_usage": 600}});
    assert_eq!(
        health().await,
        json!({"status": "differs", "checked_at": app.clock.now(), "instance": ours, "stored": stored})
    );
    // Still the same difference 30 s later: reported, not logged again.
    app.advance(30);
    let check = app.schedule_config.run_once(app.clock.now()).await.unwrap();
    assert!(check.differs && !check.warned, "{check:?}");
    // A further change (the shard count now) is a new WARN.
    app.store
        .schedule_sync(&theirs, shards + 1, app.clock.now())
        .await
        .unwrap();
    app.advance(30);
    let check = app.schedule_config.run_once(app.clock.now()).await.unwrap();
    assert!(check.differs && check.warned, "{check:?}");
    assert_eq!(health().await["stored"]["shards"], shards + 1);
    // Someone restarts an instance with this one's values: they agree again.
    app.store
        .schedule_sync(&app.settings.task_types, shards, app.clock.now())
        .await
        .unwrap();
    app.advance(30);
    let check = app.schedule_config.run_once(app.clock.now()).await.unwrap();
    assert!(!check.differs && !check.warned, "{check:?}");
    assert_eq!(health().await["status"], "same");
}

/// A TCP relay to the machine's Redis that the test can cut: after [`Relay::cut`] every relayed
/// connection is closed and new ones are refused, as when Redis goes away.
struct Relay {
    addr: std::net::SocketAddr,
    cut: tokio_util::sync::CancellationToken,
}

impl Relay {
    async fn to_redis() -> Relay {
        let target = reqwest::Url::parse(&redis_url()).expect("REDIS_URL_TEST");
        let target = format!(
            "{}:{}",
            target.host_str().unwrap_or("127.0.0.1"),
            target.port().unwrap_or(6379)
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = tokio_util::sync::CancellationToken::new();
        let stop = cut.clone();
        tokio::spawn(async move {
            loop {
                let mut inbound = tokio::select! {
                    () = stop.cancelled() => return, // drops the listener: refused from now on
                    accepted = listener.accept() => match accepted {
                        Ok((s, _)) => s,
                        Err(_) => continue,
                    },
                };
                let (stop, target) = (stop.clone(), target.clone());
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await else {
                        return;
                    };
                    tokio::select! {
                        () = stop.cancelled() => {}
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    }
                });
            }
        });
        Relay { addr, cut }
    }

    fn cut(&self) {
        self.cut.cancel();
    }
}

/// A Redis outage was not flagged anywhere but in `null` lane depths. The
/// full `/health` now says `hint_channel_reachable: false` (the status stays `ok`: hints are
/// lossy and the recovery read covers them) and `/metrics` has `cardpoll_hint_channel_up 0`
/// (D-metrics).
#[super::lane(redis)]
#[tokio::test]
async fn a_redis_outage_is_flagged_in_health_and_metrics_without_failing_them() {
    use card_polling::settings::{HintChannelSetting, Secret};

    let relay = Relay::to_redis().await;
    let url = format!("redis://{}/", relay.addr);
    let app = spawn_with(Backend::Redis, |s| {
        s.hint_channel = HintChannelSetting::Redis(Secret::new(url));
    })
    .await;
    let (s, v) = app.get("/health", ADMIN).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["data"]["hint_backend"], "redis", "{v}");
    assert_eq!(v["data"]["hint_channel_reachable"], true, "{v}");
    assert_eq!(value(&scrape(&app).await, "cardpoll_hint_channel_up", &[]), 1.0);

    relay.cut();
    let (s, v) = app.get("/health", ADMIN).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["data"]["status"], "ok", "{v}");
    assert_eq!(v["data"]["hint_channel_reachable"], false, "{v}");
    assert!(v["data"]["queues"][0]["hint_lane"].is_null(), "{v}");
    let s = scrape(&app).await;
    assert_eq!(value(&s, "cardpoll_hint_channel_up", &[]), 0.0);
    assert_eq!(value(&s, "cardpoll_database_up", &[]), 1.0);
    assert!(
        !s.samples
            .iter()
            .any(|x| x.metric == "cardpoll_lane_depth"
                && x.labels.get("lane") == Some("hint_channel")),
        "no depth is made up for a channel that did not answer"
    );
}

/// `/metrics?x=1` answered 200 while every documented route refuses a
/// query parameter it does not take. The probes and `/metrics` are outside the OpenAPI document
/// and now take no query parameters (D-unknown-query-parameters).
#[super::lane]
#[tokio::test]
async fn probes_and_metrics_refuse_query_parameters_they_do_not_take() {
    let app = spawn_app().await;
    for path in ["/metrics?x=1", "/livez?verbose=1", "/readyz?x="] {
        let (s, v) = app.send(reqwest::Method::GET, path, Some(ADMIN), None).await;
        assert_eq!((s, v["code"].as_i64()), (422, Some(1003)), "{path}: {v}");
        assert!(
            v["msg"].as_str().unwrap_or_default().contains("takes no query parameters"),
            "{path}: {v}"
        );
    }
    let (s, _) = app.raw(reqwest::Method::GET, "/metrics", Some(ADMIN)).await;
    assert_eq!(s, 200);
}
