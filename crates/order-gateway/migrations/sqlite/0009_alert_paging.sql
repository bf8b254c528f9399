-- The console's alerts page (issue #11) pages by keyset on `(raised_at, insertion order)` instead
-- of OFFSET. On SQLite every index ends in the rowid: `idx_alerts_raised (raised_at)` of 0004
-- serves every alert; the open ones (the default view) need the state in front.
CREATE INDEX idx_alerts_state_raised ON alerts(state, raised_at);

-- Issue #11, D-console3-1: no transition ends a lease grant as `cancelled` (an operator cancels
-- only a queued task, which has never been granted), so the value leaves the CHECK. SQLite
-- cannot alter a CHECK: the table is rebuilt (no table references lease_grants).
CREATE TABLE lease_grants_0009 (
    task_id         TEXT NOT NULL REFERENCES tasks(task_id),
    grant_no        INTEGER NOT NULL CHECK (grant_no >= 1),
    worker_id       TEXT NOT NULL,
    via             TEXT NOT NULL CHECK (via IN ('poll','reclaim')),
    token_fp        TEXT NOT NULL CHECK (length(token_fp) = 8),
    granted_at      TEXT NOT NULL,
    expires_at      TEXT NOT NULL,
    renewals        INTEGER NOT NULL DEFAULT 0 CHECK (renewals >= 0),
    last_renewed_at TEXT,
    ended_at        TEXT,
    ended_how       TEXT
        CHECK (ended_how IN ('reported','expired','regranted','resolved')),
    PRIMARY KEY (task_id, grant_no),
    CHECK ((ended_at IS NULL) = (ended_how IS NULL)),
    CHECK ((renewals = 0) = (last_renewed_at IS NULL))
);
INSERT INTO lease_grants_0009 (task_id, grant_no, worker_id, via, token_fp, granted_at,
    expires_at, renewals, last_renewed_at, ended_at, ended_how)
SELECT task_id, grant_no, worker_id, via, token_fp, granted_at, expires_at, renewals,
    last_renewed_at, ended_at, ended_how FROM lease_grants;
DROP TABLE lease_grants;
ALTER TABLE lease_grants_0009 RENAME TO lease_grants;
CREATE UNIQUE INDEX one_open_grant ON lease_grants(task_id) WHERE ended_at IS NULL;
