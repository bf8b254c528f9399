//! The checkpoint thread of [`sync_after_commit`](crate::Settings::sync_after_commit)
//! (D-wal-checkpoint-thread), also started by a store of its own ([`Checkpointer::spawn`]).

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::oneshot;

/// How often the checkpoint thread of [`sync_after_commit`](crate::Settings::sync_after_commit)
/// copies the WAL into the database file (`PRAGMA wal_checkpoint(PASSIVE)`).
pub const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);

/// The writer's own `wal_autocheckpoint` with
/// [`sync_after_commit`](crate::Settings::sync_after_commit), in pages (40 MiB at 4 KiB pages): a
/// backstop. The checkpoint thread copies frames while the writer keeps appending, so it rarely
/// finds the WAL fully copied at the moment the writer could start it over; the writer's own
/// checkpoint, run between two of its batches, always does, and finds little left to copy. So the
/// WAL stays under about this size (unless a reader holds an old snapshot for long, as with any
/// checkpoint).
pub const BACKSTOP_CHECKPOINT_PAGES: u32 = 10_000;

/// The checkpoint thread of [`sync_after_commit`](crate::Settings::sync_after_commit) (D-wal-checkpoint-thread):
/// a connection of its own runs `PRAGMA wal_checkpoint(PASSIVE)` every [`CHECKPOINT_EVERY`], so the
/// writer no longer stops every 1,000 pages to copy the WAL into the database file and `fsync` both
/// (SQLite's default autocheckpoint, on the committing connection). A passive checkpoint waits for
/// no reader or writer; it copies what no reader still needs. A writer without
/// [`sync_after_commit`](crate::Settings::sync_after_commit) (the gateway's) gets the same by
/// starting one itself and opening its write connection with `wal_autocheckpoint` at
/// [`BACKSTOP_CHECKPOINT_PAGES`].
pub struct Checkpointer {
    stop: std::sync::mpsc::Sender<()>,
    /// Answered when the thread has ended.
    done: oneshot::Receiver<()>,
}

impl std::fmt::Debug for Checkpointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpointer").finish_non_exhaustive()
    }
}

impl Checkpointer {
    /// Starts the thread `sqlite-checkpointer` on a connection of its own to `db_file` (a
    /// database in WAL mode), checkpointing every `every`.
    ///
    /// # Errors
    /// When the file cannot be opened or the thread cannot be started.
    pub fn spawn(
        db_file: PathBuf,
        every: Duration,
    ) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let db = rusqlite::Connection::open_with_flags(
            &db_file,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        // Never checkpoints on its own account (it commits nothing), and never waits for a lock.
        db.busy_timeout(Duration::ZERO)?;
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let (done_tx, done) = oneshot::channel();
        std::thread::Builder::new()
            .name("sqlite-checkpointer".into())
            .spawn(move || {
                let mut failing = false;
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(every)
                {
                    let ran = db.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
                        r.get::<_, i64>(0)
                    });
                    match ran {
                        Ok(_) if failing => {
                            failing = false;
                            tracing::info!(file = %db_file.display(), "WAL checkpoints succeed again");
                        }
                        Ok(_) => {}
                        Err(e) if !failing => {
                            failing = true;
                            tracing::warn!(error = %e, file = %db_file.display(),
                                "WAL checkpoint failed; retrying every {every:?}, the writer's own checkpoint still bounds the WAL");
                        }
                        Err(_) => {}
                    }
                }
                drop(db);
                let _ = done_tx.send(());
            })?;
        Ok(Checkpointer { stop, done })
    }

    /// Stops the thread (after the checkpoint it may be running) and waits for it to end.
    pub async fn finish(self) {
        drop(self.stop);
        if self.done.await.is_err() {
            tracing::error!(
                "the checkpoint thread ended without closing its connection (it panicked)"
            );
        }
    }
}
