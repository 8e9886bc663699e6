-- The CAMARA Number Verification facade (mnv as a CAMARA provider): its OpenID provider's
-- state, and what a verification records of it.

-- A CAMARA authorization opens a capture session of its own.
ALTER TABLE verification.sessions DROP CONSTRAINT sessions_source_check;
ALTER TABLE verification.sessions ADD CONSTRAINT sessions_source_check CHECK (source IN ('SDK', 'WEB', 'CAMARA'));

-- What a verification was for: VERIFY (a number compared) or NUMBER_SHARE (CAMARA's
-- phoneNumberShare: the line's number told to the client), charged under its own price variant.
ALTER TABLE verification.verifications
    ADD COLUMN product text NOT NULL DEFAULT 'VERIFY' CHECK (product IN ('VERIFY', 'NUMBER_SHARE'));

-- The provider's keys: one row, written by the first replica that starts, read by the others.
-- The ID-token signing key and the key that seals codes and access tokens are sealed with the
-- data keyring, bound to the row.
CREATE TABLE verification.camara_keys (
    id          text PRIMARY KEY CHECK (id = 'provider'),
    key_id      text        NOT NULL,
    keys_sealed bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- An authorization request, from the device's visit of the authorization endpoint (the line
-- identified, its capture session opened) until its code is exchanged; the code is kept as its
-- SHA-256 only. Exchanging deletes the row: a code is good once.
CREATE TABLE verification.camara_auth_requests (
    id                    uuid PRIMARY KEY,
    client_id             uuid        NOT NULL,
    redirect_uri          text        NOT NULL,
    state                 text        NOT NULL,
    nonce                 text        NOT NULL,
    scopes                text[]      NOT NULL,
    response_mode         text        NOT NULL,
    code_challenge        text        NOT NULL,
    code_challenge_method text        NOT NULL,
    session_id            uuid REFERENCES verification.sessions (id) ON DELETE CASCADE,
    blob                  text        NOT NULL DEFAULT '',
    code_hash             bytea UNIQUE,
    created_at            timestamptz NOT NULL DEFAULT now(),
    expires_at            timestamptz NOT NULL
);
CREATE INDEX camara_auth_requests_expiry ON verification.camara_auth_requests (expires_at);

-- An access token (opaque: the provider seals its id), good for one call of the API within its
-- life (at most 300 s), never refreshed. used_at marks its one use.
CREATE TABLE verification.camara_tokens (
    id         uuid PRIMARY KEY,
    client_id  uuid        NOT NULL,
    session_id uuid REFERENCES verification.sessions (id) ON DELETE CASCADE,
    blob       text        NOT NULL,
    scopes     text[]      NOT NULL,
    -- The client's features when it authenticated at the token endpoint.
    features   text[]      NOT NULL,
    -- And its operators and their methods (identity.Operators.Map; NULL: the default set).
    operators  jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);
CREATE INDEX camara_tokens_expiry ON verification.camara_tokens (expires_at);
CREATE INDEX camara_tokens_session ON verification.camara_tokens (session_id);
CREATE INDEX camara_auth_requests_session ON verification.camara_auth_requests (session_id);
