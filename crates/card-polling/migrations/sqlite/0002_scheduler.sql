-- card-polling: the ordinary polling schedule and the ordinary manual trigger.

-- The configured task types as the scheduler last synced them (import uses them to give new
-- cards their schedule rows in the same transaction).
CREATE TABLE poll_task_types (
    name          TEXT PRIMARY KEY,
    interval_secs INTEGER NOT NULL CHECK (interval_secs > 0)
);

-- Ordinary polling state: one row per (card, task type). `shard` is a stable hash of the ICCID
-- modulo the configured shard count; the scheduler takes due rows shard by shard and moves
-- `next_poll_at` forward in the same statement, so a restart resumes where it stopped instead
-- of polling every card at once.
CREATE TABLE poll_schedule (
    iccid          TEXT NOT NULL REFERENCES cards (iccid) ON DELETE CASCADE,
    task_type      TEXT NOT NULL,
    shard          INTEGER NOT NULL CHECK (shard >= 0),
    next_poll_at   TEXT NOT NULL,
    last_polled_at TEXT,
    PRIMARY KEY (iccid, task_type)
);
CREATE INDEX poll_schedule_due ON poll_schedule (task_type, shard, next_poll_at);

-- The ordinary manual trigger ("poll this card now"): every request is a row (accepted or
-- refused), which is its audit trail; the daily quota and the 24 h dedupe count accepted rows.
CREATE TABLE manual_triggers (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    operator     TEXT NOT NULL,
    iccid        TEXT NOT NULL,
    task_type    TEXT NOT NULL,
    requested_at TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('queued', 'executed', 'refused_quota', 'refused_duplicate')),
    executed_at  TEXT,
    result       TEXT,
    CHECK ((status = 'executed') = (executed_at IS NOT NULL))
);
CREATE INDEX manual_triggers_operator ON manual_triggers (operator, requested_at);
CREATE INDEX manual_triggers_card ON manual_triggers (iccid, task_type, requested_at);
CREATE INDEX manual_triggers_queued ON manual_triggers (task_type, id) WHERE status = 'queued';
