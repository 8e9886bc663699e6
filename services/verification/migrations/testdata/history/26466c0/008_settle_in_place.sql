-- A settle rewrites a verification's status, charge and settled time a moment after its
-- record. PostgreSQL can do that on the row's own page without touching any index (a heap-only
-- tuple update) unless a changed column is indexed or read by an index's predicate. Two
-- predicates read status, so every settle wrote a new row version and five index entries: the
-- most expensive statement of a verify (make bench, issue 15). What those predicates stood for
-- moves to a column and a table a settle does not touch.

-- One verification holds a session until a refused charge releases it (released_at). Unique
-- over every row, NULLs equal, so it serves the session purge's foreign-key lookup too, which
-- the partial index could not. Building it blocks writes to the table: on a large table, run
-- the ALTER and the UPDATE below by hand, then build the index CONCURRENTLY (and check that it
-- is valid) before this migration runs; it then keeps both.
ALTER TABLE verification.verifications ADD COLUMN IF NOT EXISTS released_at timestamptz;
UPDATE verification.verifications SET released_at = coalesce(settled_at, created_at)
    WHERE status = 'REJECTED' AND released_at IS NULL;
CREATE UNIQUE INDEX IF NOT EXISTS verifications_session_held
    ON verification.verifications (session_id, released_at) NULLS NOT DISTINCT;
DROP INDEX verification.verifications_session;
DROP INDEX verification.verifications_session_ref;

-- The verifications whose charge is not settled yet, oldest first for the reconciler: written
-- with a PENDING record, deleted by its settle or its rejection, in the same statement.
CREATE TABLE verification.unsettled (
    id          uuid PRIMARY KEY,
    -- The verification's created_at, under its own name so the two join without ambiguity.
    recorded_at timestamptz NOT NULL
);
INSERT INTO verification.unsettled (id, recorded_at)
    SELECT id, created_at FROM verification.verifications WHERE status = 'PENDING';
CREATE INDEX unsettled_recorded ON verification.unsettled (recorded_at);
DROP INDEX verification.verifications_pending;

-- Room on each page for the settled version of the rows recorded there. Only pages written
-- from now on keep it.
ALTER TABLE verification.verifications SET (fillfactor = 85);
