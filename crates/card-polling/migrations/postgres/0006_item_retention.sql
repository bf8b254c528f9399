-- card-polling, issue #14 item 5 (D-scale8-2): the retention job also deletes ended priority items
-- with their source rows. These indexes keep each batch to the rows it deletes:
-- - the batch picks ended items oldest end first (`dequeued_at < cutoff`);
-- - an item a later retrigger points at is kept (`NOT EXISTS … retriggered_from = id`), and the
--   foreign keys on `retriggered_from` and `priority_trigger_events.item_id` are checked for every
--   item deleted: without an index on the referencing column each check reads the whole table.
--   (Sources and audit facts are already keyed by item: their primary key and
--   `priority_item_events_item`.)
CREATE INDEX priority_items_dequeued ON priority_items (dequeued_at);
CREATE INDEX priority_items_retriggered_from ON priority_items (retriggered_from)
    WHERE retriggered_from IS NOT NULL;
CREATE INDEX priority_trigger_events_item ON priority_trigger_events (item_id);
