-- The verifications' primary key leads with id: (id, client_id) instead of (client_id, id). A
-- batch's settle finds its rows by both (store.settleSQL) in a plan made once
-- (docs/architecture.md, "The batches' own pool"); the table's other indexes lead with
-- client_id too, and on the statistics of a young table the planner took one of them and read
-- every verification of the client for each item (make bench, C verify one: 342 req/s). Led by
-- id, the key is the one index both columns narrow to a row, whatever the statistics say. A
-- distributed database needs client_id in the key, not first
-- (docs/operations.md#past-one-postgresql).
--
-- Building the key blocks writes to the table. On a large table, build the index named below
-- CONCURRENTLY by hand first (and check that it is valid): this migration then takes it as it
-- is (IF NOT EXISTS, PRIMARY KEY USING INDEX).
CREATE UNIQUE INDEX IF NOT EXISTS verifications_id_client ON verification.verifications (id, client_id);
ALTER TABLE verification.verifications DROP CONSTRAINT verifications_pkey,
    ADD CONSTRAINT verifications_pkey PRIMARY KEY USING INDEX verifications_id_client;
