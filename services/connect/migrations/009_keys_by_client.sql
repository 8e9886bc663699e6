-- Every key of a client's rows includes client_id, so the schema can be distributed by client
-- (docs/operations.md#past-one-postgresql): each primary key and unique key leads with it, and
-- each foreign key between two tables matches client_id to client_id. The three tables that did
-- not carry client_id (import_chunks, webhook_secrets, webhook_attempts) take it from their
-- parent row. Ids stay unique on their own (random UUIDs, evt_ and 32 random hex digits); the
-- keys only say that a row is found through its client.

-- The foreign keys go first: each depends on the primary key it points at.
ALTER TABLE connect.import_chunks DROP CONSTRAINT import_chunks_job_id_fkey;
ALTER TABLE connect.deliveries DROP CONSTRAINT deliveries_integration_id_fkey;
ALTER TABLE connect.sync_events DROP CONSTRAINT sync_events_integration_id_fkey;
ALTER TABLE connect.webhook_secrets DROP CONSTRAINT webhook_secrets_endpoint_id_fkey;
ALTER TABLE connect.webhook_deliveries DROP CONSTRAINT webhook_deliveries_endpoint_id_fkey;
ALTER TABLE connect.webhook_deliveries DROP CONSTRAINT webhook_deliveries_event_id_fkey;
ALTER TABLE connect.webhook_attempts DROP CONSTRAINT webhook_attempts_delivery_id_fkey;

-- client_id from the parent: every child row has its parent (the foreign keys held until now).
ALTER TABLE connect.import_chunks ADD COLUMN client_id uuid;
UPDATE connect.import_chunks c SET client_id = j.client_id FROM connect.import_jobs j WHERE j.id = c.job_id;
ALTER TABLE connect.import_chunks ALTER COLUMN client_id SET NOT NULL;

ALTER TABLE connect.webhook_secrets ADD COLUMN client_id uuid;
UPDATE connect.webhook_secrets s SET client_id = e.client_id FROM connect.webhook_endpoints e WHERE e.id = s.endpoint_id;
ALTER TABLE connect.webhook_secrets ALTER COLUMN client_id SET NOT NULL;

ALTER TABLE connect.webhook_attempts ADD COLUMN client_id uuid;
UPDATE connect.webhook_attempts a SET client_id = d.client_id FROM connect.webhook_deliveries d WHERE d.id = a.delivery_id;
ALTER TABLE connect.webhook_attempts ALTER COLUMN client_id SET NOT NULL;

-- Primary keys.
ALTER TABLE connect.profiles DROP CONSTRAINT profiles_pkey, ADD CONSTRAINT profiles_pkey PRIMARY KEY (client_id, id);
ALTER TABLE connect.erasures DROP CONSTRAINT erasures_pkey, ADD CONSTRAINT erasures_pkey PRIMARY KEY (client_id, profile_id);
ALTER TABLE connect.enrichments DROP CONSTRAINT enrichments_pkey, ADD CONSTRAINT enrichments_pkey PRIMARY KEY (client_id, id);
ALTER TABLE connect.import_jobs DROP CONSTRAINT import_jobs_pkey, ADD CONSTRAINT import_jobs_pkey PRIMARY KEY (client_id, id);
ALTER TABLE connect.import_chunks DROP CONSTRAINT import_chunks_pkey, ADD CONSTRAINT import_chunks_pkey PRIMARY KEY (client_id, job_id, seq);
ALTER TABLE connect.integrations DROP CONSTRAINT integrations_pkey, ADD CONSTRAINT integrations_pkey PRIMARY KEY (client_id, id);
ALTER TABLE connect.deliveries DROP CONSTRAINT deliveries_pkey, ADD CONSTRAINT deliveries_pkey PRIMARY KEY (client_id, id);
ALTER TABLE connect.sync_events DROP CONSTRAINT sync_events_pkey, ADD CONSTRAINT sync_events_pkey PRIMARY KEY (client_id, id);
ALTER TABLE connect.webhook_endpoints DROP CONSTRAINT webhook_endpoints_pkey, ADD CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (client_id, id);
ALTER TABLE connect.webhook_secrets DROP CONSTRAINT webhook_secrets_pkey, ADD CONSTRAINT webhook_secrets_pkey PRIMARY KEY (client_id, id);
ALTER TABLE connect.events DROP CONSTRAINT events_pkey, ADD CONSTRAINT events_pkey PRIMARY KEY (client_id, id);
ALTER TABLE connect.webhook_deliveries DROP CONSTRAINT webhook_deliveries_pkey, ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (client_id, id);
ALTER TABLE connect.webhook_attempts DROP CONSTRAINT webhook_attempts_pkey, ADD CONSTRAINT webhook_attempts_pkey PRIMARY KEY (client_id, delivery_id, attempt);

-- Unique keys: one delivery per event and endpoint, one current secret per endpoint.
ALTER TABLE connect.webhook_deliveries DROP CONSTRAINT webhook_deliveries_event_id_endpoint_id_key,
    ADD CONSTRAINT webhook_deliveries_event_endpoint_key UNIQUE (client_id, event_id, endpoint_id);
DROP INDEX connect.webhook_secrets_one_current;
CREATE UNIQUE INDEX webhook_secrets_one_current ON connect.webhook_secrets (client_id, endpoint_id) WHERE expires_at IS NULL;

-- Foreign keys again, with client_id on both sides.
ALTER TABLE connect.import_chunks ADD CONSTRAINT import_chunks_job_id_fkey
    FOREIGN KEY (client_id, job_id) REFERENCES connect.import_jobs (client_id, id) ON DELETE CASCADE;
ALTER TABLE connect.deliveries ADD CONSTRAINT deliveries_integration_id_fkey
    FOREIGN KEY (client_id, integration_id) REFERENCES connect.integrations (client_id, id) ON DELETE CASCADE;
ALTER TABLE connect.sync_events ADD CONSTRAINT sync_events_integration_id_fkey
    FOREIGN KEY (client_id, integration_id) REFERENCES connect.integrations (client_id, id) ON DELETE CASCADE;
ALTER TABLE connect.webhook_secrets ADD CONSTRAINT webhook_secrets_endpoint_id_fkey
    FOREIGN KEY (client_id, endpoint_id) REFERENCES connect.webhook_endpoints (client_id, id) ON DELETE CASCADE;
ALTER TABLE connect.webhook_deliveries ADD CONSTRAINT webhook_deliveries_endpoint_id_fkey
    FOREIGN KEY (client_id, endpoint_id) REFERENCES connect.webhook_endpoints (client_id, id) ON DELETE CASCADE;
ALTER TABLE connect.webhook_deliveries ADD CONSTRAINT webhook_deliveries_event_id_fkey
    FOREIGN KEY (client_id, event_id) REFERENCES connect.events (client_id, id) ON DELETE CASCADE;
ALTER TABLE connect.webhook_attempts ADD CONSTRAINT webhook_attempts_delivery_id_fkey
    FOREIGN KEY (client_id, delivery_id) REFERENCES connect.webhook_deliveries (client_id, id) ON DELETE CASCADE;

-- IMPORT_COMPLETED queues the profiles a job wrote, within its client.
DROP INDEX connect.profiles_import;
CREATE INDEX profiles_import ON connect.profiles (client_id, import_job_id) WHERE import_job_id IS NOT NULL;

-- A job names the rows it works on with their client. Event deliveries queued by versions
-- before MNV_WEBHOOK_PER_CLIENT lack client_id in their args; it comes from their delivery.
-- River's tables are made after these migrations, so a fresh database has none yet.
DO $$
BEGIN
    IF to_regclass('connect.river_job') IS NOT NULL THEN
        EXECUTE $sql$
            UPDATE connect.river_job j SET args = j.args || jsonb_build_object('client_id', d.client_id)
            FROM connect.webhook_deliveries d
            WHERE j.kind = 'webhook.deliver' AND NOT j.args ? 'client_id'
              AND j.state NOT IN ('completed', 'cancelled', 'discarded')
              AND d.id = (j.args ->> 'delivery_id')::uuid
        $sql$;
        EXECUTE $sql$
            UPDATE connect.river_job j SET args = j.args || jsonb_build_object('client_id', d.client_id)
            FROM connect.deliveries d
            WHERE j.kind = 'connect.delivery' AND NOT j.args ? 'client_id'
              AND j.state NOT IN ('completed', 'cancelled', 'discarded')
              AND d.id = (j.args ->> 'delivery_id')::uuid
        $sql$;
    END IF;
END
$$;
