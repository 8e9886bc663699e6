-- Event webhooks (issue 13): a client's endpoints, the events connect accepted for it, and one
-- delivery per (event, endpoint) with a row per attempt. River's own tables (jobs.Migrate) hold
-- the work; these hold what the client sees.

CREATE TABLE connect.webhook_endpoints (
    id            uuid PRIMARY KEY,
    client_id     uuid        NOT NULL,
    url           text        NOT NULL,
    -- The subscribed types; NULL: every type, present and future.
    event_types   text[],
    description   text        NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    enabled       boolean     NOT NULL DEFAULT true,
    -- Why it was disabled: 'CLIENT' (PATCH enabled=false), 'OPERATOR' (mnvctl) or 'FAILING'
    -- (it failed for longer than MNV_WEBHOOK_DISABLE_AFTER). NULL while enabled.
    disabled_reason text      CHECK (disabled_reason IN ('CLIENT', 'OPERATOR', 'FAILING')),
    disabled_at   timestamptz,
    -- The first failure since the last success; NULL while healthy.
    failing_since timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CHECK (enabled = (disabled_reason IS NULL))
);

CREATE INDEX webhook_endpoints_client ON connect.webhook_endpoints (client_id, created_at DESC, id);

-- Signing secrets, sealed with the data keyring under "connect.webhook_secrets:<id>" (so a
-- sealed secret moved to another row does not open). The current one has no expiry; a rotation
-- gives the previous one expires_at = now + overlap, and both sign until then.
CREATE TABLE connect.webhook_secrets (
    id          uuid PRIMARY KEY,
    endpoint_id uuid        NOT NULL REFERENCES connect.webhook_endpoints (id) ON DELETE CASCADE,
    sealed      bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz
);

CREATE INDEX webhook_secrets_endpoint ON connect.webhook_secrets (endpoint_id, created_at DESC);
CREATE UNIQUE INDEX webhook_secrets_one_current ON connect.webhook_secrets (endpoint_id) WHERE expires_at IS NULL;

-- Events accepted for delivery, once each (PublishEvents is at least once): the id is the
-- webhook-id of every delivery of it.
CREATE TABLE connect.events (
    id          text PRIMARY KEY CHECK (id ~ '^evt_[0-9a-f]{32}$'),
    client_id   uuid        NOT NULL,
    type        text        NOT NULL,
    data        jsonb       NOT NULL,
    -- The data object exactly as the producer wrote it: what is signed and sent.
    body        bytea       NOT NULL,
    created_at  timestamptz NOT NULL,
    accepted_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX events_client ON connect.events (client_id, created_at DESC);
CREATE INDEX events_accepted ON connect.events (accepted_at);

-- One event to one endpoint. status: PENDING (queued or retrying), SUCCEEDED, FAILED (gave up
-- after its last attempt), CANCELLED (the endpoint was disabled or deleted first).
CREATE TABLE connect.webhook_deliveries (
    id            uuid PRIMARY KEY,
    client_id     uuid        NOT NULL,
    endpoint_id   uuid        NOT NULL REFERENCES connect.webhook_endpoints (id) ON DELETE CASCADE,
    event_id      text        NOT NULL REFERENCES connect.events (id) ON DELETE CASCADE,
    status        text        NOT NULL CHECK (status IN ('PENDING', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
    attempts      integer     NOT NULL DEFAULT 0,
    last_status   integer,
    last_error    text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    delivered_at  timestamptz,
    UNIQUE (event_id, endpoint_id)
);

CREATE INDEX webhook_deliveries_endpoint ON connect.webhook_deliveries (endpoint_id, created_at DESC, id);
CREATE INDEX webhook_deliveries_endpoint_status ON connect.webhook_deliveries (endpoint_id, status, created_at DESC, id);

-- Every attempt, for the delivery log. http_status NULL: no answer (timeout, refused).
CREATE TABLE connect.webhook_attempts (
    delivery_id uuid        NOT NULL REFERENCES connect.webhook_deliveries (id) ON DELETE CASCADE,
    attempt     integer     NOT NULL CHECK (attempt >= 1),
    http_status integer,
    duration_ms integer     NOT NULL CHECK (duration_ms >= 0),
    error       text,
    started_at  timestamptz NOT NULL,
    PRIMARY KEY (delivery_id, attempt)
);
