-- The verification schema: capture sessions, verifications, browser transactions, stuck-plus
-- sessions and their reveals, and the outbox towards Connect.
-- Numbers are stored only sealed (AES-256-GCM, the row's id as associated data) with a keyed
-- hash beside them for equality lookups.

-- A capture: the number an operator's network gave an SDK session or a browser transaction.
-- The number itself travels in the sealed blob; the row makes the blob single-use.
CREATE TABLE verification.sessions (
    id           uuid PRIMARY KEY,
    client_id    uuid        NOT NULL,
    source       text        NOT NULL CHECK (source IN ('SDK', 'WEB')),
    operator_id  text,
    status       text        NOT NULL CHECK (status IN ('CAPTURED', 'NO_NETWORK_IDENTITY')),
    platform     text,
    device_id    text,
    app_version  text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    -- Set by the one verify the blob allows.
    used_at      timestamptz
);

CREATE TABLE verification.verifications (
    id            uuid PRIMARY KEY,
    client_id     uuid        NOT NULL,
    session_id    uuid        NOT NULL REFERENCES verification.sessions (id),
    -- PENDING: recorded, charge not settled yet (a crash here is settled by the reconciler).
    -- REJECTED: the charge was refused (balance); the session was released.
    status        text        NOT NULL CHECK (status IN ('PENDING', 'VERIFIED', 'NOT_VERIFIED',
                                                         'UNDETERMINED', 'EXPIRED', 'REJECTED')),
    outcome       text        NOT NULL CHECK (outcome IN ('VERIFIED', 'NOT_VERIFIED', 'UNDETERMINED', 'EXPIRED')),
    reason        text        NOT NULL,
    operator_id   text        NOT NULL,
    service_type  text        NOT NULL,
    number_sealed bytea       NOT NULL,
    number_hash   bytea       NOT NULL,
    charged       bigint      NOT NULL DEFAULT 0,
    balance_after bigint,
    created_at    timestamptz NOT NULL DEFAULT now(),
    settled_at    timestamptz
);

-- One verification per session, the last line of defence of "one verify per blob"; a
-- verification whose charge was refused released its session, so it does not count.
CREATE UNIQUE INDEX verifications_session ON verification.verifications (session_id) WHERE status <> 'REJECTED';
CREATE INDEX verifications_client ON verification.verifications (client_id, created_at DESC, id);
CREATE INDEX verifications_number ON verification.verifications (number_hash, created_at);
CREATE INDEX verifications_pending ON verification.verifications (created_at) WHERE status = 'PENDING';

-- A browser flow. The id is the capability the browser holds.
CREATE TABLE verification.transactions (
    id                    uuid PRIMARY KEY,
    client_id             uuid        NOT NULL,
    service_code          text        NOT NULL CHECK (service_code IN ('VERIFY', 'STUCK_PLUS')),
    metadata_id           text        NOT NULL CHECK (length(metadata_id) BETWEEN 1 AND 128),
    -- The client's features when the flow started: the capture has no credential to ask with.
    features              text[]      NOT NULL,
    status                text        NOT NULL CHECK (status IN ('PENDING', 'CAPTURED', 'NO_NETWORK_IDENTITY')),
    operator_id           text,
    session_id            uuid REFERENCES verification.sessions (id),
    -- VERIFY: the sealed blob, returned to the client's backend when it resolves the flow.
    blob                  text,
    stuck_plus_session_id uuid,
    created_at            timestamptz NOT NULL DEFAULT now(),
    expires_at            timestamptz NOT NULL,
    captured_at           timestamptz
);

CREATE INDEX transactions_client ON verification.transactions (client_id, created_at DESC);

CREATE TABLE verification.stuck_plus_sessions (
    id             uuid PRIMARY KEY,
    client_id      uuid        NOT NULL,
    transaction_id uuid        NOT NULL UNIQUE REFERENCES verification.transactions (id),
    metadata_id    text        NOT NULL,
    operator_id    text        NOT NULL,
    number_sealed  bytea       NOT NULL,
    number_hash    bytea       NOT NULL,
    number_masked  text        NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    revealed_at    timestamptz
);

CREATE INDEX stuck_plus_sessions_client ON verification.stuck_plus_sessions (client_id, created_at DESC, id);

-- Every reveal, charged or not: who (key), when, why.
CREATE TABLE verification.stuck_plus_reveals (
    id         uuid PRIMARY KEY,
    client_id  uuid        NOT NULL,
    session_id uuid        NOT NULL REFERENCES verification.stuck_plus_sessions (id),
    key_id     uuid        NOT NULL,
    reason     text        NOT NULL CHECK (length(reason) BETWEEN 10 AND 500),
    charged    bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX stuck_plus_reveals_client ON verification.stuck_plus_reveals (client_id, created_at DESC, id);

-- Facts for Connect that must not be lost: a VERIFIED number of a client. Written in the
-- transaction that settles the verification; relayed at least once.
CREATE TABLE verification.outbox (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    client_id       uuid        NOT NULL,
    verification_id uuid        NOT NULL UNIQUE,
    number_hash     bytea       NOT NULL,
    verified_at     timestamptz NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    relayed_at      timestamptz
);

CREATE INDEX outbox_pending ON verification.outbox (id) WHERE relayed_at IS NULL;
