-- card-polling: the operator console pages every item list by keyset on `id` (newest
-- first, `?before=`/`?after=` cursors) and counts at most 10,001 rows. Each filter the console
-- offers needs an index that starts with it and ends in `id`, so a page is an index seek plus
-- 51 rows whatever its depth: status and shop had one (0001); task type and ICCID get theirs.
CREATE INDEX priority_items_task_type ON priority_items (task_type, id);
CREATE INDEX priority_items_iccid ON priority_items (iccid, id);
-- The exceptions view (failed, expired, at the attempt limit, or with a failure reason) is an OR
-- no plain index serves; a partial index holds exactly its rows. Its predicate is written as the
-- store writes the view's condition (`store::common::ALL_EXCEPTIONS`), which is how both engines
-- recognise that the index covers the query.
CREATE INDEX priority_items_exceptions ON priority_items (id)
    WHERE status IN ('failed', 'expired') OR attempts >= max_attempts OR failure_reason IS NOT NULL;
-- An agent's exceptions view (its shop tree AND the exceptions condition): the same partial index
-- keyed by shop, so each shop of the tree is one short index range instead of a walk over every
-- exception or every item of the tree.
CREATE INDEX priority_items_exceptions_shop ON priority_items (shop_id, id)
    WHERE status IN ('failed', 'expired') OR attempts >= max_attempts OR failure_reason IS NOT NULL;
