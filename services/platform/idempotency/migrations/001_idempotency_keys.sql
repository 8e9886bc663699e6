-- Idempotency keys of the POST requests that charge or create (docs/api-decisions.md#idempotency),
-- in the schema of the service that serves them.
CREATE TABLE {{.schema}}.idempotency_keys (
    client_id    text        NOT NULL,
    key          text        NOT NULL,
    method       text        NOT NULL,
    request_hash bytea       NOT NULL,
    -- RUNNING while the first request is in flight, DONE once its answer is stored.
    state        text        NOT NULL CHECK (state IN ('RUNNING', 'DONE')),
    -- The answer, sealed: it may hold a credential shown once.
    response     bytea,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client_id, key)
);

CREATE INDEX idempotency_keys_created ON {{.schema}}.idempotency_keys (created_at);
