-- The operators a client may use, and per operator the methods (operators are enabled per client:
-- docs/api-decisions.md#operators). A JSON object from operator id ("*": every operator of the
-- registry) to its methods, e.g. {"acme-ae": ["NETWORK_API"]}; {} enables none. NULL is the default
-- set: every sandbox operator of the registry with all its methods (a sandbox operator also needs
-- the SANDBOX feature). It sits on the client row, which authentication already reads, so the
-- principal carries it for nothing.
ALTER TABLE accounts.clients
    ADD COLUMN operators jsonb CHECK (operators IS NULL OR jsonb_typeof(operators) = 'object');

-- Before, every client could use every operator of the registry with header enrichment (the
-- only method there was). The clients that exist keep exactly that; new ones get the default.
UPDATE accounts.clients SET operators = '{"*": ["HEADER_ENRICHMENT"]}';
