-- Enrichments are recorded before they are charged, as verifications are: a charge never exists
-- without its record, and each record is charged at most once, under the debit reference
-- 'enrichment:' || id. A record is PENDING until it is SETTLED (charged and written onto the
-- profile), REJECTED (accounts refused the debit: nothing charged, nothing written) or CANCELLED
-- (the profile was erased first: nothing charged, or the charge refunded).
CREATE TABLE connect.enrichments (
    id          uuid PRIMARY KEY,
    client_id   uuid        NOT NULL,
    -- Not a foreign key: the record outlives an erased profile, for the money.
    profile_id  uuid        NOT NULL,
    status      text        NOT NULL CHECK (status IN ('PENDING', 'SETTLED', 'REJECTED', 'CANCELLED')),
    -- SHA-256 of the credential, Idempotency-Key and profile of the request that created the
    -- record, while a retry under that key must find it: a PENDING record (resumed, not charged
    -- again) or one the reconciler settled (answered). Cleared once the request's answer is
    -- given, so the same key after its idempotency record expired is a new enrichment.
    request_key bytea,
    charged     bigint      NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    settled_at  timestamptz
);

CREATE UNIQUE INDEX enrichments_request_key ON connect.enrichments (client_id, request_key) WHERE request_key IS NOT NULL;
-- What the reconciler reads: the PENDING records, oldest first.
CREATE INDEX enrichments_pending ON connect.enrichments (created_at) WHERE status = 'PENDING';
