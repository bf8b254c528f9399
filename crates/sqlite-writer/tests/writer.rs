//! The writer on its own: an abandoned write is skipped while the rest of its batch commits, and
//! a stopped writer answers `closed`. (Each service's tests cover it under its store: the
//! gateway's lease and crash tests, card-polling's `group_commit` tests.)

use futures::FutureExt;
use sqlite_writer::{Settings, Writer, WriterError};
use sqlx::{ConnectOptions, Connection, SqliteConnection};

#[derive(Debug, Clone, thiserror::Error)]
enum TestError {
    #[error("database: {0}")]
    Db(String),
    #[error("closed")]
    Closed,
    #[error("the disk is full")]
    Storage,
}

impl From<sqlx::Error> for TestError {
    fn from(e: sqlx::Error) -> Self {
        TestError::Db(e.to_string())
    }
}

impl WriterError for TestError {
    fn closed() -> Self {
        TestError::Closed
    }

    fn is_storage_failure(&self) -> bool {
        matches!(self, TestError::Storage)
    }
}

async fn open(path: &std::path::Path) -> SqliteConnection {
    let mut c = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
        .connect()
        .await
        .unwrap();
    sqlx::query("CREATE TABLE t (v INTEGER PRIMARY KEY)")
        .execute(&mut c)
        .await
        .unwrap();
    c
}

fn insert(v: i64) -> sqlite_writer::Transition<(), TestError> {
    insert_then(v, Ok(()))
}

/// Writes `v`, then answers `then`: an `Err` must roll the insert back (its savepoint).
fn insert_then(v: i64, then: Result<(), TestError>) -> sqlite_writer::Transition<(), TestError> {
    Box::new(move |c: &mut SqliteConnection| {
        async move {
            sqlx::query("INSERT INTO t (v) VALUES ($1)")
                .bind(v)
                .execute(&mut *c)
                .await?;
            then
        }
        .boxed()
    })
}

#[tokio::test]
async fn an_abandoned_write_is_skipped_and_the_rest_of_its_batch_commits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let writer = Writer::start(open(&path).await, Settings::default());
    // Queued, then dropped before the writer runs (the writer task has not been polled yet on
    // this single-threaded runtime): its caller is gone.
    let mut gone = Box::pin(writer.write_abandonable(insert(1)));
    let waker = futures::task::noop_waker();
    assert!(
        gone.as_mut()
            .poll(&mut std::task::Context::from_waker(&waker))
            .is_pending()
    );
    drop(gone);
    writer.write(insert(2)).await.unwrap();
    // A failing write (duplicate key) rolls back only itself.
    let dup = writer.write(insert(2)).await;
    assert!(matches!(dup, Err(TestError::Db(_))), "{dup:?}");
    writer.write(insert(3)).await.unwrap();
    writer.shutdown().await;
    assert!(matches!(
        writer.write(insert(4)).await,
        Err(TestError::Closed)
    ));

    let rows = committed(&path).await;
    assert_eq!(rows, vec![2, 3], "the abandoned write never ran");
    let (commits, ops) = writer.stats();
    assert_eq!(ops, 3, "the abandoned write is not counted");
    assert!(commits >= 1);
}

/// A synchronous write whose caller has gone before the writer reached it (a lease attempt of a
/// disconnected long-poll) is skipped like an asynchronous one; the rest of its batch commits.
#[tokio::test]
async fn an_abandoned_synchronous_write_is_skipped_and_the_rest_of_its_batch_commits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let writer = Writer::start(open(&path).await, Settings::default());
    let mut gone = Box::pin(writer.write_sync_abandonable(insert_sync(1, Ok(()))));
    let mut kept = Box::pin(writer.write_sync_abandonable(insert_sync(2, Ok(()))));
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(gone.as_mut().poll(&mut cx).is_pending());
    assert!(kept.as_mut().poll(&mut cx).is_pending());
    drop(gone);
    kept.await.unwrap();
    writer.write_sync(insert_sync(3, Ok(()))).await.unwrap();
    writer.shutdown().await;
    assert_eq!(
        committed(&path).await,
        vec![2, 3],
        "the abandoned write never ran"
    );
    assert_eq!(writer.stats().1, 2, "the abandoned write is not counted");
}

/// One batch of five: ok, failed after writing, abandoned, ok, abandoned (last). Each operation's
/// end releases its savepoint and opens the next one in one round trip; an abandoned operation in
/// the middle or at the end leaves no savepoint open and the batch commits once.
#[tokio::test]
async fn one_batch_rolls_back_only_its_failed_write_around_abandoned_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let writer = Writer::start(open(&path).await, Settings::default());
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    // Every write is queued before the writer task runs (single-threaded runtime).
    let mut first = Box::pin(writer.write(insert(10)));
    let mut failed = Box::pin(writer.write(insert_then(
        11,
        Err(TestError::Db("refused after writing".into())),
    )));
    let mut gone_middle = Box::pin(writer.write_abandonable(insert(12)));
    let mut fourth = Box::pin(writer.write(insert(13)));
    let mut gone_last = Box::pin(writer.write_abandonable(insert(14)));
    assert!(first.as_mut().poll(&mut cx).is_pending());
    assert!(failed.as_mut().poll(&mut cx).is_pending());
    assert!(gone_middle.as_mut().poll(&mut cx).is_pending());
    assert!(fourth.as_mut().poll(&mut cx).is_pending());
    assert!(gone_last.as_mut().poll(&mut cx).is_pending());
    drop(gone_middle);
    drop(gone_last);
    first.await.unwrap();
    assert!(matches!(failed.await, Err(TestError::Db(m)) if m == "refused after writing"));
    fourth.await.unwrap();
    // The connection is still usable: no savepoint was left open.
    writer.write(insert(15)).await.unwrap();
    let (commits, ops) = writer.stats();
    writer.shutdown().await;
    assert_eq!(
        (commits, ops),
        (2, 4),
        "one batch of three, then one of one"
    );

    let rows = committed(&path).await;
    assert_eq!(rows, vec![10, 13, 15]);
}

/// Runs `sql` and reports success: `ROLLBACK` ends the batch's transaction behind the writer's
/// back, as SQLite itself does after an I/O error or a full disk.
fn run_sql(sql: &'static str) -> sqlite_writer::Transition<(), TestError> {
    Box::new(move |c: &mut SqliteConnection| {
        async move {
            sqlx::query(sql).execute(&mut *c).await?;
            Ok(())
        }
        .boxed()
    })
}

/// The committed values of `t`, read by a connection of its own.
async fn committed(path: &std::path::Path) -> Vec<i64> {
    let mut c = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .connect()
        .await
        .unwrap();
    sqlx::query_scalar("SELECT v FROM t ORDER BY v")
        .fetch_all(&mut c)
        .await
        .unwrap()
}

/// D-writes-failing-is-503-and-unready: after one COMMIT failed on a full disk, SQLite had rolled
/// the transaction back itself, sqlx's ROLLBACK then failed, its transaction count stayed at 1
/// and every later batch was refused ("attempted to call begin_with at non-zero transaction
/// depth") until a restart. The batch whose transaction SQLite ended fails as a whole, the
/// writer says it is failing, and the next batch commits.
#[tokio::test]
async fn the_writer_recovers_when_sqlite_ended_a_batchs_transaction_itself() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let writer = Writer::start(open(&path).await, Settings::default());
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    let mut before = Box::pin(writer.write(insert(1)));
    let mut ender = Box::pin(writer.write(run_sql("ROLLBACK")));
    assert!(before.as_mut().poll(&mut cx).is_pending());
    assert!(ender.as_mut().poll(&mut cx).is_pending());
    assert!(matches!(before.await, Err(TestError::Db(_))));
    assert!(matches!(ender.await, Err(TestError::Db(_))));
    assert!(writer.failing(), "a failed batch is reported");

    for v in 2..5 {
        writer
            .write(insert(v))
            .await
            .expect("the next batches commit");
    }
    assert!(!writer.failing());
    writer.shutdown().await;
    let rows = committed(&path).await;
    assert_eq!(rows, vec![2, 3, 4], "the failed batch left nothing");
}

/// A COMMIT that fails (here a deferred foreign key, checked only at COMMIT) fails every
/// operation of its batch, leaves nothing, and the writer goes on with the next batch.
#[tokio::test]
async fn a_failed_commit_fails_its_whole_batch_and_the_next_one_commits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let mut conn = open(&path).await;
    sqlx::raw_sql(
        "PRAGMA foreign_keys = ON; \
         CREATE TABLE child (p INTEGER REFERENCES t (v) DEFERRABLE INITIALLY DEFERRED)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let writer = Writer::start(conn, Settings::default());
    let orphan = run_sql("INSERT INTO child (p) VALUES (99)");
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    let mut ok = Box::pin(writer.write(insert(1)));
    let mut bad = Box::pin(writer.write(orphan));
    assert!(ok.as_mut().poll(&mut cx).is_pending());
    assert!(bad.as_mut().poll(&mut cx).is_pending());
    let (ok, bad) = (ok.await, bad.await);
    assert!(
        matches!((&ok, &bad), (Err(TestError::Db(a)), Err(TestError::Db(b))) if a == b && a.contains("FOREIGN KEY")),
        "{ok:?} {bad:?}"
    );
    assert!(writer.failing());
    writer
        .write(insert(2))
        .await
        .expect("the next batch commits");
    assert!(!writer.failing());
    assert_eq!(writer.stats(), (1, 1), "only the last batch committed");
    writer.shutdown().await;
}

/// Held by every test that opens a writer on its own threads (`Writer::open`): some count this
/// process's threads by name, which tests running beside them would change.
static OPENED_WRITERS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits, bounded (5 s), until a thread named `name` runs (`present`) or has ended.
async fn wait_for_thread(name: &str, present: bool) {
    let mut left = 500;
    while threads().iter().any(|(n, _)| n == name) != present {
        left -= 1;
        assert!(
            left > 0,
            "thread {name} present={}, wanted {present}: {:?}",
            !present,
            threads()
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Each thread of this process: its name and the CPUs it may run on.
fn threads() -> Vec<(String, Vec<usize>)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let Ok(tid) = task.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(name) = std::fs::read_to_string(task.path().join("comm")) else {
            continue; // the thread ended meanwhile
        };
        let Some(pid) = rustix::process::Pid::from_raw(tid) else {
            continue;
        };
        let Ok(set) = rustix::thread::sched_getaffinity(Some(pid)) else {
            continue;
        };
        let cpus = (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect();
        out.push((name.trim().to_owned(), cpus));
    }
    out
}

/// D-writer-thread-one-cpu: `Writer::open` runs the writer on a thread of its own, held to one CPU together
/// with the sqlx thread of its connection, and writes through it commit and survive shutdown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opened_writer_runs_on_one_cpu_with_its_connections_thread_and_commits() {
    let _alone = OPENED_WRITERS.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    open(&path).await.close().await.unwrap();
    let opts = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal);
    let writer = Writer::<TestError>::open(opts, Settings::default())
        .await
        .unwrap();
    let all = threads();
    let held: Vec<_> = all.iter().filter(|(n, _)| n == "sqlite-writer").collect();
    assert_eq!(held.len(), 1, "one writer thread: {all:?}");
    let cpus = &held[0].1;
    assert_eq!(cpus.len(), 1, "held to one CPU: {all:?}");
    assert!(
        all.iter()
            .any(|(n, c)| n.starts_with("sqlx-sqlite-wor") && c == cpus),
        "its connection's thread shares the CPU: {all:?}"
    );
    let (a, b) = tokio::join!(writer.write(insert(1)), writer.write(insert(2)));
    a.unwrap();
    b.unwrap();
    writer.shutdown().await;
    assert!(matches!(
        writer.write(insert(3)).await,
        Err(TestError::Closed)
    ));
    // The thread ends right after it answered the shutdown (its runtime is dropped then).
    wait_for_thread("sqlite-writer", false).await;
    assert_eq!(committed(&path).await, vec![1, 2]);
}

/// A file that cannot be opened is the caller's error, not a writer that never answers.
#[tokio::test]
async fn opening_a_writer_on_an_unopenable_file_fails() {
    let _alone = OPENED_WRITERS.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let opts = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(dir.path().join("missing-dir/w.db"))
        .create_if_missing(true);
    assert!(
        Writer::<TestError>::open(opts, Settings::default())
            .await
            .is_err()
    );
}

/// On a nearly full disk the scheduler's small commits went through while
/// every client write failed, so readiness flapped back to ready between them. A write that
/// fails for storage reasons keeps the writer failing for `FAILING_WINDOW`, however many batches
/// commit meanwhile; an operation's other errors never count.
#[tokio::test]
async fn a_storage_failure_of_one_write_keeps_the_writer_failing_for_the_window_while_others_commit()
 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let writer = Writer::start(open(&path).await, Settings::default());
    let refused = writer
        .write(insert_then(1, Err(TestError::Db("a conflict".into()))))
        .await;
    assert!(matches!(refused, Err(TestError::Db(_))));
    assert!(
        !writer.failing(),
        "an operation's own error is not the database failing"
    );
    let full = writer.write(insert_then(2, Err(TestError::Storage))).await;
    assert!(matches!(full, Err(TestError::Storage)));
    assert!(writer.failing());
    writer.write(insert(3)).await.unwrap();
    let now = std::time::Instant::now();
    assert!(writer.failing_at(now), "a later commit does not clear it");
    assert!(
        !writer.failing_at(now + sqlite_writer::FAILING_WINDOW),
        "cleared once the window passed without another storage failure"
    );
    assert_eq!(committed(&path).await, vec![3]);
}

/// Marks of the writer opened with `sync_after_commit`, in order (the only test that sets marks).
static MARKS: std::sync::Mutex<Vec<sqlite_writer::Mark>> = std::sync::Mutex::new(Vec::new());

fn record(m: sqlite_writer::Mark) {
    MARKS.lock().unwrap().push(m);
}

/// D-writer-syncer-thread: with `sync_after_commit` the write connection commits with `synchronous=NORMAL`
/// and no answer goes out before an `fdatasync` of the WAL that began after the answer's own
/// commit, whichever batch each of 64 concurrent writes fell into. When that sync fails (here:
/// the WAL's name was unlinked, so it cannot be opened), the writes fail and the writer reports
/// failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_sync_after_commit_every_answer_waits_for_the_wals_fdatasync_after_its_commit() {
    let _alone = OPENED_WRITERS.lock().await;
    use sqlite_writer::Mark;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    open(&path).await.close().await.unwrap();
    let opts = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
        .synchronous(sqlx::sqlite::SqliteSynchronous::Full);
    let settings = Settings {
        marks: Some(record),
        sync_after_commit: true,
        ..Settings::default()
    };
    let writer = std::sync::Arc::new(Writer::<TestError>::open(opts, settings).await.unwrap());
    let mut tasks = Vec::new();
    for v in 0..64_i64 {
        let writer = writer.clone();
        tasks.push(tokio::spawn(async move {
            let (ran_at, synchronous) = writer
                .write(Box::new(move |c: &mut SqliteConnection| {
                    async move {
                        sqlx::query("INSERT INTO t (v) VALUES ($1)")
                            .bind(v)
                            .execute(&mut *c)
                            .await?;
                        let s: i64 = sqlx::query_scalar("PRAGMA synchronous")
                            .fetch_one(&mut *c)
                            .await?;
                        Ok((MARKS.lock().unwrap().len(), s))
                    }
                    .boxed()
                }))
                .await
                .unwrap();
            assert_eq!(synchronous, 1, "the writer commits with synchronous=NORMAL");
            let marks = MARKS.lock().unwrap().clone();
            let after = &marks[ran_at..];
            let commit = after
                .iter()
                .position(|m| *m == Mark::CommitDone)
                .expect("its batch's commit is marked before the answer");
            assert!(
                after[commit..].contains(&Mark::Synced),
                "write {v} was answered before a sync that followed its commit: {after:?}"
            );
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(committed(&path).await.len(), 64);

    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::remove_file(&wal).unwrap();
    assert!(
        writer.write(insert(1000)).await.is_err(),
        "an unsynced write is not answered Ok"
    );
    assert!(writer.failing(), "a failed sync is the writer failing");
    writer.shutdown().await;
}

/// A synchronous [`insert_then`]: runs on the writer's thread on the connection's handle.
fn insert_sync(
    v: i64,
    then: Result<(), TestError>,
) -> sqlite_writer::SyncTransition<(), TestError> {
    Box::new(move |db: &rusqlite::Connection| {
        db.prepare_cached("INSERT INTO t (v) VALUES (?1)")
            .and_then(|mut st| st.execute([v]))
            .map_err(|e| TestError::from(sqlite_writer::sqlx_error(e)))?;
        then.clone()
    })
}

/// [`insert_sync`] that counts its runs in `runs`.
fn counted_insert_sync(
    v: i64,
    then: Result<(), TestError>,
    runs: &std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> sqlite_writer::SyncTransition<(), TestError> {
    let runs = runs.clone();
    let mut op = insert_sync(v, then);
    Box::new(move |db: &rusqlite::Connection| {
        runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        op(db)
    })
}

/// Synchronous operations run optimistically, without a savepoint each (D-writer-savepoints). A batch
/// where none fails runs each once. When one fails after writing, the segment is rolled back —
/// to the transaction's start when the segment began it, to the segment's savepoint after a sqlx
/// operation — and run again with a savepoint each: the operations up to the failed one run
/// twice, those after it once; the failed one's write is gone and everything else commits, in
/// one commit per batch.
#[tokio::test]
async fn synchronous_writes_run_once_unless_one_fails_and_then_their_segment_runs_again_with_savepoints()
 {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let writer = Writer::start(open(&path).await, Settings::default());
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    let runs: Vec<Arc<AtomicUsize>> = (0..9).map(|_| Arc::new(AtomicUsize::new(0))).collect();
    let refused = || Err(TestError::Db("refused after writing".into()));

    // Batch 1: three that succeed.
    let mut clean: Vec<_> = (0..3)
        .map(|k| Box::pin(writer.write_sync(counted_insert_sync(k as i64 + 1, Ok(()), &runs[k]))))
        .collect();
    for f in &mut clean {
        assert!(f.as_mut().poll(&mut cx).is_pending());
    }
    for f in clean {
        f.await.unwrap();
    }
    let counts = |r: &[Arc<AtomicUsize>]| r.iter().map(|c| c.load(SeqCst)).collect::<Vec<_>>();
    assert_eq!(counts(&runs[0..3]), vec![1, 1, 1]);
    assert_eq!(writer.stats(), (1, 3));

    // Batch 2: the segment begins the transaction; its second operation fails after writing.
    let mut a = Box::pin(writer.write_sync(counted_insert_sync(10, Ok(()), &runs[3])));
    let mut b = Box::pin(writer.write_sync(counted_insert_sync(11, refused(), &runs[4])));
    let mut c = Box::pin(writer.write_sync(counted_insert_sync(12, Ok(()), &runs[5])));
    for f in [&mut a, &mut b, &mut c] {
        assert!(f.as_mut().poll(&mut cx).is_pending());
    }
    a.await.unwrap();
    assert!(matches!(b.await, Err(TestError::Db(m)) if m == "refused after writing"));
    c.await.unwrap();
    assert_eq!(counts(&runs[3..6]), vec![2, 2, 1]);
    assert_eq!(writer.stats(), (2, 6));

    // Batch 3: a sqlx write first, so the synchronous segment runs inside a savepoint of its
    // own; its first operation fails after writing (a duplicate key, SQLite's own error).
    let mut d = Box::pin(writer.write(insert(20)));
    let mut e = Box::pin(writer.write_sync(counted_insert_sync(1, Ok(()), &runs[6])));
    let mut f = Box::pin(writer.write_sync(counted_insert_sync(21, Ok(()), &runs[7])));
    let mut g = Box::pin(writer.write_sync(counted_insert_sync(22, refused(), &runs[8])));
    assert!(d.as_mut().poll(&mut cx).is_pending());
    for h in [&mut e, &mut f, &mut g] {
        assert!(h.as_mut().poll(&mut cx).is_pending());
    }
    d.await.unwrap();
    assert!(matches!(e.await, Err(TestError::Db(m)) if m.contains("(code: 1555)")));
    f.await.unwrap();
    assert!(g.await.is_err());
    assert_eq!(counts(&runs[6..9]), vec![2, 1, 1]);
    assert_eq!(writer.stats(), (3, 10));

    writer.shutdown().await;
    assert_eq!(committed(&path).await, vec![1, 2, 3, 10, 12, 20, 21]);
}

/// One batch mixing synchronous and sqlx operations (D-writer-sync-transitions): sync, sync failing after its
/// insert, sqlx, sqlx duplicate, sync, sync duplicate. It commits once; each failed operation
/// rolls back only itself, whichever kind it is and wherever the segments change; SQLite's
/// constraint error keeps its extended code through `sqlx_error`; the connection stays usable by
/// both kinds afterwards and closes cleanly with rusqlite's cached statements finalized.
#[tokio::test]
async fn synchronous_and_sqlx_writes_share_one_batch_and_each_failure_rolls_back_only_itself() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let writer = Writer::start(open(&path).await, Settings::default());
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    let mut a = Box::pin(writer.write_sync(insert_sync(1, Ok(()))));
    let mut b = Box::pin(writer.write_sync(insert_sync(
        2,
        Err(TestError::Db("refused after writing".into())),
    )));
    let mut c = Box::pin(writer.write(insert(3)));
    let mut d = Box::pin(writer.write(insert(1)));
    let mut e = Box::pin(writer.write_sync(insert_sync(4, Ok(()))));
    let mut f = Box::pin(writer.write_sync(insert_sync(3, Ok(()))));
    // Queued in this order (the writer task has not run yet on this single-threaded runtime).
    assert!(a.as_mut().poll(&mut cx).is_pending());
    assert!(b.as_mut().poll(&mut cx).is_pending());
    assert!(c.as_mut().poll(&mut cx).is_pending());
    assert!(d.as_mut().poll(&mut cx).is_pending());
    assert!(e.as_mut().poll(&mut cx).is_pending());
    assert!(f.as_mut().poll(&mut cx).is_pending());
    a.await.unwrap();
    assert!(matches!(b.await, Err(TestError::Db(m)) if m == "refused after writing"));
    c.await.unwrap();
    assert!(matches!(d.await, Err(TestError::Db(_))));
    e.await.unwrap();
    let dup = f.await;
    // SQLITE_CONSTRAINT_PRIMARYKEY, as sqlx's own SqliteError would report it.
    assert!(
        matches!(&dup, Err(TestError::Db(m)) if m.contains("(code: 1555)")),
        "{dup:?}"
    );
    let (commits, ops) = writer.stats();
    assert_eq!((commits, ops), (1, 6), "one batch, one commit");
    writer.write_sync(insert_sync(5, Ok(()))).await.unwrap();
    writer.write(insert(6)).await.unwrap();
    writer.shutdown().await;
    assert_eq!(committed(&path).await, vec![1, 3, 4, 5, 6]);
}

/// Synchronous operations through an opened writer (its own thread, `sync_after_commit`): many
/// callers at once, every answer after its commit, all rows there afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronous_writes_from_many_callers_all_commit_through_an_opened_writer() {
    let _alone = OPENED_WRITERS.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    drop(open(&path).await);
    let opts = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal);
    let writer = std::sync::Arc::new(
        Writer::<TestError>::open(
            opts,
            Settings {
                sync_after_commit: true,
                ..Settings::default()
            },
        )
        .await
        .unwrap(),
    );
    let mut callers = Vec::new();
    for w in 0..8i64 {
        let writer = writer.clone();
        callers.push(tokio::spawn(async move {
            for k in 0..50i64 {
                let v = w * 1000 + k;
                if k % 5 == 0 {
                    writer.write(insert(v)).await.unwrap();
                } else {
                    writer.write_sync(insert_sync(v, Ok(()))).await.unwrap();
                }
            }
        }));
    }
    for c in callers {
        c.await.unwrap();
    }
    writer.shutdown().await;
    let rows = committed(&path).await;
    assert_eq!(rows.len(), 400);
}

/// D-wal-checkpoint-thread: with `sync_after_commit` a thread of its own, `sqlite-checkpointer`, copies the
/// WAL into the database file while the writer goes on (the writer's own autocheckpoint waits
/// for 10,000 pages, far more than written here), and ends with the writer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_sync_after_commit_a_checkpoint_thread_copies_the_wal_into_the_database_file() {
    let _alone = OPENED_WRITERS.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    open(&path).await.close().await.unwrap();
    let opts = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal);
    let writer = Writer::<TestError>::open(
        opts,
        Settings {
            sync_after_commit: true,
            ..Settings::default()
        },
    )
    .await
    .unwrap();
    // Thread names are cut to 15 bytes; the thread names itself once it runs.
    wait_for_thread("sqlite-checkpoi", true).await;
    let before = std::fs::metadata(&path).unwrap().len();
    writer
        .write_sync(Box::new(|db: &rusqlite::Connection| {
            db.execute_batch("CREATE TABLE pad (v INTEGER PRIMARY KEY, b BLOB)")
                .map_err(|e| TestError::from(sqlite_writer::sqlx_error(e)))
        }))
        .await
        .unwrap();
    for v in 0..600i64 {
        writer
            .write_sync(Box::new(move |db: &rusqlite::Connection| {
                db.execute("INSERT INTO pad (v, b) VALUES (?1, zeroblob(4096))", [v])
                    .map(|_| ())
                    .map_err(|e| TestError::from(sqlite_writer::sqlx_error(e)))
            }))
            .await
            .unwrap();
    }
    // 600 pages of 4 KiB sit in the WAL; the database file grows once they are copied into it.
    let mut left = 1000;
    while std::fs::metadata(&path).unwrap().len() < before + 2_000_000 {
        left -= 1;
        assert!(
            left > 0,
            "no checkpoint copied the WAL into {} within 20 s",
            path.display()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    writer.shutdown().await;
    wait_for_thread("sqlite-checkpoi", false).await;
}

/// D-one-process-per-sqlite-file: through a symlink to the database file a second
/// process took a lock of its own (`link.db.lock`) and wrote beside the first; and with
/// `sync_after_commit` the syncer fsynced `link.db-wal`, which does not exist (SQLite writes the WAL
/// next to the real file), so every write failed. Both now resolve the path first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_to_the_database_file_meets_its_lock_and_its_wal() {
    let _alone = OPENED_WRITERS.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.db");
    open(&real).await.close().await.unwrap();
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&real, &link).unwrap();

    let held = sqlite_writer::FileLock::acquire(&real).unwrap();
    let refused = sqlite_writer::FileLock::acquire(&link).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::WouldBlock);
    let text = refused.to_string();
    assert!(text.contains("real.db.lock"), "{text}");
    assert!(
        text.contains(&format!("pid {}", std::process::id())),
        "names its holder: {text}"
    );
    assert!(!dir.path().join("link.db.lock").exists());
    drop(held);

    let opts = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&link)
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal);
    let writer = Writer::<TestError>::open(
        opts,
        Settings {
            sync_after_commit: true,
            ..Settings::default()
        },
    )
    .await
    .unwrap();
    writer.write(insert(7)).await.unwrap();
    writer.write_sync(insert_sync(8, Ok(()))).await.unwrap();
    assert!(!writer.failing());
    writer.shutdown().await;
    assert_eq!(committed(&real).await, vec![7, 8]);
}

/// Batches begun, counted by the `marks` hook of [`queued_writes_fail_with_the_batch_whose_begin_met_the_lock`].
static BEGUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn count_begins(m: sqlite_writer::Mark) {
    if m == sqlite_writer::Mark::BatchBegin {
        BEGUN.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// D-writer-failed-begin-fails-queue: while another connection holds the write lock, the first batch waits out the
/// busy timeout and fails; the writes queued behind it fail with it instead of each batch
/// waiting the timeout again (card-polling answered after twice its bound, behind its
/// scheduler's writes). Three writes, one per batch: one `BEGIN`, three 503-class answers.
#[tokio::test]
async fn queued_writes_fail_with_the_batch_whose_begin_met_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let mut conn = open(&path).await;
    sqlx::query("PRAGMA busy_timeout = 200")
        .execute(&mut conn)
        .await
        .unwrap();
    let mut lock = open_second(&path).await;
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut lock)
        .await
        .unwrap();
    let writer = Writer::start(
        conn,
        Settings {
            max_batch: 1,
            marks: Some(count_begins),
            ..Settings::default()
        },
    );
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    let mut a = Box::pin(writer.write(insert(1)));
    let mut b = Box::pin(writer.write_sync(insert_sync(2, Ok(()))));
    let mut c = Box::pin(writer.write(insert(3)));
    assert!(a.as_mut().poll(&mut cx).is_pending());
    assert!(b.as_mut().poll(&mut cx).is_pending());
    assert!(c.as_mut().poll(&mut cx).is_pending());
    for answer in [a.await, b.await, c.await] {
        assert!(
            matches!(&answer, Err(TestError::Db(m)) if m.contains("locked")),
            "{answer:?}"
        );
    }
    assert_eq!(BEGUN.load(std::sync::atomic::Ordering::SeqCst), 1);
    sqlx::query("ROLLBACK").execute(&mut lock).await.unwrap();
    writer.write(insert(4)).await.unwrap();
    writer.shutdown().await;
    assert_eq!(committed(&path).await, vec![4]);
}

/// A second connection to the database at `path` (already created by [`open`]).
async fn open_second(path: &std::path::Path) -> SqliteConnection {
    sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .connect()
        .await
        .unwrap()
}

/// D-one-process-per-sqlite-file: a second gateway on a hard link of the first one's file
/// met no lock (the lock sits beside a name, and a hard link is another name of the same file),
/// and both handed out the same task; two card-polling processes corrupted the file. A database
/// file with more than one name is refused before anything opens it, by either name.
#[test]
fn a_database_file_with_a_second_hard_link_is_refused_by_either_name() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("a.db");
    std::fs::write(&first, b"").unwrap();
    drop(sqlite_writer::FileLock::acquire(&first).expect("one name: taken"));
    let second = dir.path().join("b.db");
    std::fs::hard_link(&first, &second).unwrap();
    for name in [&first, &second] {
        let refused = sqlite_writer::FileLock::acquire(name).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::InvalidInput);
        let text = refused.to_string();
        assert!(text.contains("has 2 names (hard links)"), "{text}");
    }
    std::fs::remove_file(&second).unwrap();
    drop(sqlite_writer::FileLock::acquire(&first).expect("one name again: taken"));
}
