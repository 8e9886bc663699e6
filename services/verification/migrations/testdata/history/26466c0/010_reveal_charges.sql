-- A reveal is charged the way every priced operation is (platform/charge): recorded PENDING
-- with its debit's reference and committed, debited outside any transaction (the session's row
-- lock is no longer held while accounts answers), then SETTLED or REJECTED in a short
-- transaction of its own. What a crash leaves PENDING the reconciler finishes. Reveals recorded
-- before were charged in the transaction that wrote them: SETTLED.
ALTER TABLE verification.stuck_plus_reveals
    ADD COLUMN status    text NOT NULL DEFAULT 'SETTLED' CHECK (status IN ('PENDING', 'SETTLED', 'REJECTED')),
    ADD COLUMN reference text,
    -- Settled by the reconciler while its request was away: the number was never shown. The
    -- same key's next reveal of the session is answered with this one, charged once.
    ADD COLUMN unheard   boolean NOT NULL DEFAULT false;

-- One live charge per reference: a refused one frees its reference for the next reveal.
CREATE UNIQUE INDEX stuck_plus_reveals_reference ON verification.stuck_plus_reveals (client_id, reference)
    WHERE status <> 'REJECTED';

-- The reconciler's and a retry's way to what is PENDING or unheard.
CREATE INDEX stuck_plus_reveals_open ON verification.stuck_plus_reveals (session_id, created_at)
    WHERE status = 'PENDING' OR unheard;
