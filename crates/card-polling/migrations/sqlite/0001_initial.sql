-- card-polling, initial schema (SQLite). Every timestamp is fixed-width UTC text
-- (`YYYY-MM-DDTHH:MM:SS.mmmZ`), so text order is time order. `now` is always bound by the
-- application, never taken from the database.

-- Service facts such as `feature_enabled_at` (the priority queue's go-live instant).
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- ---------------------------------------------------------------- host domain

CREATE TABLE shops (
    id        TEXT PRIMARY KEY,
    parent_id TEXT REFERENCES shops (id),
    name      TEXT NOT NULL
);

-- Closure table of the agent hierarchy: (ancestor, descendant) for every pair, depth 0 for self.
-- Scope checks join here instead of walking the tree per query.
CREATE TABLE shop_closure (
    ancestor_id   TEXT NOT NULL REFERENCES shops (id),
    descendant_id TEXT NOT NULL REFERENCES shops (id),
    depth         INTEGER NOT NULL CHECK (depth >= 0),
    PRIMARY KEY (ancestor_id, descendant_id)
);
CREATE INDEX shop_closure_descendant ON shop_closure (descendant_id, depth);

CREATE TABLE accounts (
    id                        TEXT PRIMARY KEY,
    role                      TEXT NOT NULL CHECK (role IN ('super_admin', 'platform', 'agent', 'enterprise')),
    shop_id                   TEXT REFERENCES shops (id),
    -- SHA-256 of the Bearer token; the token itself is never stored.
    token_sha256              BLOB NOT NULL UNIQUE,
    -- The existing "manual polling trigger" permission (manual enqueue and retrigger need it).
    perm_manual_trigger       INTEGER NOT NULL DEFAULT 1 CHECK (perm_manual_trigger IN (0, 1)),
    -- The card data permission (manual close needs it, with role super_admin or platform).
    perm_card_data            INTEGER NOT NULL DEFAULT 1 CHECK (perm_card_data IN (0, 1)),
    CHECK (role <> 'agent' OR shop_id IS NOT NULL)
);

CREATE TABLE cards (
    iccid           TEXT PRIMARY KEY,
    shop_id         TEXT NOT NULL REFERENCES shops (id),
    polling_enabled INTEGER NOT NULL DEFAULT 1 CHECK (polling_enabled IN (0, 1)),
    -- Carrier channel traffic-threshold stop lock: the card stays in ordinary polling, but no
    -- resume (复机) may be issued while it is held.
    stop_locked     INTEGER NOT NULL DEFAULT 0 CHECK (stop_locked IN (0, 1))
);
CREATE INDEX cards_shop ON cards (shop_id);

CREATE TABLE devices (
    device_no           TEXT PRIMARY KEY,
    shop_id             TEXT NOT NULL REFERENCES shops (id),
    polling_enabled     INTEGER NOT NULL DEFAULT 1 CHECK (polling_enabled IN (0, 1)),
    -- What the device last reported as its current slot. Never used to pick execution targets.
    reported_slot_iccid TEXT
);

CREATE TABLE bindings (
    device_no TEXT NOT NULL REFERENCES devices (device_no),
    iccid     TEXT NOT NULL REFERENCES cards (iccid) ON DELETE CASCADE,
    active    INTEGER NOT NULL CHECK (active IN (0, 1)),
    PRIMARY KEY (device_no, iccid)
);
-- A card is actively bound to at most one device.
CREATE UNIQUE INDEX bindings_one_active_per_card ON bindings (iccid) WHERE active = 1;
CREATE INDEX bindings_device_active ON bindings (device_no) WHERE active = 1;

CREATE TABLE package_orders (
    id          TEXT PRIMARY KEY,
    asset_type  TEXT NOT NULL CHECK (asset_type IN ('card', 'device')),
    asset_id    TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('main', 'addon')),
    status      TEXT NOT NULL CHECK (status IN ('unpaid', 'paid', 'failed', 'cancelled')),
    payment_id  TEXT UNIQUE,
    created_at  TEXT NOT NULL,
    settled_at  TEXT,
    CHECK ((status = 'unpaid') = (settled_at IS NULL))
);

CREATE TABLE package_usages (
    id           TEXT PRIMARY KEY,
    order_id     TEXT NOT NULL UNIQUE REFERENCES package_orders (id),
    asset_type   TEXT NOT NULL CHECK (asset_type IN ('card', 'device')),
    asset_id     TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('main', 'addon')),
    status       TEXT NOT NULL CHECK (status IN ('pending', 'active', 'expired')),
    created_at   TEXT NOT NULL,
    activated_at TEXT,
    ends_at      TEXT,
    CHECK ((status = 'pending') = (activated_at IS NULL))
);
CREATE INDEX package_usages_asset ON package_usages (asset_type, asset_id, status);

-- ---------------------------------------------------------------- priority queue

CREATE TABLE priority_items (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    iccid             TEXT NOT NULL,
    task_type         TEXT NOT NULL,
    asset_type        TEXT NOT NULL CHECK (asset_type IN ('card', 'device')),
    asset_id          TEXT NOT NULL,
    device_no         TEXT,
    shop_id           TEXT NOT NULL,
    status            TEXT NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed', 'closed', 'expired')),
    trigger_type      TEXT NOT NULL CHECK (trigger_type IN ('purchase_activated', 'renewal_activated', 'queue_activated', 'addon_activated', 'no_valid_package', 'manual_trigger')),
    last_trigger_type TEXT NOT NULL,
    trigger_count     INTEGER NOT NULL CHECK (trigger_count >= 1),
    enqueued_at       TEXT NOT NULL,
    last_triggered_at TEXT NOT NULL,
    attempts          INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0 AND attempts <= max_attempts),
    max_attempts      INTEGER NOT NULL,
    next_run_at       TEXT NOT NULL,
    claim_token       TEXT,
    claimed_at        TEXT,
    claim_expires_at  TEXT,
    started_at        TEXT,
    finished_at       TEXT,
    duration_ms       INTEGER,
    dequeued_at       TEXT,
    result            TEXT,
    failure_reason    TEXT,
    last_log_id       INTEGER,
    operator          TEXT,
    reason            TEXT,
    retriggered_from  INTEGER REFERENCES priority_items (id),
    closed_by         TEXT,
    close_reason      TEXT,
    -- A running item holds a claim; only active items lack a dequeue time.
    CHECK ((status = 'running') = (claim_token IS NOT NULL AND claim_expires_at IS NOT NULL)),
    CHECK ((status IN ('pending', 'running')) = (dequeued_at IS NULL)),
    CHECK (status <> 'closed' OR (closed_by IS NOT NULL AND close_reason IS NOT NULL))
);
-- The invariant of the whole feature: at most one active item per card and task type.
CREATE UNIQUE INDEX priority_items_one_active ON priority_items (iccid, task_type)
    WHERE status IN ('pending', 'running');
-- Claim candidates and the expiry sweep read only active rows.
CREATE INDEX priority_items_due ON priority_items (next_run_at) WHERE status = 'pending';
CREATE INDEX priority_items_lease ON priority_items (claim_expires_at) WHERE status = 'running';
CREATE INDEX priority_items_active_enqueued ON priority_items (enqueued_at) WHERE status IN ('pending', 'running');
-- Scoped listing: an agent's shops, newest first.
CREATE INDEX priority_items_shop ON priority_items (shop_id, id);
CREATE INDEX priority_items_status ON priority_items (status, id);

-- The set of trigger sources of an item (idempotent: a source is added once).
CREATE TABLE priority_item_sources (
    item_id INTEGER NOT NULL REFERENCES priority_items (id),
    source  TEXT NOT NULL,
    PRIMARY KEY (item_id, source)
);

-- Every trigger event ever applied, per card and task type: a replayed event id is recognised
-- and adds nothing.
CREATE TABLE priority_trigger_events (
    event_id  TEXT NOT NULL,
    iccid     TEXT NOT NULL,
    task_type TEXT NOT NULL,
    item_id   INTEGER NOT NULL REFERENCES priority_items (id),
    at        TEXT NOT NULL,
    PRIMARY KEY (event_id, iccid, task_type)
);

-- Audit facts of every transition (no separate exception table: exceptions are item states).
CREATE TABLE priority_item_events (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    item_id      INTEGER NOT NULL REFERENCES priority_items (id),
    kind         TEXT NOT NULL CHECK (kind IN ('enqueue', 'merge', 'claim', 'failure', 'retry', 'complete', 'close', 'expire', 'retrigger', 'fail_dequeue')),
    trigger_type TEXT,
    source       TEXT,
    operator     TEXT,
    reason       TEXT,
    result       TEXT,
    at           TEXT NOT NULL
);
CREATE INDEX priority_item_events_item ON priority_item_events (item_id, id);

-- Integration interaction log: one row per upstream call. Summaries only: never credentials,
-- never a raw body.
CREATE TABLE integration_logs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    item_id          INTEGER,
    iccid            TEXT NOT NULL,
    task_type        TEXT NOT NULL,
    operation        TEXT NOT NULL,
    request_summary  TEXT NOT NULL,
    response_summary TEXT NOT NULL,
    latency_ms       INTEGER NOT NULL,
    outcome          TEXT NOT NULL,
    at               TEXT NOT NULL
);
CREATE INDEX integration_logs_item ON integration_logs (item_id, id);
