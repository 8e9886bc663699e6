-- Uploads without a long transaction, fair deliveries, and the indexes of the retention purges.

-- An upload is written chunk by chunk, each chunk its own short statement, under a job that is
-- UPLOADING until its last chunk is in: no worker claims it and no list shows it. A job left
-- UPLOADING (its replica died mid-upload) is purged.
ALTER TABLE connect.import_jobs DROP CONSTRAINT import_jobs_status_check;
ALTER TABLE connect.import_jobs ADD CONSTRAINT import_jobs_status_check
    CHECK (status IN ('UPLOADING', 'QUEUED', 'RUNNING', 'COMPLETED', 'FAILED'));
CREATE INDEX import_jobs_uploading ON connect.import_jobs (created_at) WHERE status = 'UPLOADING';

-- Claims walk the integrations that have pending batches (a loose index scan) and take a few due
-- batches of each, so one client's backlog, or one slow endpoint, does not hold every worker.
CREATE INDEX deliveries_integration_due ON connect.deliveries (integration_id, next_attempt_at) WHERE status = 'PENDING';
CREATE INDEX deliveries_in_flight ON connect.deliveries (integration_id) WHERE status = 'PENDING' AND lease_until IS NOT NULL;

-- Retention: finished deliveries, sync events and finished import jobs go after their
-- retention, uploads left UPLOADING after an hour.
CREATE INDEX deliveries_finished ON connect.deliveries (created_at) WHERE status <> 'PENDING';
CREATE INDEX sync_events_finished ON connect.sync_events (finished_at);
CREATE INDEX import_jobs_finished ON connect.import_jobs (finished_at) WHERE status IN ('COMPLETED', 'FAILED');
