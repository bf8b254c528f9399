-- no-transaction
-- Poison rows: a queued task whose stored row cannot be decoded is set aside,
-- `needs_human` with `set_aside_reason`, without ever being granted; the CHECK "only a granted
-- task leaves queued" makes that one exception. SQLite cannot alter a CHECK, so `tasks` is rebuilt
-- the documented way (https://sqlite.org/lang_altertable.html#otheralter): foreign keys off,
-- one transaction, rowids kept (they order "oldest first"), indexes recreated, keys checked.
PRAGMA foreign_keys = OFF;
BEGIN IMMEDIATE;

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
    CHECK (status NOT IN ('leased','running')
           OR (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL
               AND lease_token IS NOT NULL AND gate_key IS NOT NULL)),
    CHECK ((status IN ('succeeded','failed','needs_human')) = (outcome IS NOT NULL)),
    CHECK (outcome IS NULL OR outcome = status),
    CHECK (status <> 'queued' OR (lease_owner IS NULL AND lease_count = 0)),
    -- Left queued only by a grant, or set aside (needs_human with its reason).
    CHECK (status = 'queued' OR lease_count >= 1
           OR (status = 'needs_human' AND set_aside_reason IS NOT NULL))
);

INSERT INTO tasks_new (rowid, task_id, site, intent_json, status, lease_owner, lease_expires_at,
    lease_count, created_at, updated_at, outcome, lease_token, gate_key)
SELECT rowid, task_id, site, intent_json, status, lease_owner, lease_expires_at,
    lease_count, created_at, updated_at, outcome, lease_token, gate_key FROM tasks;
DROP TABLE tasks;
ALTER TABLE tasks_new RENAME TO tasks;

CREATE INDEX idx_tasks_pending ON tasks(status, created_at);
CREATE UNIQUE INDEX one_active_task ON tasks(gate_key) WHERE status IN ('leased','running');
CREATE INDEX idx_tasks_active_expiry ON tasks(lease_expires_at) WHERE status IN ('leased','running');
CREATE INDEX idx_tasks_active_owner ON tasks(lease_owner) WHERE status IN ('leased','running');

PRAGMA foreign_key_check;
COMMIT;
PRAGMA foreign_keys = ON;
