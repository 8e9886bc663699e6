-- The client's operators when the flow started (operators are enabled per client,
-- docs/api-decisions.md#operators): like its features, because the capture has no credential to ask
-- with. {"default": true} for a client without a list of its own, else {"grants": {operator id or
-- "*": [methods]}}. NULL: the row was written by a version before per-client enablement, when every
-- client could use every operator with header enrichment, and is read as that.
ALTER TABLE verification.transactions
    ADD COLUMN operators jsonb CHECK (operators IS NULL OR jsonb_typeof(operators) = 'object');
