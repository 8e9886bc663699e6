-- Deliveries are River jobs (kind connect.delivery in connect.river_job), each inserted in the
-- transaction that queues its batch, so nothing claims batches any more and the claim's
-- indexes go. A batch queued as a job has next_attempt_at 'infinity', which the leasing version
-- never claims; the ones that version left PENDING are adopted at start (each becomes a job
-- once, in the transaction that marks it). attempts counts the batch's attempts, sync events
-- keep each one. lease_until and next_attempt_at stay while a replica of the leasing version
-- may still run (a rolling upgrade); a later version drops them.
DROP INDEX connect.deliveries_integration_due;
DROP INDEX connect.deliveries_in_flight;
