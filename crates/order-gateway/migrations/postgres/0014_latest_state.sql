-- D-latest-state-on-the-task: the state of a task's latest report (highest `seq`) is kept on the
-- task row, written in the transaction that appends that report, so that the alert job finds the
-- tasks whose verdict a later report contradicts through a partial index, not by reading every
-- ended task's reports each tick. Same as migrations/sqlite/0014.
ALTER TABLE tasks ADD COLUMN latest_state TEXT
    CHECK (latest_state IN ('created','in_cart','ordered','awaiting_payment','paid','shipped',
                            'delivered','cancelled'));
UPDATE tasks SET latest_state = (SELECT r.state FROM task_reports r WHERE r.task_id = tasks.task_id
                                 ORDER BY r.seq DESC LIMIT 1);
-- The pairs `Outcome::check_fits_state` refuses (D-late-report-contradiction-alert); the alert
-- job's query repeats this predicate word for word, which is what lets a partial index serve it.
CREATE INDEX idx_tasks_contradicted ON tasks(updated_at)
    WHERE (status = 'failed' AND latest_state IN ('paid','shipped','delivered'))
       OR (status = 'succeeded' AND latest_state IN ('cancelled','created','in_cart'));
-- `account_logged_out` reads the newest worker report each tick.
CREATE INDEX idx_task_reports_worker_reported ON task_reports(reported_at) WHERE operator IS NULL;
