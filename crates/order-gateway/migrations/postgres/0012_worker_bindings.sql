-- D-worker-id-bound-to-token: a worker id is bound to the worker token name that first acts for
-- it (lease, renew, report, account-query lease and result); another worker token naming it is
-- refused. Its own table, not a column of `workers`: an account-query lease binds without
-- touching the order heartbeat (§11.2), and `workers` rows stand for heartbeats. An operator's
-- retire deletes the row.
CREATE TABLE worker_bindings (
    worker_id  TEXT PRIMARY KEY,
    token_name TEXT NOT NULL,
    bound_at   TEXT COLLATE "C" NOT NULL
);
