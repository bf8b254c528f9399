-- Lists show a summary of each task's intent, never the whole intent (D-list-pages-bounded): a
-- page of 200 tasks whose intents each carried 60 KB was 11.5 MiB, and every list read loaded
-- every intent. The summary (the checked fields, as JSON: item_url, quantity, variant_id,
-- max_total_yen) and the intent's size in bytes are written at submit, so a list never reads
-- intent_json; the detail and the lease read it whole. intent_json stays TEXT (not jsonb, which
-- would rewrite numbers, key order and spacing: the intent is kept as sent, D-intent-verbatim-text).
ALTER TABLE tasks ADD COLUMN intent_summary TEXT;
ALTER TABLE tasks ADD COLUMN intent_bytes BIGINT NOT NULL DEFAULT 0 CHECK (intent_bytes >= 0);

-- Existing rows: the summary from the stored text; a row whose intent is not a JSON object keeps
-- no summary (its list line shows `intent: null`, its detail says why). A text that does not
-- parse must not stop the migration: the cast is tried in a function that answers NULL instead.
CREATE FUNCTION pg_temp.intent_0011(t TEXT) RETURNS json LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN t::json;
EXCEPTION WHEN others THEN
    RETURN NULL;
END
$$;

UPDATE tasks SET
    intent_bytes = octet_length(intent_json),
    intent_summary = (
        SELECT CASE WHEN json_typeof(j) = 'object' THEN json_build_object(
            'item_url', j -> 'item_url',
            'quantity', COALESCE(j -> 'quantity', '1'::json),
            'variant_id', j -> 'variant_id',
            'max_total_yen', j -> 'max_total_yen')::text END
        FROM (SELECT pg_temp.intent_0011(intent_json) AS j) AS parsed);

DROP FUNCTION pg_temp.intent_0011(TEXT);
