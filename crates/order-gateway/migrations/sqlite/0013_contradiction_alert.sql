-- no-transaction
-- The `task_state_contradicts_outcome` alert kind (D-late-report-contradiction-alert): a task
-- ended with a verdict whose latest reported order state says the other, SQLite. Same CHECK as
-- migrations/postgres/0013. A new kind changes the CHECK of `alerts`, so the table is rebuilt the
-- documented way (as in 0010): foreign keys off, one transaction, rowids kept, indexes
-- recreated, keys checked.
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;

CREATE TABLE alerts_new (
    alert_id   TEXT PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('worker_offline','task_queued_too_long','task_stale',
                                             'task_needs_human','account_logged_out','webhook_failing',
                                             'clock_jump','clock_skew','task_expired',
                                             'task_state_contradicts_outcome')),
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
           raised_at, cleared_at FROM alerts ORDER BY rowid;
DROP TABLE alerts;
ALTER TABLE alerts_new RENAME TO alerts;
CREATE UNIQUE INDEX one_open_alert ON alerts(kind, subject) WHERE state = 'open';
CREATE INDEX idx_alerts_raised ON alerts(raised_at);
CREATE INDEX idx_alerts_task ON alerts(task_id) WHERE task_id IS NOT NULL;
CREATE INDEX idx_alerts_state_raised ON alerts(state, raised_at);

PRAGMA foreign_key_check;
COMMIT;
PRAGMA foreign_keys = ON;
