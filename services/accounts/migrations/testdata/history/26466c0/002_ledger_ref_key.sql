-- The reference, unique per client, as one column. Lookups by reference go through this column
-- only: with (client_id, reference) the planner, holding statistics from when every client had a
-- row or two, preferred ledger_client_seq and read a busy client's whole ledger, under its
-- balance lock.
--
-- Guarded, because an unreleased build carried this change in 001; migrations only ever add,
-- so 001 is back as it first shipped.
ALTER TABLE accounts.ledger
    ADD COLUMN IF NOT EXISTS ref_key text GENERATED ALWAYS AS (client_id::text || '/' || reference) STORED;

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conname = 'ledger_ref_key' AND conrelid = 'accounts.ledger'::regclass) THEN
        ALTER TABLE accounts.ledger ADD CONSTRAINT ledger_ref_key UNIQUE (ref_key);
    END IF;
END
$$;

ALTER TABLE accounts.ledger DROP CONSTRAINT IF EXISTS ledger_reference_unique;
