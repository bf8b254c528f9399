-- Alerts as records, their webhook outbox, audited operator actions, PostgreSQL.
-- Same tables and CHECKs as migrations/sqlite/0004 (which rebuilds `tasks`; here ALTER suffices).

-- An operator's cancel ends a never-granted task `failed` (lease_count 0, no owner).
ALTER TABLE tasks DROP CONSTRAINT tasks_granted_or_set_aside;
ALTER TABLE tasks ADD CONSTRAINT tasks_granted_set_aside_or_cancelled
    CHECK (status = 'queued' OR lease_count >= 1
           OR (status = 'needs_human' AND set_aside_reason IS NOT NULL)
           OR (status = 'failed' AND lease_owner IS NULL AND set_aside_reason IS NULL));
-- A reclaim's grant its worker has not polled for yet.
ALTER TABLE tasks ADD COLUMN reclaim_pending INTEGER NOT NULL DEFAULT 0
    CHECK (reclaim_pending IN (0, 1));

ALTER TABLE task_reports ADD COLUMN operator TEXT;
ALTER TABLE workers ADD COLUMN retired_at TEXT COLLATE "C";

CREATE TABLE alerts (
    alert_id   TEXT PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('worker_offline','task_queued_too_long','task_stale',
                                             'task_needs_human','account_logged_out','webhook_failing')),
    subject    TEXT NOT NULL,
    state      TEXT NOT NULL CHECK (state IN ('open','cleared')),
    summary    TEXT NOT NULL,
    task_id    TEXT,
    worker_id  TEXT,
    query_id   TEXT,
    raised_at  TEXT COLLATE "C" NOT NULL,
    cleared_at TEXT COLLATE "C",
    CHECK ((state = 'cleared') = (cleared_at IS NOT NULL))
);
CREATE UNIQUE INDEX one_open_alert ON alerts(kind, subject) WHERE state = 'open';
CREATE INDEX idx_alerts_raised ON alerts(raised_at);
CREATE INDEX idx_alerts_task ON alerts(task_id) WHERE task_id IS NOT NULL;

CREATE TABLE alert_outbox (
    event_id        TEXT NOT NULL,
    url             TEXT NOT NULL,
    alert_id        TEXT NOT NULL REFERENCES alerts(alert_id),
    body_json       TEXT NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('pending','delivered')),
    attempts        BIGINT NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at TEXT COLLATE "C" NOT NULL,
    last_error      TEXT,
    created_at      TEXT COLLATE "C" NOT NULL,
    delivered_at    TEXT COLLATE "C",
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
    created_at  TEXT COLLATE "C" NOT NULL
);
CREATE INDEX idx_operator_actions_task ON operator_actions(task_id, created_at);
