-- The worker's local journal (spec §6.1): the authority for what was executed on the site.
-- Timestamps are fixed-width UTC text (D-types-1), bound from the injected clock.

-- One row per task this worker has accepted. `status` is the local execution status:
-- executing → finished (guarded in SQL: UPDATE … WHERE status = 'executing').
CREATE TABLE orders (
    task_id           TEXT PRIMARY KEY,
    site              TEXT NOT NULL,
    intent_json       TEXT NOT NULL,
    status            TEXT NOT NULL CHECK (status IN ('executing', 'finished')),
    state             TEXT NOT NULL,
    outcome           TEXT CHECK (outcome IN ('succeeded', 'failed', 'needs_human')),
    error_code        INTEGER,
    detail            TEXT,
    purchase_json     TEXT,
    site_order_id     TEXT,
    payable_yen       INTEGER,
    pay_deadline      TEXT,
    payment_method    TEXT,
    last_evidence_ref TEXT,
    lease_token       TEXT,
    lease_count       INTEGER NOT NULL DEFAULT 0,
    next_seq          INTEGER NOT NULL DEFAULT 6,
    monitoring        INTEGER NOT NULL DEFAULT 0 CHECK (monitoring IN (0, 1)),
    deadline_alerted  INTEGER NOT NULL DEFAULT 0 CHECK (deadline_alerted IN (0, 1)),
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL,
    finished_at       TEXT,
    CHECK ((status = 'finished') = (outcome IS NOT NULL AND finished_at IS NOT NULL))
);
CREATE INDEX idx_orders_monitoring ON orders(monitoring) WHERE monitoring = 1;

-- Every local state transition, append-only.
CREATE TABLE order_events (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id      TEXT NOT NULL REFERENCES orders(task_id),
    step         TEXT NOT NULL,
    from_state   TEXT,
    to_state     TEXT NOT NULL,
    evidence_ref TEXT,
    detail       TEXT,
    at           TEXT NOT NULL
);
CREATE INDEX idx_order_events_task ON order_events(task_id, id);

-- Index of the evidence files on disk (§6.1).
CREATE TABLE evidence (
    evidence_ref TEXT PRIMARY KEY,
    task_id      TEXT NOT NULL REFERENCES orders(task_id),
    seq          INTEGER NOT NULL,
    step         TEXT NOT NULL,
    url          TEXT,
    method       TEXT,
    http_status  INTEGER,
    has_html     INTEGER NOT NULL,
    has_png      INTEGER NOT NULL,
    at           TEXT NOT NULL
);

-- Write-ahead entries for irreversible site actions: written (pending) and committed before the
-- action; resolved done | aborted (with the reason) after. A pending entry found on a lease forces
-- the verification branch.
CREATE TABLE intents (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id       TEXT NOT NULL REFERENCES orders(task_id),
    action        TEXT NOT NULL CHECK (action IN ('submit', 'pay')),
    status        TEXT NOT NULL CHECK (status IN ('pending', 'done', 'aborted')),
    reason        TEXT,
    site_order_id TEXT,
    created_at    TEXT NOT NULL,
    resolved_at   TEXT,
    CHECK ((status = 'pending') = (resolved_at IS NULL))
);
-- At most one pending and at most one done entry per action and task: an action is never begun
-- twice while unresolved, and never done twice.
CREATE UNIQUE INDEX uq_intents_pending ON intents(task_id, action) WHERE status = 'pending';
CREATE UNIQUE INDEX uq_intents_done ON intents(task_id, action) WHERE status = 'done';

-- Reports not yet acknowledged by the gateway. The lease token is attached at send time from
-- `orders.lease_token`, so a row survives a re-grant.
CREATE TABLE outbox (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id    TEXT NOT NULL REFERENCES orders(task_id),
    state      TEXT NOT NULL,
    body_json  TEXT NOT NULL,
    status     TEXT NOT NULL CHECK (status IN ('pending', 'acked', 'rejected')),
    attempts   INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    created_at TEXT NOT NULL,
    done_at    TEXT
);
CREATE INDEX idx_outbox_pending ON outbox(task_id, id) WHERE status = 'pending';
