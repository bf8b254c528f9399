-- card-polling: who acted on a system transition. `actor` is the scheduler /
-- executor instance id (`RAKUTEN_POLL_INSTANCE_ID`, default `<host>-<pid>-<hex>`);
-- `claim_fingerprint` the first 8 hex digits of the SHA-256 of the claim token involved, never
-- the token itself. Both stay NULL on operator facts (enqueue, merge, close, retrigger) and on
-- rows written before this migration.
ALTER TABLE priority_item_events ADD COLUMN actor TEXT;
ALTER TABLE priority_item_events ADD COLUMN claim_fingerprint TEXT
    CHECK (claim_fingerprint IS NULL OR length(claim_fingerprint) = 8);
