-- The accounts schema: clients, their credentials, and their money.
-- Money rules enforced here as the last line of defence: a balance is never negative, a ledger
-- reference is unique per client, and the ledger is append-only.

CREATE TABLE accounts.clients (
    id                 uuid PRIMARY KEY,
    name               text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    -- Contact person's name, e-mail and phone, AES-256-GCM sealed with the client id as
    -- associated data: personal data never sits in clear text.
    contact_sealed     bytea       NOT NULL,
    status             text        NOT NULL CHECK (status IN ('ACTIVE', 'SUSPENDED')),
    features           text[]      NOT NULL DEFAULT '{}',
    -- HMAC-SHA-256 (server pepper) of the client secret; the secret itself is never stored.
    secret_fingerprint bytea       NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);

-- One row per client, kept apart from clients so the hot row that debits lock is small and
-- reads of client details never wait on it.
CREATE TABLE accounts.balances (
    client_id  uuid PRIMARY KEY REFERENCES accounts.clients (id),
    balance    bigint      NOT NULL CHECK (balance >= 0),
    expires_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE accounts.ledger (
    -- seq orders entries (rows of one batch share created_at); id is what clients see.
    seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id            uuid        NOT NULL UNIQUE,
    client_id     uuid        NOT NULL REFERENCES accounts.clients (id),
    kind          text        NOT NULL CHECK (kind IN ('TOP_UP', 'VERIFICATION', 'CONNECT_ENRICHMENT',
                                                       'STUCK_PLUS_REVEAL', 'REFUND', 'ADJUSTMENT')),
    amount        bigint      NOT NULL,
    balance_after bigint      NOT NULL CHECK (balance_after >= 0),
    reference     text        NOT NULL CHECK (length(reference) BETWEEN 1 AND 200),
    variant       text        NOT NULL DEFAULT '',
    description   text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ledger_reference_unique UNIQUE (client_id, reference)
);

CREATE INDEX ledger_client_seq ON accounts.ledger (client_id, seq DESC);

CREATE FUNCTION accounts.ledger_append_only() RETURNS trigger
    LANGUAGE plpgsql AS
$$
BEGIN
    RAISE EXCEPTION 'accounts.ledger is append-only';
END
$$;

CREATE TRIGGER ledger_no_update_delete
    BEFORE UPDATE OR DELETE ON accounts.ledger
    FOR EACH ROW EXECUTE FUNCTION accounts.ledger_append_only();

CREATE TRIGGER ledger_no_truncate
    BEFORE TRUNCATE ON accounts.ledger
    FOR EACH STATEMENT EXECUTE FUNCTION accounts.ledger_append_only();

CREATE TABLE accounts.api_keys (
    id           uuid PRIMARY KEY,
    client_id    uuid        NOT NULL REFERENCES accounts.clients (id),
    name         text        NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    role         text        NOT NULL CHECK (role IN ('ADMIN', 'MEMBER')),
    -- HMAC-SHA-256 (server pepper) of the key; the key itself is never stored.
    fingerprint  bytea       NOT NULL UNIQUE,
    hint         text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    -- Set when the key stops working by itself (the old key of a rotation with grace).
    expires_at   timestamptz,
    revoked_at   timestamptz,
    -- The key that replaced this one in a rotation.
    replaced_by  uuid REFERENCES accounts.api_keys (id)
);

CREATE INDEX api_keys_client ON accounts.api_keys (client_id, created_at DESC) WHERE revoked_at IS NULL;

CREATE TABLE accounts.sdk_tokens (
    id           uuid PRIMARY KEY,
    client_id    uuid        NOT NULL REFERENCES accounts.clients (id),
    label        text        NOT NULL CHECK (length(label) BETWEEN 1 AND 100),
    fingerprint  bytea       NOT NULL UNIQUE,
    hint         text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    revoked_at   timestamptz
);

CREATE INDEX sdk_tokens_client ON accounts.sdk_tokens (client_id, created_at DESC) WHERE revoked_at IS NULL;

-- Per-client price overrides; defaults come from configuration.
CREATE TABLE accounts.prices (
    client_id uuid   NOT NULL REFERENCES accounts.clients (id),
    kind      text   NOT NULL CHECK (kind IN ('VERIFICATION', 'CONNECT_ENRICHMENT', 'STUCK_PLUS_REVEAL')),
    variant   text   NOT NULL DEFAULT '',
    amount    bigint NOT NULL CHECK (amount >= 0),
    PRIMARY KEY (client_id, kind, variant)
);
