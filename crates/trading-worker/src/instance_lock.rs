//! One worker process per journal: an exclusive, non-blocking OS file lock on
//! `{RAKUTEN_TRADING_DB_PATH}.lock`, held for the life of the [`crate::Worker`] (D-worker-journal-lock).
//!
//! Why: the gateway re-grants a worker's own active task to that `worker_id` first (that is how
//! reclaims and lost lease responses reach a worker behind NAT). Two processes with the same id
//! therefore take the task from each other on every poll — a livelock of 6002s and recovery
//! checks — and two processes sharing one journal would both act as its authority. The OS
//! releases the lock when the process exits or crashes, so a stale lock file never blocks a
//! restart.

use std::ffi::OsString;
use std::fs::{File, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rakuten_types::WorkerId;

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum InstanceLockError {
    /// Another process (or another [`crate::Worker`] in this process) holds the lock.
    #[error(
        "another trading-worker already uses the journal {db}: lock file {lock} is held{holder} \
         (this worker_id: {worker_id}). Two worker processes must never share a journal or a \
         worker_id: the gateway re-grants a worker's active task to that worker_id first, so two \
         processes with one id take the task from each other on every poll. Stop the other \
         process, or give this one its own RAKUTEN_WORKER_ID and RAKUTEN_TRADING_DB_PATH."
    )]
    Held {
        /// The journal path.
        db: PathBuf,
        /// The lock file path.
        lock: PathBuf,
        /// What the holder wrote into the lock file (` by pid …, worker_id …`), or empty.
        holder: String,
        /// This process's worker id.
        worker_id: WorkerId,
    },
    /// The lock file cannot be created or locked.
    #[error("cannot lock {lock}: {source}")]
    Io {
        /// The lock file path.
        lock: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// The held lock; dropping it (or the process ending) releases it.
#[derive(Debug)]
pub struct InstanceLock {
    // Held only for its OS lock; closing the file releases it.
    _file: File,
    path: PathBuf,
}

/// `{db_path}.lock`: beside the journal, so a journal copied elsewhere gets its own lock.
pub fn lock_path(db_path: &Path) -> PathBuf {
    let mut s: OsString = db_path.as_os_str().to_owned();
    s.push(".lock");
    PathBuf::from(s)
}

impl InstanceLock {
    /// Takes the exclusive lock for the journal at `db_path` without waiting, creating the lock
    /// file (and its directory) if needed, and writes this process's pid and worker id into it
    /// for the next one's error message.
    ///
    /// # Errors
    /// [`InstanceLockError::Held`] when another holder has it; [`InstanceLockError::Io`] when
    /// the file cannot be created or the OS refuses the lock for another reason.
    pub fn acquire(db_path: &Path, worker_id: &WorkerId) -> Result<Self, InstanceLockError> {
        let lock = lock_path(db_path);
        let io = |source| InstanceLockError::Io {
            lock: lock.clone(),
            source,
        };
        if let Some(dir) = lock.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        // No truncate on open: the holder's note must survive a failed attempt.
        let mut file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut note = String::new();
                let _ = (&file).take(512).read_to_string(&mut note);
                let note = note.trim();
                return Err(InstanceLockError::Held {
                    db: db_path.to_owned(),
                    lock,
                    holder: if note.is_empty() {
                        String::new()
                    } else {
                        format!(" by {note}")
                    },
                    worker_id: worker_id.clone(),
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        // Best effort: the note is diagnostics only; the lock is what protects.
        let _ = file
            .set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| {
                writeln!(
                    file,
                    "pid {}, worker_id {}",
                    std::process::id(),
                    worker_id.as_str()
                )
            })
            .and_then(|()| file.flush());
        Ok(InstanceLock {
            _file: file,
            path: lock,
        })
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_one_journal_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("sub/trading.db");
        let id = WorkerId::parse("host-a").unwrap();
        let first = InstanceLock::acquire(&db, &id).unwrap();
        assert_eq!(first.path(), dir.path().join("sub/trading.db.lock"));
        let err = InstanceLock::acquire(&db, &id).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, InstanceLockError::Held { .. }), "{msg}");
        assert!(msg.contains("trading.db.lock"), "{msg}");
        assert!(msg.contains("host-a"), "{msg}");
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        drop(first);
        InstanceLock::acquire(&db, &id).unwrap();
    }

    #[test]
    fn different_journals_do_not_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let id = WorkerId::parse("host-a").unwrap();
        let _a = InstanceLock::acquire(&dir.path().join("a.db"), &id).unwrap();
        let _b = InstanceLock::acquire(&dir.path().join("b.db"), &id).unwrap();
    }
}
