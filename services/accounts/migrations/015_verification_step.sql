-- A step of a verification workflow priced on its own (an SMS code) is a kind of its own in the
-- ledger and the prices (docs/architecture.md#verification-workflows): VERIFICATION_STEP, its
-- variant the channel and the number's country (SMS_OTP:GB).
ALTER TABLE accounts.ledger DROP CONSTRAINT ledger_kind_check;
ALTER TABLE accounts.ledger ADD CONSTRAINT ledger_kind_check CHECK (kind IN ('TOP_UP', 'VERIFICATION',
    'CONNECT_ENRICHMENT', 'STUCK_PLUS_REVEAL', 'VERIFICATION_STEP', 'REFUND', 'ADJUSTMENT'));
ALTER TABLE accounts.prices DROP CONSTRAINT prices_kind_check;
ALTER TABLE accounts.prices ADD CONSTRAINT prices_kind_check CHECK (kind IN ('VERIFICATION',
    'CONNECT_ENRICHMENT', 'STUCK_PLUS_REVEAL', 'VERIFICATION_STEP'));
