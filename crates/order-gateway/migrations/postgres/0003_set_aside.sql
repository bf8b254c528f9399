-- Poison rows, PostgreSQL: as migrations/sqlite/0003, a queued task whose row
-- cannot be decoded is set aside (`needs_human` with `set_aside_reason`) without a grant. The
-- unnamed CHECK "only a granted task leaves queued" is found by its text and replaced.

ALTER TABLE tasks ADD COLUMN set_aside_reason TEXT;

DO $$
DECLARE c text;
BEGIN
    SELECT conname INTO STRICT c FROM pg_constraint
     WHERE conrelid = 'tasks'::regclass AND contype = 'c'
       AND pg_get_constraintdef(oid) LIKE '%lease_count >= 1%';
    EXECUTE format('ALTER TABLE tasks DROP CONSTRAINT %I', c);
END $$;

-- Left queued only by a grant, or set aside (needs_human with its reason).
ALTER TABLE tasks ADD CONSTRAINT tasks_granted_or_set_aside
    CHECK (status = 'queued' OR lease_count >= 1
           OR (status = 'needs_human' AND set_aside_reason IS NOT NULL));
