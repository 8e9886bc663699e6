-- The per-number limit counts a client's verifications of one number since a time
-- (store.recordSQL, NumberAttempts). Since the statement names its client as one value
-- (docs/operations.md#past-one-postgresql), the planner preferred verifications_client
-- (client_id, created_at) and read every verification of the client in the window for each
-- item: a client verifying at 1000/s paid for 20 000 rows per verify (make bench, C verify one:
-- 1051 req/s before keys by client, 118 after). One index led by the client and the number
-- answers it in a few rows, and, led by client_id, is the index a distributed table keeps per
-- shard.
CREATE INDEX verifications_client_number ON verification.verifications (client_id, number_hash, created_at);
DROP INDEX verification.verifications_number;
