-- no-transaction
-- Clock alerts as records, SQLite. Same table and CHECK as
-- migrations/postgres/0008. Adding two alert kinds changes a CHECK of `alerts`, so the table is
-- rebuilt the documented way (as in 0003/0004): foreign keys off, one transaction, rowids kept,
-- indexes recreated, keys checked.
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;

CREATE TABLE alerts_new (
    alert_id   TEXT PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('worker_offline','task_queued_too_long','task_stale',
                                             'task_needs_human','account_logged_out','webhook_failing',
                                             'clock_jump','clock_skew')),
    subject    TEXT NOT NULL,
    state      TEXT NOT NULL CHECK (state IN ('open','cleared')),
    summary    TEXT NOT NULL,
    task_id    TEXT,
    worker_id  TEXT,
    -- The order_list account query submitted as evidence (task_stale).
    query_id   TEXT,
    raised_at  TEXT NOT NULL,
    cleared_at TEXT,
    CHECK ((state = 'cleared') = (cleared_at IS NOT NULL))
);
INSERT INTO alerts_new (rowid, alert_id, kind, subject, state, summary, task_id, worker_id,
                        query_id, raised_at, cleared_at)
    SELECT rowid, alert_id, kind, subject, state, summary, task_id, worker_id, query_id,
           raised_at, cleared_at FROM alerts;
DROP TABLE alerts;
ALTER TABLE alerts_new RENAME TO alerts;
-- One open alert per (kind, subject), whichever instance raises it.
CREATE UNIQUE INDEX one_open_alert ON alerts(kind, subject) WHERE state = 'open';
CREATE INDEX idx_alerts_raised ON alerts(raised_at);
CREATE INDEX idx_alerts_task ON alerts(task_id) WHERE task_id IS NOT NULL;

-- Each instance's sweeper writes what it saw of its own clock; the alert job reads every row as
-- a cause of `clock_skew` / `clock_jump`. With SQLite there is one instance and `offset_ms` is
-- NULL (one clock, nothing to compare), but a jump is still recorded.
CREATE TABLE clock_signals (
    instance_id      TEXT PRIMARY KEY,
    offset_ms        INTEGER,
    skewed           INTEGER NOT NULL CHECK (skewed IN (0, 1)),
    last_jump_at     TEXT,
    last_jump_detail TEXT,
    updated_at       TEXT NOT NULL,
    CHECK (skewed = 0 OR offset_ms IS NOT NULL),
    CHECK ((last_jump_at IS NULL) = (last_jump_detail IS NULL))
);

PRAGMA foreign_key_check;
COMMIT;
PRAGMA foreign_keys = ON;
