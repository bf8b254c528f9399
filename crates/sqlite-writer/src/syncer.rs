//! The syncer thread of [`sync_after_commit`](crate::Settings::sync_after_commit)
//! (D-writer-syncer-thread): the WAL's `fdatasync` off the writer's path, the answers after it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::oneshot;

use crate::{Finish, Mark, Settings, WriteStats, WriterError, mark};

/// A committed batch waiting for the WAL's `fdatasync`
/// ([`sync_after_commit`](crate::Settings::sync_after_commit)).
pub(crate) struct Committed<E> {
    pub(crate) finishes: Vec<Finish<E>>,
    /// Operations in it.
    pub(crate) n: u64,
    /// When its `BEGIN` was sent: the commit hook's duration runs to the end of the sync.
    pub(crate) started: Instant,
}

/// The syncer thread of [`sync_after_commit`](crate::Settings::sync_after_commit): each round takes
/// every batch committed since the last one, `fdatasync`s the WAL once (the WAL is appended in
/// commit order, so one sync makes every earlier commit durable too) and answers them, in commit
/// order.
pub(crate) struct Syncer<E> {
    tx: std::sync::mpsc::Sender<Committed<E>>,
    /// Answered when the thread has answered everything and ended.
    done: oneshot::Receiver<()>,
}

impl<E: WriterError> Syncer<E> {
    pub(crate) fn spawn(
        wal: PathBuf,
        stats: Arc<WriteStats>,
        settings: Settings,
    ) -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::channel::<Committed<E>>();
        let (done_tx, done) = oneshot::channel();
        std::thread::Builder::new()
            .name("sqlite-syncer".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut round = vec![first];
                    round.extend(rx.try_iter());
                    // Opened each round (a few µs against the fsync's hundreds): the WAL is
                    // never replaced while the writer's connection is open, but a handle kept
                    // across rounds would have to trust that.
                    let synced = std::fs::File::open(&wal).and_then(|f| f.sync_data());
                    mark(&settings, Mark::Synced);
                    let failed = match synced {
                        Ok(()) => None,
                        Err(e) => {
                            tracing::error!(error = %e, wal = %wal.display(),
                                "fdatasync of the WAL failed; the batches it would have made durable fail");
                            let e = E::from(sqlx::Error::Io(e));
                            stats.batch_failed(&e);
                            Some(e)
                        }
                    };
                    for batch in round {
                        if failed.is_none()
                            && let Some(hook) = stats.on_commit.get()
                        {
                            hook(batch.n, batch.started.elapsed());
                        }
                        for finish in batch.finishes {
                            finish(failed.clone());
                        }
                    }
                }
                let _ = done_tx.send(());
            })?;
        Ok(Syncer { tx, done })
    }

    /// Queues a committed batch for the next sync; if the syncer thread is gone (it panicked),
    /// the batch's operations fail as a closed writer's would: their commit is not known durable.
    pub(crate) fn hand_over(&self, batch: Committed<E>) {
        if let Err(std::sync::mpsc::SendError(batch)) = self.tx.send(batch) {
            tracing::error!("the syncer thread is gone; failing a committed batch unsynced");
            for finish in batch.finishes {
                finish(Some(E::closed()));
            }
        }
    }

    /// Lets the thread sync and answer what it holds, and waits for it to end.
    pub(crate) async fn finish(self) {
        drop(self.tx);
        if self.done.await.is_err() {
            tracing::error!("the syncer thread ended without answering (it panicked)");
        }
    }
}
