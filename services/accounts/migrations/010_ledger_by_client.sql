-- The ledger is keyed by client (docs/operations.md#past-one-postgresql): (client_id, seq)
-- orders a client's entries and serves the ledger's pages (the index on (client_id, seq DESC)
-- it replaces), (client_id, id) and (client_id, ref_key) stay unique. A reference is looked
-- up with client_id = $1 AND ref_key = $2, one value each, which this unique index answers
-- whatever the statistics (migration 002 says why a lookup must not read a client's ledger).
ALTER TABLE accounts.ledger DROP CONSTRAINT ledger_pkey;
ALTER TABLE accounts.ledger ADD CONSTRAINT ledger_pkey PRIMARY KEY (client_id, seq);
ALTER TABLE accounts.ledger DROP CONSTRAINT ledger_id_key;
ALTER TABLE accounts.ledger ADD CONSTRAINT ledger_id_key UNIQUE (client_id, id);
-- Same name: a replica of the previous version, during the roll, still tells a retried debit
-- by it.
ALTER TABLE accounts.ledger DROP CONSTRAINT ledger_ref_key;
ALTER TABLE accounts.ledger ADD CONSTRAINT ledger_ref_key UNIQUE (client_id, ref_key);
DROP INDEX accounts.ledger_client_seq;

-- Append-only by privileges instead of triggers, which a table distributed by client cannot
-- run usefully: nobody, the table's owner (the role the service runs and migrates as) included,
-- may UPDATE, DELETE or TRUNCATE it. What this does not stop: a superuser, who bypasses
-- privileges, and the owner granting them back to itself (GRANT), which no statement of the
-- service does. The owner is named too, for a database migrated by another role than the one
-- that owns the table.
DROP TRIGGER ledger_no_update_delete ON accounts.ledger;
DROP TRIGGER ledger_no_truncate ON accounts.ledger;
DROP FUNCTION accounts.ledger_append_only();
DO $$
BEGIN
    EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON accounts.ledger FROM PUBLIC, CURRENT_USER, %I',
        (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'accounts.ledger'::regclass));
END
$$;
