-- Order task queue and order-state mirror (spec order-gateway.md §4.1), PostgreSQL.
-- Same tables, columns and CHECKs as migrations/sqlite/0001. Differences, all forced by the engine:
-- timestamps are the same fixed-width UTC text (`2026-07-27T09:15:00.000Z`) with COLLATE "C", so
-- text order is time order whatever the database's locale; integers are BIGINT (they decode as
-- i64, like SQLite's INTEGER); `seq` (an identity column) stands in for SQLite's implicit rowid as
-- the insertion-order tie-break of "oldest first".

CREATE TABLE tasks (
    task_id          TEXT PRIMARY KEY,
    site             TEXT NOT NULL,
    intent_json      TEXT NOT NULL,
    status           TEXT NOT NULL
        CHECK (status IN ('queued','leased','running','succeeded','failed','needs_human','stale')),
    lease_owner      TEXT,
    lease_expires_at TEXT COLLATE "C",
    lease_count      BIGINT NOT NULL DEFAULT 0 CHECK (lease_count >= 0),
    created_at       TEXT COLLATE "C" NOT NULL,
    updated_at       TEXT COLLATE "C" NOT NULL,
    outcome          TEXT CHECK (outcome IN ('succeeded','failed','needs_human')),
    lease_token      TEXT,
    gate_key         TEXT,
    seq              BIGINT GENERATED ALWAYS AS IDENTITY,
    -- A task holding the gate always names its holder, expiry, fencing token and gate.
    CHECK (status NOT IN ('leased','running')
           OR (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL
               AND lease_token IS NOT NULL AND gate_key IS NOT NULL)),
    -- Exactly the terminal statuses carry an outcome, and it matches the status.
    CHECK ((status IN ('succeeded','failed','needs_human')) = (outcome IS NOT NULL)),
    CHECK (outcome IS NULL OR outcome = status),
    -- A queued task has never been granted (nothing ever returns to queued, §5).
    CHECK (status <> 'queued' OR (lease_owner IS NULL AND lease_count = 0)),
    CHECK (status = 'queued' OR lease_count >= 1)
);

CREATE INDEX idx_tasks_pending ON tasks(status, created_at, seq);

-- The concurrency gate (§4.3): at most one leased/running task per gate key ('*' = global).
CREATE UNIQUE INDEX one_active_task ON tasks(gate_key) WHERE status IN ('leased','running');

-- Sweeper and re-grant lookups touch only active tasks.
CREATE INDEX idx_tasks_active_expiry ON tasks(lease_expires_at) WHERE status IN ('leased','running');
CREATE INDEX idx_tasks_active_owner ON tasks(lease_owner) WHERE status IN ('leased','running');

-- State mirror: one row per (task, order state); a repeated report overwrites its row (§4.5).
CREATE TABLE task_reports (
    task_id       TEXT NOT NULL REFERENCES tasks(task_id),
    state         TEXT NOT NULL
        CHECK (state IN ('created','in_cart','ordered','awaiting_payment','paid','shipped','delivered','cancelled')),
    payable_yen   BIGINT,
    pay_deadline  TEXT COLLATE "C",
    site_order_id TEXT,
    evidence_ref  TEXT,
    detail        TEXT,
    reported_at   TEXT COLLATE "C" NOT NULL,
    error_code    INTEGER,
    worker_id     TEXT,
    seq           BIGINT NOT NULL,
    PRIMARY KEY (task_id, state),
    UNIQUE (task_id, seq)
);

CREATE TABLE workers (
    worker_id    TEXT PRIMARY KEY,
    last_seen_at TEXT COLLATE "C" NOT NULL
);
