-- Some capabilities reach the service alone, without the client they belong to: a browser's
-- transaction id (its capture, its completion, the CORS check of its routes), the OAuth state an
-- operator sends a device back with (NETWORK_API), the id of a CAMARA authorization request
-- (the facade's login callback) and a CAMARA access token. Each is mapped here to its client,
-- in the transaction that writes its row, so that every statement on a client's rows can name
-- the client (docs/operations.md#past-one-postgresql). The table is the coordinator's own: it
-- is read in a statement of its own, before the one on the client's rows, never joined to them.
CREATE TABLE verification.client_lookups (
    kind       text        NOT NULL CHECK (kind IN ('transaction', 'state', 'camara_request', 'camara_token')),
    -- The capability: a uuid's 16 bytes (transaction, camara_request, camara_token), or the
    -- SHA-256 of the OAuth state (state).
    key        bytea       NOT NULL,
    client_id  uuid        NOT NULL,
    -- When the capability stops being usable: its row's expiry. NULL for a transaction, whose
    -- id the browser may bring for as long as the row is kept: its purge deletes it.
    expires_at timestamptz,
    PRIMARY KEY (kind, key)
);
CREATE INDEX client_lookups_expiry ON verification.client_lookups (expires_at) WHERE expires_at IS NOT NULL;

-- The capabilities of the rows there are. Transactions are kept for days, so this copies a
-- row per transaction of that time.
INSERT INTO verification.client_lookups (kind, key, client_id, expires_at)
    SELECT 'transaction', uuid_send(id), client_id, NULL FROM verification.transactions;
INSERT INTO verification.client_lookups (kind, key, client_id, expires_at)
    SELECT 'state', state_hash, client_id, expires_at FROM verification.sessions WHERE state_hash IS NOT NULL;
INSERT INTO verification.client_lookups (kind, key, client_id, expires_at)
    SELECT 'camara_request', uuid_send(id), client_id, expires_at FROM verification.camara_auth_requests;
INSERT INTO verification.client_lookups (kind, key, client_id, expires_at)
    SELECT 'camara_token', uuid_send(id), client_id, expires_at FROM verification.camara_tokens;
