-- Import progress a person can follow: how far into the file the committed batches reach, and
-- when the last of them committed (with started_at, the rate that estimates the finish).
-- Both are written with each batch, in its transaction; a COMPLETED job has read its whole file.
ALTER TABLE connect.import_jobs ADD COLUMN IF NOT EXISTS bytes_processed bigint NOT NULL DEFAULT 0;
ALTER TABLE connect.import_jobs ADD COLUMN IF NOT EXISTS progressed_at timestamptz;
UPDATE connect.import_jobs SET bytes_processed = size_bytes WHERE status = 'COMPLETED';
