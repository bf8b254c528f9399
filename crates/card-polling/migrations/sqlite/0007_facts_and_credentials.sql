-- card-polling: every fact names its trigger; account tokens can be replaced and revoked.
--
-- 1. `priority_items.last_trigger_source`: the source of the latest trigger (creation or merge),
--    beside `last_trigger_type`. System facts (claim, failure, retry, complete, expire,
--    fail_dequeue) and the close copy both from the item row, so every fact carries its trigger
--    type and source (spec "优先轮询事实与查询的可追溯", D-audit-system-facts-trigger).
ALTER TABLE priority_items ADD COLUMN last_trigger_source TEXT;

-- Items written before: the source of their latest trigger fact (a replay changes nothing), else
-- one of their sources.
UPDATE priority_items SET last_trigger_source = COALESCE(
    (SELECT e.source FROM priority_item_events e
      WHERE e.item_id = priority_items.id AND e.kind IN ('enqueue', 'merge', 'retrigger')
        AND e.source IS NOT NULL AND COALESCE(e.result, '') <> 'replayed'
      ORDER BY e.id DESC LIMIT 1),
    (SELECT MIN(s.source) FROM priority_item_sources s WHERE s.item_id = priority_items.id));

-- Facts written before without their trigger: the trigger the item stood on when the fact was
-- written (its latest trigger fact before it), else the item's latest.
UPDATE priority_item_events SET
    trigger_type = COALESCE(
        (SELECT f.trigger_type FROM priority_item_events f
          WHERE f.item_id = priority_item_events.item_id AND f.id < priority_item_events.id
            AND f.kind IN ('enqueue', 'merge', 'retrigger') AND f.trigger_type IS NOT NULL
            AND COALESCE(f.result, '') <> 'replayed'
          ORDER BY f.id DESC LIMIT 1),
        (SELECT i.last_trigger_type FROM priority_items i WHERE i.id = priority_item_events.item_id)),
    source = COALESCE(
        (SELECT f.source FROM priority_item_events f
          WHERE f.item_id = priority_item_events.item_id AND f.id < priority_item_events.id
            AND f.kind IN ('enqueue', 'merge', 'retrigger') AND f.trigger_type IS NOT NULL
            AND COALESCE(f.result, '') <> 'replayed'
          ORDER BY f.id DESC LIMIT 1),
        (SELECT i.last_trigger_source FROM priority_items i WHERE i.id = priority_item_events.item_id))
WHERE trigger_type IS NULL
  AND kind IN ('claim', 'failure', 'retry', 'complete', 'expire', 'fail_dequeue', 'close');

-- 2. Account tokens (`PUT`/`DELETE /api/admin/accounts/{id}/token`, D-access-account-tokens): a
--    revoked account's token signs nothing in, and the console sessions it opened end; a replaced
--    token records when. The token hash stays unique, so a revoked token is never another
--    account's.
ALTER TABLE accounts ADD COLUMN revoked_at TEXT;
ALTER TABLE accounts ADD COLUMN token_changed_at TEXT;
