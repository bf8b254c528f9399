-- Clock alerts as records, PostgreSQL. Same table and CHECK as
-- migrations/sqlite/0008 (which rebuilds `alerts`; here ALTER suffices).
--
-- Each instance's sweeper writes what it saw of its own clock; the elected instance's alert job
-- reads every row as a cause of `clock_skew` / `clock_jump`, so an alert is raised whichever
-- instance's clock is off. Timestamps are the writer's clock plus its offset to the database's
-- (the one clock the instances share), RFC 3339 text as elsewhere.
ALTER TABLE alerts DROP CONSTRAINT alerts_kind_check;
ALTER TABLE alerts ADD CONSTRAINT alerts_kind_check
    CHECK (kind IN ('worker_offline','task_queued_too_long','task_stale','task_needs_human',
                    'account_logged_out','webhook_failing','clock_jump','clock_skew'));

CREATE TABLE clock_signals (
    instance_id      TEXT PRIMARY KEY,
    -- The database's clock minus the instance's, ms; NULL when not compared (SQLite).
    offset_ms        BIGINT,
    skewed           INTEGER NOT NULL CHECK (skewed IN (0, 1)),
    last_jump_at     TEXT COLLATE "C",
    last_jump_detail TEXT,
    updated_at       TEXT COLLATE "C" NOT NULL,
    CHECK (skewed = 0 OR offset_ms IS NOT NULL),
    CHECK ((last_jump_at IS NULL) = (last_jump_detail IS NULL))
);
