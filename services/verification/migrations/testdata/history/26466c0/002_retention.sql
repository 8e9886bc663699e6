-- Retention: what the purges need.

-- A stuck-plus session's number is dropped after its retention; the session row and its
-- reveal audit stay.
ALTER TABLE verification.stuck_plus_sessions
    ALTER COLUMN number_sealed DROP NOT NULL,
    ALTER COLUMN number_hash DROP NOT NULL;
CREATE INDEX stuck_plus_sessions_numbers_kept ON verification.stuck_plus_sessions (created_at) WHERE number_sealed IS NOT NULL;

-- Capture sessions and browser transactions go some time after they expire. A session's delete
-- checks the rows that reference it, which needs these indexes (verifications_session is partial,
-- so the foreign-key check cannot use it).
CREATE INDEX sessions_expiry ON verification.sessions (expires_at);
CREATE INDEX transactions_expiry ON verification.transactions (expires_at);
CREATE INDEX transactions_session ON verification.transactions (session_id);
CREATE INDEX verifications_session_ref ON verification.verifications (session_id);

-- Relayed outbox rows go after their retention.
CREATE INDEX outbox_relayed ON verification.outbox (relayed_at) WHERE relayed_at IS NOT NULL;
