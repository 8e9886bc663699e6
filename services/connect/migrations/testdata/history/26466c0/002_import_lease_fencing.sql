-- Lease fencing of import jobs. IF NOT EXISTS because an unreleased build carried these columns
-- in 001; migrations only ever add, so 001 is back as it first shipped.

-- Raised by every claim. A worker writes only while the token is still its own, so one whose
-- lease ran out while it was slow cannot commit over its successor's work.
ALTER TABLE connect.import_jobs ADD COLUMN IF NOT EXISTS lease_token bigint NOT NULL DEFAULT 0;

-- Claims of a job whose worker died mid-run; past a bound the job is FAILED, so a file that
-- kills its worker cannot take the service down forever.
ALTER TABLE connect.import_jobs ADD COLUMN IF NOT EXISTS interruptions integer NOT NULL DEFAULT 0;
