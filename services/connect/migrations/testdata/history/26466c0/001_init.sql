-- The connect schema: identity profiles, CSV imports, integrations with their delivery queue and
-- sync history. Numbers are stored sealed (AES-256-GCM, the row id as associated data) with the
-- keyed hash beside them that verification computes too, so the two match without either
-- reading the other's tables.

CREATE TABLE connect.profiles (
    id             uuid PRIMARY KEY,
    client_id      uuid        NOT NULL,
    number_sealed  bytea       NOT NULL,
    number_hash    bytea       NOT NULL,
    number_masked  text        NOT NULL,
    country_code   text        NOT NULL,
    external_id    text,
    first_name     text,
    last_name      text,
    email          text,
    attributes     jsonb       NOT NULL DEFAULT '{}',
    source         text        NOT NULL CHECK (source IN ('IMPORT', 'API', 'VERIFICATION')),
    matched_at     timestamptz,
    enrichment     jsonb,
    enriched_at    timestamptz,
    -- The import job that last wrote the row (IMPORT_COMPLETED delivers what a job touched).
    import_job_id  uuid,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT profiles_number_unique UNIQUE (client_id, number_hash)
);

CREATE INDEX profiles_client ON connect.profiles (client_id, created_at DESC, id);
CREATE INDEX profiles_import ON connect.profiles (import_job_id) WHERE import_job_id IS NOT NULL;

-- Per-client counts for the overview, kept by triggers so the overview reads one row instead of
-- counting a client's profiles.
CREATE TABLE connect.client_stats (
    client_id uuid PRIMARY KEY,
    profiles  bigint NOT NULL DEFAULT 0,
    matched   bigint NOT NULL DEFAULT 0,
    enriched  bigint NOT NULL DEFAULT 0
);

CREATE FUNCTION connect.profiles_count() RETURNS trigger
    LANGUAGE plpgsql AS
$$
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO connect.client_stats AS s (client_id, profiles, matched, enriched)
        SELECT client_id,
               count(*),
               count(*) FILTER (WHERE matched_at IS NOT NULL),
               count(*) FILTER (WHERE enriched_at IS NOT NULL)
        FROM new_rows GROUP BY client_id
        ON CONFLICT (client_id) DO UPDATE SET
            profiles = s.profiles + excluded.profiles,
            matched  = s.matched + excluded.matched,
            enriched = s.enriched + excluded.enriched;
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        UPDATE connect.client_stats s SET
            profiles = s.profiles - o.profiles,
            matched  = s.matched - o.matched,
            enriched = s.enriched - o.enriched
        FROM (SELECT client_id,
                     count(*) AS profiles,
                     count(*) FILTER (WHERE matched_at IS NOT NULL) AS matched,
                     count(*) FILTER (WHERE enriched_at IS NOT NULL) AS enriched
              FROM old_rows GROUP BY client_id) o
        WHERE s.client_id = o.client_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER profiles_count_insert AFTER INSERT ON connect.profiles
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION connect.profiles_count();
CREATE TRIGGER profiles_count_update AFTER UPDATE ON connect.profiles
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION connect.profiles_count();
CREATE TRIGGER profiles_count_delete AFTER DELETE ON connect.profiles
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION connect.profiles_count();

-- An erased profile, recorded without its personal data.
CREATE TABLE connect.erasures (
    profile_id uuid PRIMARY KEY,
    client_id  uuid        NOT NULL,
    erased_at  timestamptz NOT NULL DEFAULT now()
);

-- The latest VERIFIED verification of each number of each client, relayed from verification:
-- a profile created later for such a number is matched at once.
CREATE TABLE connect.verified_numbers (
    client_id       uuid        NOT NULL,
    number_hash     bytea       NOT NULL,
    verification_id uuid        NOT NULL,
    verified_at     timestamptz NOT NULL,
    PRIMARY KEY (client_id, number_hash)
);

CREATE TABLE connect.import_jobs (
    id                uuid PRIMARY KEY,
    client_id         uuid        NOT NULL,
    file_name         text        NOT NULL,
    size_bytes        bigint      NOT NULL,
    status            text        NOT NULL CHECK (status IN ('QUEUED', 'RUNNING', 'COMPLETED', 'FAILED')),
    total_rows        bigint      NOT NULL DEFAULT 0,
    imported_rows     bigint      NOT NULL DEFAULT 0,
    updated_rows      bigint      NOT NULL DEFAULT 0,
    failed_rows       bigint      NOT NULL DEFAULT 0,
    errors            jsonb       NOT NULL DEFAULT '[]',
    failure           text,
    -- Records of the file already processed and committed: where a restarted worker resumes.
    processed_records bigint      NOT NULL DEFAULT 0,
    -- A RUNNING job whose lease has passed belongs to nobody (its worker died).
    lease_until       timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    started_at        timestamptz,
    finished_at       timestamptz
);

CREATE INDEX import_jobs_client ON connect.import_jobs (client_id, created_at DESC, id);
CREATE INDEX import_jobs_todo ON connect.import_jobs (created_at) WHERE status IN ('QUEUED', 'RUNNING');

-- The uploaded file, in chunks, so any replica can run the job and a restart loses nothing.
CREATE TABLE connect.import_chunks (
    job_id uuid    NOT NULL REFERENCES connect.import_jobs (id) ON DELETE CASCADE,
    seq    integer NOT NULL,
    data   bytea   NOT NULL,
    PRIMARY KEY (job_id, seq)
);

CREATE TABLE connect.integrations (
    id                    uuid PRIMARY KEY,
    client_id             uuid        NOT NULL,
    display_name          text        NOT NULL CHECK (length(display_name) BETWEEN 1 AND 100),
    integration_type      text        NOT NULL,
    endpoint_url          text        NOT NULL,
    http_method           text        NOT NULL CHECK (http_method IN ('POST', 'PUT', 'PATCH')),
    -- The target's credential and our signing secret, sealed: never returned, never logged.
    api_key_sealed        bytea,
    signing_secret_sealed bytea       NOT NULL,
    trigger_event         text        NOT NULL,
    field_mappings        jsonb       NOT NULL,
    batch_size            integer     NOT NULL CHECK (batch_size BETWEEN 1 AND 1000),
    matched_only          boolean     NOT NULL,
    status                text        NOT NULL CHECK (status IN ('ACTIVE', 'PAUSED')),
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX integrations_client ON connect.integrations (client_id, created_at DESC, id);
CREATE INDEX integrations_trigger ON connect.integrations (client_id, trigger_event) WHERE status = 'ACTIVE';

-- The durable delivery queue: one batch of profiles for one integration. Profiles are rendered
-- when the batch is sent, so an erased profile is never delivered.
CREATE TABLE connect.deliveries (
    id              uuid PRIMARY KEY,
    integration_id  uuid        NOT NULL REFERENCES connect.integrations (id) ON DELETE CASCADE,
    client_id       uuid        NOT NULL,
    trigger         text        NOT NULL,
    profile_ids     uuid[]      NOT NULL,
    status          text        NOT NULL CHECK (status IN ('PENDING', 'SUCCEEDED', 'FAILED')),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    -- A worker that took the batch holds it until then; past it, another may.
    lease_until     timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX deliveries_due ON connect.deliveries (next_attempt_at) WHERE status = 'PENDING';

CREATE TABLE connect.sync_events (
    id             uuid PRIMARY KEY,
    integration_id uuid        NOT NULL REFERENCES connect.integrations (id) ON DELETE CASCADE,
    client_id      uuid        NOT NULL,
    delivery_id    uuid        NOT NULL,
    trigger        text        NOT NULL,
    status         text        NOT NULL CHECK (status IN ('SUCCEEDED', 'FAILED', 'RETRYING')),
    record_count   integer     NOT NULL,
    http_status    integer,
    error          text,
    attempt        integer     NOT NULL,
    duration_ms    bigint      NOT NULL,
    started_at     timestamptz NOT NULL,
    finished_at    timestamptz NOT NULL
);

CREATE INDEX sync_events_integration ON connect.sync_events (integration_id, started_at DESC, id);
CREATE INDEX sync_events_client_recent ON connect.sync_events (client_id, finished_at);
