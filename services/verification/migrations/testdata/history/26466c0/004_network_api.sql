-- NETWORK_API: a session can wait for the operator's authorization (CAMARA Number
-- Verification through the OIDC authorization code flow the device runs over mobile data).

ALTER TABLE verification.sessions DROP CONSTRAINT sessions_status_check;
ALTER TABLE verification.sessions ADD CONSTRAINT sessions_status_check
    CHECK (status IN ('CAPTURED', 'NO_NETWORK_IDENTITY', 'AUTHORIZATION_PENDING'));

ALTER TABLE verification.sessions
    -- HEADER_ENRICHMENT or NETWORK_API: how the session learns about the line.
    ADD COLUMN method text NOT NULL DEFAULT 'HEADER_ENRICHMENT'
        CHECK (method IN ('HEADER_ENRICHMENT', 'NETWORK_API')),
    -- SHA-256 of the OAuth state while the authorization is pending; cleared by the one
    -- callback it allows.
    ADD COLUMN state_hash bytea,
    -- Sealed with the data keyring, bound to the row: the PKCE verifier while pending, then
    -- the operator's single-use access token.
    ADD COLUMN oauth_sealed bytea,
    ADD COLUMN token_expires_at timestamptz;

CREATE UNIQUE INDEX sessions_state ON verification.sessions (state_hash) WHERE state_hash IS NOT NULL;
