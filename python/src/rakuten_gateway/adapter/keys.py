"""The idempotency-key fence of the irreversible steps, in a SQLite file so that it holds across
adapter restarts.

A key (``submit:<task id>`` or ``pay:<task id>``) is written — and on disk — *before* the step
acts; a second call under a key already written is refused with 5002 naming what the first one
did. A step that clearly did nothing (a refusal before the point of no return, a step not
verified) frees its key again; every other outcome keeps it, for the order may exist. A key
still ``in progress`` after a restart means the adapter stopped during that step: it stays
refused, and the worker's recovery check finds out what happened.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

__all__ = ["KeyStore"]

IN_PROGRESS = "in progress (the adapter may have stopped during the step)"


class KeyStore:
    """The keys seen, in one SQLite file (WAL, ``synchronous=FULL``)."""

    def __init__(self, path: str | Path) -> None:
        p = Path(path)
        if p.parent and not p.parent.exists():
            p.parent.mkdir(parents=True, exist_ok=True)
        self.path = p
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(p), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS idempotency_keys ("
            " key TEXT PRIMARY KEY, outcome TEXT NOT NULL,"
            " first_seen REAL NOT NULL, settled_at REAL)"
        )

    def reserve(self, key: str) -> str | None:
        """Writes ``key`` as in progress and returns ``None``; or, when it was seen before,
        returns what its first call did (and writes nothing)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute(
                    "SELECT outcome FROM idempotency_keys WHERE key = ?", (key,)
                ).fetchone()
                if row is not None:
                    return str(row[0])
                self._db.execute(
                    "INSERT INTO idempotency_keys (key, outcome, first_seen) VALUES (?, ?, ?)",
                    (key, IN_PROGRESS, time.time()),
                )
                return None
            finally:
                self._db.execute("COMMIT")

    def settle(self, key: str, outcome: str) -> None:
        """Records what the call under ``key`` did."""
        with self._lock:
            self._db.execute(
                "UPDATE idempotency_keys SET outcome = ?, settled_at = ? WHERE key = ?",
                (outcome, time.time(), key),
            )

    def free(self, key: str) -> None:
        """Forgets ``key``: its call clearly did nothing, so a new call may act."""
        with self._lock:
            self._db.execute("DELETE FROM idempotency_keys WHERE key = ?", (key,))

    def outcome(self, key: str) -> str | None:
        """What the call under ``key`` did, if it was seen."""
        with self._lock:
            row = self._db.execute(
                "SELECT outcome FROM idempotency_keys WHERE key = ?", (key,)
            ).fetchone()
        return None if row is None else str(row[0])

    def close(self) -> None:
        """Closes the database."""
        with self._lock:
            self._db.close()
