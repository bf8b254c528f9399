-- The operator console: the unfiltered task list pages oldest first, which without
-- this index sorts the whole table on every page.
CREATE INDEX idx_tasks_created ON tasks(created_at);
