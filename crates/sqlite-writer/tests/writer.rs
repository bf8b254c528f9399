//! The writer on its own: an abandoned write is skipped while the rest of its batch commits, and
//! a stopped writer answers `closed`. (Each service's tests cover it under its store: the
//! gateway's lease and crash tests, card-polling's `group_commit` tests.)

use futures::FutureExt;
use sqlite_writer::{Settings, Writer, WriterError};
use sqlx::{ConnectOptions, SqliteConnection};

#[derive(Debug, Clone, thiserror::Error)]
enum TestError {
    #[error("database: {0}")]
    Db(String),
    #[error("closed")]
    Closed,
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

    let mut c = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .connect()
        .await
        .unwrap();
    let rows: Vec<i64> = sqlx::query_scalar("SELECT v FROM t ORDER BY v")
        .fetch_all(&mut c)
        .await
        .unwrap();
    assert_eq!(rows, vec![2, 3], "the abandoned write never ran");
    let (commits, ops) = writer.stats();
    assert_eq!(ops, 3, "the abandoned write is not counted");
    assert!(commits >= 1);
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

    let mut c = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .connect()
        .await
        .unwrap();
    let rows: Vec<i64> = sqlx::query_scalar("SELECT v FROM t ORDER BY v")
        .fetch_all(&mut c)
        .await
        .unwrap();
    assert_eq!(rows, vec![10, 13, 15]);
}
