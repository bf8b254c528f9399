-- The `task_state_contradicts_outcome` alert kind (D-late-report-contradiction-alert): a task
-- ended with a verdict whose latest reported order state says the other, PostgreSQL. Same CHECK
-- as migrations/sqlite/0013.
ALTER TABLE alerts DROP CONSTRAINT alerts_kind_check;
ALTER TABLE alerts ADD CONSTRAINT alerts_kind_check
    CHECK (kind IN ('worker_offline','task_queued_too_long','task_stale','task_needs_human',
                    'account_logged_out','webhook_failing','clock_jump','clock_skew',
                    'task_expired','task_state_contradicts_outcome'));
