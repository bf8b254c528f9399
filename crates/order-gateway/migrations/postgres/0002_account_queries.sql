-- Account read-only query channel (spec order-gateway.md §11), PostgreSQL.
-- Same table, columns and CHECKs as migrations/sqlite/0002; timestamps are fixed-width UTC text
-- with COLLATE "C", integers BIGINT, the two 0/1 flags BOOLEAN, and `seq` (identity) stands in for
-- SQLite's rowid as the insertion-order tie-break.

CREATE TABLE account_queries (
    query_id         TEXT PRIMARY KEY,
    site             TEXT NOT NULL,
    kind             TEXT NOT NULL CHECK (kind IN ('order_list','order_detail')),
    params_json      TEXT NOT NULL,
    status           TEXT NOT NULL
        CHECK (status IN ('queued','leased','succeeded','failed','expired')),
    -- Leases so far: the first lease makes it 1, each redelivery adds 1.
    attempt          BIGINT NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts     BIGINT NOT NULL CHECK (max_attempts >= 1),
    lease_owner      TEXT,
    lease_token      TEXT,
    lease_expires_at TEXT COLLATE "C",
    result_json      TEXT,
    raw_omitted      BOOLEAN NOT NULL DEFAULT FALSE,
    error_code       INTEGER,
    error_message    TEXT,
    -- The lease token and success flag of the result that finished the query (NULL when the
    -- sweeper finished it): an identical repeat from the same lease is acknowledged, not refused.
    result_token     TEXT,
    result_success   BOOLEAN,
    created_at       TEXT COLLATE "C" NOT NULL,
    updated_at       TEXT COLLATE "C" NOT NULL,
    finished_at      TEXT COLLATE "C",
    seq              BIGINT GENERATED ALWAYS AS IDENTITY,
    CHECK (attempt <= max_attempts),
    -- A leased query names its holder, token and expiry, and has been leased at least once.
    CHECK (status <> 'leased'
           OR (lease_owner IS NOT NULL AND lease_token IS NOT NULL
               AND lease_expires_at IS NOT NULL AND attempt >= 1)),
    -- A queued query holds no lease and has an attempt left.
    CHECK (status <> 'queued'
           OR (lease_token IS NULL AND lease_expires_at IS NULL AND attempt < max_attempts)),
    -- Exactly the terminal statuses carry finished_at.
    CHECK ((status IN ('succeeded','failed','expired')) = (finished_at IS NOT NULL)),
    -- Only a success stores a result; a failure always says why.
    CHECK ((status = 'succeeded') = (result_json IS NOT NULL)),
    CHECK (status <> 'failed' OR error_message IS NOT NULL),
    CHECK (status NOT IN ('queued','leased') OR (error_code IS NULL AND error_message IS NULL))
);

-- Lease: oldest queued first.
CREATE INDEX idx_queries_queued ON account_queries(created_at, seq) WHERE status = 'queued';
-- Sweeper: lapsed leases, TTL, retention.
CREATE INDEX idx_queries_leased_expiry ON account_queries(lease_expires_at) WHERE status = 'leased';
CREATE INDEX idx_queries_open_created ON account_queries(created_at) WHERE status IN ('queued','leased');
CREATE INDEX idx_queries_finished ON account_queries(finished_at) WHERE finished_at IS NOT NULL;
-- Listing.
CREATE INDEX idx_queries_status_created ON account_queries(status, created_at, seq);
