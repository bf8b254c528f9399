-- An order intent's deadline and the `expired` status (D-task-not-after-expired), the
-- `task_expired` alert kind, and each alert event's sequence number (D-webhook-event-sequence),
-- PostgreSQL. Same columns and CHECKs as migrations/sqlite/0010 (which rebuilds `tasks` and
-- `alerts`; here ALTER suffices).

-- The upstream's deadline for a lease (fixed-width UTC text, compared as text); NULL: none.
ALTER TABLE tasks ADD COLUMN not_after TEXT COLLATE "C";
ALTER TABLE tasks DROP CONSTRAINT tasks_status_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_status_check
    CHECK (status IN ('queued','leased','running','succeeded','failed','needs_human','stale',
                      'expired'));
-- Left queued only by a grant, set aside, an operator's cancel, or its deadline (expired).
ALTER TABLE tasks DROP CONSTRAINT tasks_granted_set_aside_or_cancelled;
ALTER TABLE tasks ADD CONSTRAINT tasks_granted_set_aside_cancelled_or_expired
    CHECK (status = 'queued' OR lease_count >= 1
           OR (status = 'needs_human' AND set_aside_reason IS NOT NULL)
           OR (status = 'failed' AND lease_owner IS NULL AND set_aside_reason IS NULL)
           OR status = 'expired');
-- Only a queued task expires, and only by a deadline: never granted, never owned.
ALTER TABLE tasks ADD CONSTRAINT tasks_expired_by_deadline
    CHECK (status <> 'expired'
           OR (lease_count = 0 AND lease_owner IS NULL AND not_after IS NOT NULL));
CREATE INDEX idx_tasks_queued_deadline ON tasks(not_after)
    WHERE status = 'queued' AND not_after IS NOT NULL;
CREATE INDEX idx_tasks_expired ON tasks(updated_at) WHERE status = 'expired';

ALTER TABLE alerts DROP CONSTRAINT alerts_kind_check;
ALTER TABLE alerts ADD CONSTRAINT alerts_kind_check
    CHECK (kind IN ('worker_offline','task_queued_too_long','task_stale','task_needs_human',
                    'account_logged_out','webhook_failing','clock_jump','clock_skew',
                    'task_expired'));

-- One row per alert event; `seq` (an identity: given at insert, never reused) is the event's
-- `sequence` on the wire.
CREATE TABLE alert_events (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id   TEXT NOT NULL UNIQUE,
    alert_id   TEXT NOT NULL REFERENCES alerts(alert_id),
    created_at TEXT COLLATE "C" NOT NULL
);
INSERT INTO alert_events (event_id, alert_id, created_at)
    SELECT event_id, MIN(alert_id), MIN(created_at) FROM alert_outbox GROUP BY event_id
    ORDER BY MIN(created_at), CASE WHEN event_id LIKE '%:raised' THEN 0 ELSE 1 END, event_id;
ALTER TABLE alert_outbox ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
UPDATE alert_outbox o SET seq = e.seq FROM alert_events e WHERE e.event_id = o.event_id;
CREATE INDEX idx_outbox_lane ON alert_outbox(url, alert_id, seq) WHERE state = 'pending';
