-- A client's credentials are keyed by client, so the tables can be distributed by client_id
-- with the client's other rows (docs/operations.md#past-one-postgresql): every primary key,
-- unique constraint and foreign key between them includes client_id, and every statement
-- names the client. A key or token is then found by (client_id, fingerprint).
--
-- The foreign key of a rotated key to its replacement depends on the primary key it points at:
-- dropped first, made again on the new key.
ALTER TABLE accounts.api_keys DROP CONSTRAINT api_keys_replaced_by_fkey;
ALTER TABLE accounts.api_keys DROP CONSTRAINT api_keys_pkey;
ALTER TABLE accounts.api_keys ADD CONSTRAINT api_keys_pkey PRIMARY KEY (client_id, id);
ALTER TABLE accounts.api_keys ADD CONSTRAINT api_keys_replaced_by_fkey
    FOREIGN KEY (client_id, replaced_by) REFERENCES accounts.api_keys (client_id, id);
ALTER TABLE accounts.api_keys DROP CONSTRAINT api_keys_fingerprint_key;
ALTER TABLE accounts.api_keys ADD CONSTRAINT api_keys_fingerprint_key UNIQUE (client_id, fingerprint);

ALTER TABLE accounts.sdk_tokens DROP CONSTRAINT sdk_tokens_pkey;
ALTER TABLE accounts.sdk_tokens ADD CONSTRAINT sdk_tokens_pkey PRIMARY KEY (client_id, id);
ALTER TABLE accounts.sdk_tokens DROP CONSTRAINT sdk_tokens_fingerprint_key;
ALTER TABLE accounts.sdk_tokens ADD CONSTRAINT sdk_tokens_fingerprint_key UNIQUE (client_id, fingerprint);

-- An API key sent without X-CLIENT-ID (allowed under /v1/api/me/: the key names its client,
-- docs/api-decisions.md#credentials) is mapped to its client here first, then looked up with
-- it. Kept on the coordinator (a lookup across clients), written in the transaction that
-- inserts the key and never deleted, like the key's row; a revoked or expired key's entry
-- leads to a row that no longer authenticates. Its primary key keeps a fingerprint to one
-- client. An SDK token always comes with X-CLIENT-ID and needs none.
CREATE TABLE accounts.client_lookups (
    kind      text  NOT NULL CHECK (kind IN ('api_key')),
    key       bytea NOT NULL,
    client_id uuid  NOT NULL,
    PRIMARY KEY (kind, key)
);

-- A key inserted by a replica of the previous version while this one rolls out has no entry:
-- it authenticates with X-CLIENT-ID, and without it is refused (401) until an entry is added,
-- which this same statement, run again, does.
INSERT INTO accounts.client_lookups (kind, key, client_id)
    SELECT 'api_key', fingerprint, client_id FROM accounts.api_keys
    ON CONFLICT DO NOTHING;
