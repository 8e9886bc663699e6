-- client_id is a uuid, as in every other table keyed by client, so the table can be distributed
-- by it with the rest of a client's rows (docs/operations.md#past-one-postgresql). Every key
-- stored so far names a client id that was parsed as a uuid; a row that somehow does not could
-- match no request, and is dropped rather than stop the upgrade.
DELETE FROM {{.schema}}.idempotency_keys
    WHERE client_id !~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
ALTER TABLE {{.schema}}.idempotency_keys ALTER COLUMN client_id TYPE uuid USING client_id::uuid;
