-- no-transaction
-- Alerts as records, their webhook outbox, audited operator actions, SQLite.
-- Changing a CHECK of `tasks` means rebuilding the table, the documented way (as in 0003): foreign
-- keys off, one transaction, rowids kept, indexes recreated, keys checked.
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;

-- `tasks` again, with two changes: an operator's cancel ends a never-granted task `failed`
-- (lease_count 0, no owner), and `reclaim_pending` marks a reclaim's grant that its worker has not
-- polled for yet (its first poll receives that very grant).
CREATE TABLE tasks_new (
    task_id          TEXT PRIMARY KEY,
    site             TEXT NOT NULL,
    intent_json      TEXT NOT NULL,
    status           TEXT NOT NULL
        CHECK (status IN ('queued','leased','running','succeeded','failed','needs_human','stale')),
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
    CHECK (status NOT IN ('leased','running')
           OR (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL
               AND lease_token IS NOT NULL AND gate_key IS NOT NULL)),
    CHECK ((status IN ('succeeded','failed','needs_human')) = (outcome IS NOT NULL)),
    CHECK (outcome IS NULL OR outcome = status),
    CHECK (status <> 'queued' OR (lease_owner IS NULL AND lease_count = 0)),
    -- Left queued only by a grant, set aside (needs_human with its reason), or an operator's
    -- cancel (failed, never owned).
    CHECK (status = 'queued' OR lease_count >= 1
           OR (status = 'needs_human' AND set_aside_reason IS NOT NULL)
           OR (status = 'failed' AND lease_owner IS NULL AND set_aside_reason IS NULL))
);
INSERT INTO tasks_new (rowid, task_id, site, intent_json, status, lease_owner, lease_expires_at,
                       lease_count, created_at, updated_at, outcome, lease_token, gate_key,
                       set_aside_reason)
    SELECT rowid, task_id, site, intent_json, status, lease_owner, lease_expires_at,
           lease_count, created_at, updated_at, outcome, lease_token, gate_key, set_aside_reason
    FROM tasks ORDER BY rowid;
DROP TABLE tasks;
ALTER TABLE tasks_new RENAME TO tasks;
CREATE INDEX idx_tasks_pending ON tasks(status, created_at);
CREATE UNIQUE INDEX one_active_task ON tasks(gate_key) WHERE status IN ('leased','running');
CREATE INDEX idx_tasks_active_expiry ON tasks(lease_expires_at) WHERE status IN ('leased','running');
CREATE INDEX idx_tasks_active_owner ON tasks(lease_owner) WHERE status IN ('leased','running');

-- A state recorded by an operator's resolve names the operator (token name).
ALTER TABLE task_reports ADD COLUMN operator TEXT;

-- A retired worker is hidden from /health and worker_offline until it polls again.
ALTER TABLE workers ADD COLUMN retired_at TEXT;

CREATE TABLE alerts (
    alert_id   TEXT PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('worker_offline','task_queued_too_long','task_stale',
                                             'task_needs_human','account_logged_out','webhook_failing')),
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
-- One open alert per (kind, subject), whichever instance raises it.
CREATE UNIQUE INDEX one_open_alert ON alerts(kind, subject) WHERE state = 'open';
CREATE INDEX idx_alerts_raised ON alerts(raised_at);
CREATE INDEX idx_alerts_task ON alerts(task_id) WHERE task_id IS NOT NULL;

-- One row per (alert event, webhook URL). `body_json` is the notice; format and signature are
-- applied at each attempt (the signature's timestamp is the attempt's).
CREATE TABLE alert_outbox (
    event_id        TEXT NOT NULL,
    url             TEXT NOT NULL,
    alert_id        TEXT NOT NULL REFERENCES alerts(alert_id),
    body_json       TEXT NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('pending','delivered')),
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at TEXT NOT NULL,
    last_error      TEXT,
    created_at      TEXT NOT NULL,
    delivered_at    TEXT,
    PRIMARY KEY (event_id, url),
    CHECK ((state = 'delivered') = (delivered_at IS NOT NULL))
);
CREATE INDEX idx_outbox_due ON alert_outbox(next_attempt_at) WHERE state = 'pending';

CREATE TABLE operator_actions (
    action_id   TEXT PRIMARY KEY,
    action      TEXT NOT NULL CHECK (action IN ('resolve','cancel','reclaim','retire_worker')),
    actor       TEXT NOT NULL,
    reason      TEXT NOT NULL CHECK (length(reason) >= 1),
    task_id     TEXT REFERENCES tasks(task_id),
    worker_id   TEXT,
    from_status TEXT,
    to_status   TEXT,
    detail_json TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE INDEX idx_operator_actions_task ON operator_actions(task_id, created_at);

PRAGMA foreign_key_check;
COMMIT;
PRAGMA foreign_keys = ON;
