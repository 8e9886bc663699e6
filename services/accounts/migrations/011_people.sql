-- The console's people (docs/api-decisions.md#console): persons, their passkeys, their places in
-- clients, invitations, sessions, the WebAuthn ceremonies between two calls, and the audit log.
-- No password anywhere. Tables of a client are keyed by client_id first (the tenant rule,
-- docs/operations.md#past-one-postgresql); a person and their passkeys belong to no client.

-- A person. The e-mail is found by its fingerprint (HMAC of the lower-cased address under the
-- server's pepper); the e-mail and name themselves are sealed with the person's id as
-- associated data, like a client's contact.
CREATE TABLE accounts.people (
    id            uuid PRIMARY KEY,
    email_fp      bytea       NOT NULL UNIQUE,
    -- AES-256-GCM sealed {"email","name"}.
    profile       bytea       NOT NULL,
    -- WebAuthn's user handle: 32 random bytes, never the id, so a passkey tells nothing.
    handle        bytea       NOT NULL UNIQUE CHECK (length(handle) = 32),
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- A passkey: the public key and what WebAuthn keeps of it (go-webauthn's Credential as JSON:
-- sign count, flags, transports, attestation type).
CREATE TABLE accounts.passkeys (
    id            uuid PRIMARY KEY,
    person_id     uuid        NOT NULL REFERENCES accounts.people (id),
    credential_id bytea       NOT NULL UNIQUE,
    credential    jsonb       NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz
);
CREATE INDEX passkeys_person ON accounts.passkeys (person_id);

-- A person's place in a client.
CREATE TABLE accounts.memberships (
    client_id  uuid        NOT NULL REFERENCES accounts.clients (id),
    person_id  uuid        NOT NULL REFERENCES accounts.people (id),
    role       text        NOT NULL CHECK (role IN ('ADMIN', 'MEMBER')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client_id, person_id)
);
CREATE INDEX memberships_person ON accounts.memberships (person_id);

-- An invitation: its token is shown once; only its fingerprint is kept. The token names its
-- client (principal.InvitationPrefix, the client id, then random), so it is found by
-- (client_id, fingerprint).
CREATE TABLE accounts.invitations (
    client_id   uuid        NOT NULL REFERENCES accounts.clients (id),
    id          uuid        NOT NULL,
    fingerprint bytea       NOT NULL,
    email_fp    bytea       NOT NULL,
    -- AES-256-GCM sealed e-mail, with the invitation's id as associated data.
    email       bytea       NOT NULL,
    role        text        NOT NULL CHECK (role IN ('ADMIN', 'MEMBER')),
    -- A recovery adds a passkey to a person who exists.
    recovery    boolean     NOT NULL DEFAULT false,
    -- Who invited: a person, or NULL for the operator (mnvctl).
    invited_by  uuid        REFERENCES accounts.people (id),
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    accepted_at timestamptz,
    revoked_at  timestamptz,
    PRIMARY KEY (client_id, id),
    UNIQUE (client_id, fingerprint)
);

-- A console session. Its secret is shown once, in the cookie; only its fingerprint is kept. The
-- secret names its client like an invitation's.
CREATE TABLE accounts.console_sessions (
    client_id      uuid        NOT NULL REFERENCES accounts.clients (id),
    id             uuid        NOT NULL,
    fingerprint    bytea       NOT NULL,
    person_id      uuid        NOT NULL REFERENCES accounts.people (id),
    created_at     timestamptz NOT NULL DEFAULT now(),
    last_seen_at   timestamptz NOT NULL DEFAULT now(),
    -- The absolute end; the idle timeout is configuration, measured from last_seen_at.
    expires_at     timestamptz NOT NULL,
    stepped_up_at  timestamptz,
    client_address text        NOT NULL DEFAULT '',
    user_agent     text        NOT NULL DEFAULT '',
    ended_at       timestamptz,
    PRIMARY KEY (client_id, id),
    UNIQUE (client_id, fingerprint)
);
CREATE INDEX console_sessions_person ON accounts.console_sessions (person_id) WHERE ended_at IS NULL;

-- A WebAuthn ceremony between its two calls: go-webauthn's SessionData (the challenge), used
-- once, for five minutes. Kept on the coordinator: it belongs to no client yet.
CREATE TABLE accounts.webauthn_ceremonies (
    id         uuid PRIMARY KEY,
    purpose    text        NOT NULL CHECK (purpose IN ('sign-in', 'register', 'step-up')),
    data       jsonb       NOT NULL,
    -- The invitation a registration is for, or the session a step-up is for.
    subject    text        NOT NULL DEFAULT '',
    expires_at timestamptz NOT NULL
);

-- What people did: written by the gateway after each state-changing call of a session, and by
-- accounts for sign-ins and invitations.
CREATE TABLE accounts.audit_events (
    client_id      uuid        NOT NULL REFERENCES accounts.clients (id),
    id             uuid        NOT NULL,
    at             timestamptz NOT NULL DEFAULT now(),
    person_id      uuid        REFERENCES accounts.people (id),
    session_id     uuid,
    action         text        NOT NULL CHECK (length(action) BETWEEN 1 AND 100),
    target         text        NOT NULL DEFAULT '' CHECK (length(target) <= 200),
    status         integer     NOT NULL,
    client_address text        NOT NULL DEFAULT '',
    user_agent     text        NOT NULL DEFAULT '',
    PRIMARY KEY (client_id, id)
);
CREATE INDEX audit_events_client_at ON accounts.audit_events (client_id, at DESC);
