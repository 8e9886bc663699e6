-- A client's single sign-on with its own OpenID Connect provider (docs/api-decisions.md#console).
CREATE TABLE accounts.sso_providers (
    client_id      uuid        PRIMARY KEY REFERENCES accounts.clients (id),
    issuer         text        NOT NULL CHECK (length(issuer) BETWEEN 1 AND 300),
    oidc_client_id text        NOT NULL CHECK (length(oidc_client_id) BETWEEN 1 AND 200),
    -- AES-256-GCM sealed client secret, the client id as associated data; NULL for a public
    -- client (PKCE alone).
    client_secret  bytea,
    role_claim     text        NOT NULL CHECK (length(role_claim) BETWEEN 1 AND 100),
    admin_values   text[]      NOT NULL DEFAULT '{}',
    member_values  text[]      NOT NULL DEFAULT '{}',
    -- Scopes asked beside openid, email and profile (the role claim's, for many providers).
    scopes         text[]      NOT NULL DEFAULT '{}',
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- A person who signs in through a client's provider is that client's alone: found by the
-- fingerprint of (client, issuer, subject), never by e-mail, so another client's provider can
-- never speak for one of this client's people.
ALTER TABLE accounts.people ALTER COLUMN email_fp DROP NOT NULL;
ALTER TABLE accounts.people ADD COLUMN sso_key bytea UNIQUE;
ALTER TABLE accounts.people ADD COLUMN sso_client uuid REFERENCES accounts.clients (id);
ALTER TABLE accounts.people ADD CONSTRAINT people_one_way_in
    CHECK ((email_fp IS NULL) = (sso_key IS NOT NULL) AND (sso_key IS NULL) = (sso_client IS NULL));

ALTER TABLE accounts.webauthn_ceremonies DROP CONSTRAINT webauthn_ceremonies_purpose_check;
ALTER TABLE accounts.webauthn_ceremonies ADD CONSTRAINT webauthn_ceremonies_purpose_check
    CHECK (purpose IN ('sign-in', 'register', 'step-up', 'sso'));
