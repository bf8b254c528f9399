-- no-transaction
-- An order intent's deadline and the `expired` status (D-task-not-after-expired), the
-- `task_expired` alert kind, and each alert event's sequence number (D-webhook-event-sequence),
-- SQLite. Same columns and CHECKs as migrations/postgres/0010. A new status and a new alert kind
-- change CHECKs of `tasks` and `alerts`, so both tables are rebuilt the documented way (as in
-- 0004/0008): foreign keys off, one transaction, rowids kept, indexes recreated, keys checked.
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;

CREATE TABLE tasks_new (
    task_id          TEXT PRIMARY KEY,
    site             TEXT NOT NULL,
    intent_json      TEXT NOT NULL,
    status           TEXT NOT NULL
        CHECK (status IN ('queued','leased','running','succeeded','failed','needs_human','stale',
                          'expired')),
    lease_owner      TEXT,
    lease_expires_at TEXT,
    lease_count      INTEGER NOT NULL DEFAULT 0 CHECK (lease_count >= 0),
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    outcome          TEXT CHECK (outcome IN ('succeeded','failed','needs_human')),
    lease_token      TEXT,
    gate_key         TEXT,
    set_aside_reason TEXT,
    reclaim_pending  INTEGER NOT NULL DEFAULT 0 CHECK (reclaim_pending IN (0, 1)),
    -- The upstream's deadline for a lease (fixed-width UTC text); NULL: none.
    not_after        TEXT,
    CHECK (status NOT IN ('leased','running')
           OR (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL
               AND lease_token IS NOT NULL AND gate_key IS NOT NULL)),
    CHECK ((status IN ('succeeded','failed','needs_human')) = (outcome IS NOT NULL)),
    CHECK (outcome IS NULL OR outcome = status),
    CHECK (status <> 'queued' OR (lease_owner IS NULL AND lease_count = 0)),
    -- Left queued only by a grant, set aside (needs_human with its reason), an operator's
    -- cancel (failed, never owned), or its deadline (expired, below).
    CHECK (status = 'queued' OR lease_count >= 1
           OR (status = 'needs_human' AND set_aside_reason IS NOT NULL)
           OR (status = 'failed' AND lease_owner IS NULL AND set_aside_reason IS NULL)
           OR status = 'expired'),
    -- Only a queued task expires, and only by a deadline: never granted, never owned.
    CHECK (status <> 'expired'
           OR (lease_count = 0 AND lease_owner IS NULL AND not_after IS NOT NULL))
);
INSERT INTO tasks_new (rowid, task_id, site, intent_json, status, lease_owner, lease_expires_at,
                       lease_count, created_at, updated_at, outcome, lease_token, gate_key,
                       set_aside_reason, reclaim_pending)
    SELECT rowid, task_id, site, intent_json, status, lease_owner, lease_expires_at,
           lease_count, created_at, updated_at, outcome, lease_token, gate_key, set_aside_reason,
           reclaim_pending
    FROM tasks ORDER BY rowid;
DROP TABLE tasks;
ALTER TABLE tasks_new RENAME TO tasks;
CREATE INDEX idx_tasks_pending ON tasks(status, created_at);
CREATE UNIQUE INDEX one_active_task ON tasks(gate_key) WHERE status IN ('leased','running');
CREATE INDEX idx_tasks_active_expiry ON tasks(lease_expires_at) WHERE status IN ('leased','running');
CREATE INDEX idx_tasks_active_owner ON tasks(lease_owner) WHERE status IN ('leased','running');
CREATE INDEX idx_tasks_created ON tasks(created_at);
-- The sweeper's look-up of queued tasks past their deadline, and the alert job's of recent expiries.
CREATE INDEX idx_tasks_queued_deadline ON tasks(not_after)
    WHERE status = 'queued' AND not_after IS NOT NULL;
CREATE INDEX idx_tasks_expired ON tasks(updated_at) WHERE status = 'expired';

CREATE TABLE alerts_new (
    alert_id   TEXT PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('worker_offline','task_queued_too_long','task_stale',
                                             'task_needs_human','account_logged_out','webhook_failing',
                                             'clock_jump','clock_skew','task_expired')),
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

-- One row per alert event (a raise or a clear). `seq` is the event's `sequence` on the wire:
-- given by the database when the event is written, never reused (AUTOINCREMENT), so it increases
-- across the events of one alert and no two events share one.
CREATE TABLE alert_events (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id   TEXT NOT NULL UNIQUE,
    alert_id   TEXT NOT NULL REFERENCES alerts(alert_id),
    created_at TEXT NOT NULL
);
-- Events written before: numbered in the order they were written (a raise before its clear).
INSERT INTO alert_events (event_id, alert_id, created_at)
    SELECT event_id, MIN(alert_id), MIN(created_at) FROM alert_outbox GROUP BY event_id
    ORDER BY MIN(created_at), CASE WHEN event_id LIKE '%:raised' THEN 0 ELSE 1 END, event_id;
-- Each delivery carries its event's sequence; a receiver's queue is ordered by it, and a later
-- event of an alert waits while an earlier one to the same receiver is pending.
ALTER TABLE alert_outbox ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
UPDATE alert_outbox SET seq = (SELECT e.seq FROM alert_events e
                               WHERE e.event_id = alert_outbox.event_id);
CREATE INDEX idx_outbox_lane ON alert_outbox(url, alert_id, seq) WHERE state = 'pending';

PRAGMA foreign_key_check;
COMMIT;
PRAGMA foreign_keys = ON;
