-- The console's alerts page (issue #11) pages by keyset on `(raised_at, insertion order)` instead
-- of OFFSET. PostgreSQL has no rowid: `seq` (an identity, as on tasks and account_queries) is the
-- insertion order; existing rows get theirs in the table's physical order, which is only a
-- tie-break between alerts raised at the same instant.
ALTER TABLE alerts ADD COLUMN seq BIGINT GENERATED ALWAYS AS IDENTITY;
DROP INDEX idx_alerts_raised;
CREATE INDEX idx_alerts_raised ON alerts(raised_at, seq);
CREATE INDEX idx_alerts_state_raised ON alerts(state, raised_at, seq);

-- Issue #11, D-console3-1: no transition ends a lease grant as `cancelled` (an operator cancels
-- only a queued task, which has never been granted), so the value leaves the CHECK.
ALTER TABLE lease_grants DROP CONSTRAINT lease_grants_ended_how_check;
ALTER TABLE lease_grants ADD CONSTRAINT lease_grants_ended_how_check
    CHECK (ended_how IN ('reported','expired','regranted','resolved'));
