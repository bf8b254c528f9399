-- Lease history (issue #11, decision D-console2-1), PostgreSQL: the same table as
-- migrations/sqlite/0006; timestamps are text with COLLATE "C" and integers BIGINT, as in 0001.
-- One row per grant of a task, written in the transaction of the grant, ended in the transaction
-- of the transition that ends it. Never the lease token itself: `token_fp` is the first 8 hex
-- digits of its SHA-256. Tasks leased before this migration simply have no rows.
CREATE TABLE lease_grants (
    task_id         TEXT NOT NULL REFERENCES tasks(task_id),
    -- The task's lease_count right after this grant.
    grant_no        BIGINT NOT NULL CHECK (grant_no >= 1),
    worker_id       TEXT NOT NULL,
    via             TEXT NOT NULL CHECK (via IN ('poll','reclaim')),
    token_fp        TEXT NOT NULL CHECK (length(token_fp) = 8),
    granted_at      TEXT COLLATE "C" NOT NULL,
    -- Moved by every renewal and by clamping.
    expires_at      TEXT COLLATE "C" NOT NULL,
    renewals        BIGINT NOT NULL DEFAULT 0 CHECK (renewals >= 0),
    last_renewed_at TEXT COLLATE "C",
    ended_at        TEXT COLLATE "C",
    ended_how       TEXT
        CHECK (ended_how IN ('reported','expired','regranted','resolved','cancelled')),
    PRIMARY KEY (task_id, grant_no),
    -- An ended grant says how, an open one says nothing; a renewed one says when it last was.
    CHECK ((ended_at IS NULL) = (ended_how IS NULL)),
    CHECK ((renewals = 0) = (last_renewed_at IS NULL))
);

-- At most one open grant per task.
CREATE UNIQUE INDEX one_open_grant ON lease_grants(task_id) WHERE ended_at IS NULL;
