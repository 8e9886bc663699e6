-- Events of the account's money (issue 13): the state that makes each one fire once.

-- The balance below which a debit emits balance.low; NULL takes the service's default
-- (MNV_LOW_BALANCE_THRESHOLD), 0 never alerts. It sits on the balance row the debits already
-- lock and read, so deciding a crossing costs no query.
ALTER TABLE accounts.balances
    ADD COLUMN low_balance_threshold bigint CHECK (low_balance_threshold >= 0),
    -- The expiry that balance.expiring and balance.expired were sent for: each is sent once per
    -- expiry, and a new expiry (a top-up that extends it) differs, which re-arms both.
    ADD COLUMN expiring_notified_for timestamptz,
    ADD COLUMN expired_notified_for  timestamptz;

-- The expiry job looks only at balances that expire; most never do.
CREATE INDEX balances_expiring ON accounts.balances (expires_at) WHERE expires_at IS NOT NULL;
