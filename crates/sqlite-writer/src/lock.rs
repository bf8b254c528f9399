//! One writer process per database file (D-one-process-per-sqlite-file): the `flock` on `<file>.lock`, and the
//! file's real path (symlinks resolved), by which the lock and the WAL are found.

use std::path::PathBuf;

/// The one-writer-process guard of a database file (D-one-process-per-sqlite-file): an exclusive advisory lock
/// (`flock`) on `<file>.lock`, next to it, held for as long as this value lives. The group-commit
/// writer assumes it is the only writer of its file; a second process on the same file would
/// make every write of both wait on SQLite's lock and the long-polls of one never hear of the
/// other's submits. The lock is a file of its own because closing any descriptor of the database
/// file itself would drop SQLite's own POSIX locks on it. The kernel releases it when the process
/// ends, however it ends; the empty `.lock` file stays and is harmless.
#[derive(Debug)]
pub struct FileLock {
    /// `None` where the lock file cannot be made (a folder this user cannot write): then SQLite
    /// cannot write the database either, and start-up reports that, naming the file.
    _held: Option<std::fs::File>,
}

impl FileLock {
    /// [`Self::acquire`]'s refusal in `e` because another process holds the lock, as its own
    /// words (a service reports it as "unavailable": exit 3, a supervisor retries); `None` for
    /// any other error.
    pub fn held_elsewhere(e: &sqlx::Error) -> Option<String> {
        match e {
            sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::WouldBlock => {
                Some(io.to_string())
            }
            _ => None,
        }
    }

    /// Takes the lock of `db_file` (creating `<db_file>.lock` if missing), without waiting.
    ///
    /// # Errors
    /// `io::ErrorKind::WouldBlock` with a message naming the lock file when another process
    /// holds it; `io::ErrorKind::InvalidInput` when the file has more than one name (hard
    /// links); the error of creating or opening the lock file otherwise.
    pub fn acquire(db_file: &std::path::Path) -> std::io::Result<Self> {
        // A file with several names (hard links) cannot be guarded by a lock beside one of
        // them, and SQLite keeps its WAL and shared memory per name: two processes on two names
        // both write and corrupt the file (SQLite's "How To Corrupt"
        // §2.5). Refused before anything opens it (D-one-process-per-sqlite-file).
        if let Ok(meta) = std::fs::metadata(db_file) {
            use std::os::unix::fs::MetadataExt;
            if meta.is_file() && meta.nlink() > 1 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "{} has {} names (hard links): SQLite keeps its WAL per name, so two \
                         processes on two names would corrupt it; keep one name (remove the \
                         other links) and point every setting at it",
                        db_file.display(),
                        meta.nlink()
                    ),
                ));
            }
        }
        // The file itself, whatever path names it: a symlink or another spelling of the path
        // must meet the same lock (a second gateway through a symlink would not).
        let mut name = real_path(db_file).into_os_string();
        name.push(".lock");
        let path = PathBuf::from(name);
        let opened = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path);
        let mut file = match opened {
            Ok(file) => file,
            // A read-only folder or file system: an existing lock file still locks (`flock`
            // needs no write access); with none, no other process can write here either.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
                ) =>
            {
                match std::fs::File::open(&path) {
                    Ok(file) => file,
                    Err(_) => return Ok(FileLock { _held: None }),
                }
            }
            Err(e) => return Err(e),
        };
        match file.try_lock() {
            Ok(()) => {
                // Who holds it, for the next one's message; best effort, the lock is what
                // protects.
                use std::io::{Seek, Write};
                let _ = file
                    .set_len(0)
                    .and_then(|()| file.seek(std::io::SeekFrom::Start(0)))
                    .and_then(|_| writeln!(file, "pid {}", std::process::id()));
                Ok(FileLock { _held: Some(file) })
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                use std::io::Read;
                let mut note = String::new();
                let _ = (&file).take(64).read_to_string(&mut note);
                let holder = match note.trim() {
                    "" => String::new(),
                    note => format!(", {note}"),
                };
                Err(std::io::Error::new(
                    std::io::ErrorKind::WouldBlock,
                    format!(
                        "another process already writes {} (it holds {}{holder}); stop it, or give this one another file",
                        db_file.display(),
                        path.display()
                    ),
                ))
            }
            Err(std::fs::TryLockError::Error(e)) => Err(e),
        }
    }
}

/// `path` with every symlink resolved, as SQLite itself resolves it (its WAL and shared-memory
/// files sit next to the real file): the file's own path if it exists, else its folder's real
/// path joined with its name; `path` as it is when neither resolves.
pub fn real_path(path: &std::path::Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => {
            let dir = if dir.as_os_str().is_empty() {
                std::path::Path::new(".")
            } else {
                dir
            };
            std::fs::canonicalize(dir)
                .map(|d| d.join(name))
                .unwrap_or_else(|_| path.to_path_buf())
        }
        _ => path.to_path_buf(),
    }
}
