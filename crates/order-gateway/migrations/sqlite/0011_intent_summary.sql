-- Lists show a summary of each task's intent, never the whole intent (D-list-pages-bounded): a
-- page of 200 tasks whose intents each carried 60 KB was 11.5 MiB, and every list read loaded
-- every intent. The summary (the checked fields, as JSON: item_url, quantity, variant_id,
-- max_total_yen) and the intent's size in bytes are written at submit, so a list never reads
-- intent_json; the detail and the lease read it whole.
ALTER TABLE tasks ADD COLUMN intent_summary TEXT;
ALTER TABLE tasks ADD COLUMN intent_bytes INTEGER NOT NULL DEFAULT 0 CHECK (intent_bytes >= 0);

-- Existing rows: the summary from the stored text; a row whose intent is not a JSON object keeps
-- no summary (its list line shows `intent: null`, its detail says why).
UPDATE tasks SET
    intent_bytes = length(CAST(intent_json AS BLOB)),
    intent_summary = CASE WHEN json_valid(intent_json) AND json_type(intent_json) = 'object'
        THEN json_object(
            'item_url', json_extract(intent_json, '$.item_url'),
            'quantity', COALESCE(json_extract(intent_json, '$.quantity'), 1),
            'variant_id', json_extract(intent_json, '$.variant_id'),
            'max_total_yen', json_extract(intent_json, '$.max_total_yen'))
        END;
