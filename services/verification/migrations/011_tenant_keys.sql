-- Every key of a client's rows includes client_id, and a reference from one of a client's rows
-- to another matches client_id on both sides: the rule that lets the schema be distributed by
-- client (docs/operations.md#past-one-postgresql). A row and the row it references always
-- belonged to one client (each was written for the client of the other), so the new foreign
-- keys hold for every row there is.
--
-- Building the new keys blocks writes to their tables. On a large table, build the unique
-- indexes named below CONCURRENTLY by hand first (and check that they are valid): this
-- migration then takes them as they are (IF NOT EXISTS, PRIMARY KEY USING INDEX).

-- The foreign keys go first: each depends on the key it references.
ALTER TABLE verification.verifications DROP CONSTRAINT verifications_session_id_fkey;
ALTER TABLE verification.transactions DROP CONSTRAINT transactions_session_id_fkey;
ALTER TABLE verification.camara_auth_requests DROP CONSTRAINT camara_auth_requests_session_id_fkey;
ALTER TABLE verification.camara_tokens DROP CONSTRAINT camara_tokens_session_id_fkey;
ALTER TABLE verification.stuck_plus_sessions DROP CONSTRAINT stuck_plus_sessions_transaction_id_fkey;
ALTER TABLE verification.stuck_plus_reveals DROP CONSTRAINT stuck_plus_reveals_session_id_fkey;

-- Primary keys: (client_id, id).
CREATE UNIQUE INDEX IF NOT EXISTS sessions_client_id ON verification.sessions (client_id, id);
ALTER TABLE verification.sessions DROP CONSTRAINT sessions_pkey,
    ADD CONSTRAINT sessions_pkey PRIMARY KEY USING INDEX sessions_client_id;

CREATE UNIQUE INDEX IF NOT EXISTS verifications_client_id ON verification.verifications (client_id, id);
ALTER TABLE verification.verifications DROP CONSTRAINT verifications_pkey,
    ADD CONSTRAINT verifications_pkey PRIMARY KEY USING INDEX verifications_client_id;

CREATE UNIQUE INDEX IF NOT EXISTS transactions_client_id ON verification.transactions (client_id, id);
ALTER TABLE verification.transactions DROP CONSTRAINT transactions_pkey,
    ADD CONSTRAINT transactions_pkey PRIMARY KEY USING INDEX transactions_client_id;

CREATE UNIQUE INDEX IF NOT EXISTS stuck_plus_sessions_client_id ON verification.stuck_plus_sessions (client_id, id);
ALTER TABLE verification.stuck_plus_sessions DROP CONSTRAINT stuck_plus_sessions_pkey,
    ADD CONSTRAINT stuck_plus_sessions_pkey PRIMARY KEY USING INDEX stuck_plus_sessions_client_id;

CREATE UNIQUE INDEX IF NOT EXISTS stuck_plus_reveals_client_id ON verification.stuck_plus_reveals (client_id, id);
ALTER TABLE verification.stuck_plus_reveals DROP CONSTRAINT stuck_plus_reveals_pkey,
    ADD CONSTRAINT stuck_plus_reveals_pkey PRIMARY KEY USING INDEX stuck_plus_reveals_client_id;

CREATE UNIQUE INDEX IF NOT EXISTS camara_auth_requests_client_id ON verification.camara_auth_requests (client_id, id);
ALTER TABLE verification.camara_auth_requests DROP CONSTRAINT camara_auth_requests_pkey,
    ADD CONSTRAINT camara_auth_requests_pkey PRIMARY KEY USING INDEX camara_auth_requests_client_id;

CREATE UNIQUE INDEX IF NOT EXISTS camara_tokens_client_id ON verification.camara_tokens (client_id, id);
ALTER TABLE verification.camara_tokens DROP CONSTRAINT camara_tokens_pkey,
    ADD CONSTRAINT camara_tokens_pkey PRIMARY KEY USING INDEX camara_tokens_client_id;

-- The other unique keys, by client. A NETWORK_API callback brings its OAuth state alone: the
-- state's client is found first (client_lookups, migration 012).
CREATE UNIQUE INDEX IF NOT EXISTS sessions_client_state ON verification.sessions (client_id, state_hash) WHERE state_hash IS NOT NULL;
DROP INDEX verification.sessions_state;

-- One verification holds a session (migration 008), and serves the foreign key's lookup when a
-- session is purged.
CREATE UNIQUE INDEX IF NOT EXISTS verifications_client_session_held
    ON verification.verifications (client_id, session_id, released_at) NULLS NOT DISTINCT;
DROP INDEX verification.verifications_session_held;

-- A session has one transaction at most (migration 006).
CREATE UNIQUE INDEX IF NOT EXISTS transactions_client_session ON verification.transactions (client_id, session_id);
DROP INDEX verification.transactions_session;

ALTER TABLE verification.stuck_plus_sessions DROP CONSTRAINT stuck_plus_sessions_transaction_id_key,
    ADD CONSTRAINT stuck_plus_sessions_transaction_id_key UNIQUE (client_id, transaction_id);

-- The token endpoint authenticates the client before it exchanges a code, so a code is looked
-- up by its client.
ALTER TABLE verification.camara_auth_requests DROP CONSTRAINT camara_auth_requests_code_hash_key,
    ADD CONSTRAINT camara_auth_requests_code_hash_key UNIQUE (client_id, code_hash);

-- The foreign keys again, client_id matched to client_id.
ALTER TABLE verification.verifications ADD CONSTRAINT verifications_session_id_fkey
    FOREIGN KEY (client_id, session_id) REFERENCES verification.sessions (client_id, id);
ALTER TABLE verification.transactions ADD CONSTRAINT transactions_session_id_fkey
    FOREIGN KEY (client_id, session_id) REFERENCES verification.sessions (client_id, id);
ALTER TABLE verification.camara_auth_requests ADD CONSTRAINT camara_auth_requests_session_id_fkey
    FOREIGN KEY (client_id, session_id) REFERENCES verification.sessions (client_id, id) ON DELETE CASCADE;
ALTER TABLE verification.camara_tokens ADD CONSTRAINT camara_tokens_session_id_fkey
    FOREIGN KEY (client_id, session_id) REFERENCES verification.sessions (client_id, id) ON DELETE CASCADE;
ALTER TABLE verification.stuck_plus_sessions ADD CONSTRAINT stuck_plus_sessions_transaction_id_fkey
    FOREIGN KEY (client_id, transaction_id) REFERENCES verification.transactions (client_id, id);
ALTER TABLE verification.stuck_plus_reveals ADD CONSTRAINT stuck_plus_reveals_session_id_fkey
    FOREIGN KEY (client_id, session_id) REFERENCES verification.stuck_plus_sessions (client_id, id);

-- What the cascades of a session's purge look up, by client.
CREATE INDEX camara_auth_requests_client_session ON verification.camara_auth_requests (client_id, session_id);
DROP INDEX verification.camara_auth_requests_session;
CREATE INDEX camara_tokens_client_session ON verification.camara_tokens (client_id, session_id);
DROP INDEX verification.camara_tokens_session;
