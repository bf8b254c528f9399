-- The operator console pages its lists by keyset on `(created_at, insertion order)`.
-- On SQLite every index ends in the rowid, so `idx_tasks_pending (status, created_at)` and
-- `idx_tasks_created (created_at)` already serve the task list; the unfiltered account-query list
-- had no `created_at` index (only partial ones) and sorted the whole table on every page.
CREATE INDEX idx_queries_created ON account_queries(created_at);
