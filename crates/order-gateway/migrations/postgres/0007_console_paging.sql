-- The operator console pages its lists by keyset on `(created_at, seq)`.
-- `idx_tasks_pending (status, created_at, seq)` and `idx_queries_status_created` already serve
-- the filtered lists; the unfiltered ones need `seq` in the index too (SQLite's indexes end in
-- the rowid implicitly), so `idx_tasks_created (created_at)` of 0005 becomes `(created_at, seq)`.
DROP INDEX idx_tasks_created;
CREATE INDEX idx_tasks_created ON tasks(created_at, seq);
CREATE INDEX idx_queries_created ON account_queries(created_at, seq);
