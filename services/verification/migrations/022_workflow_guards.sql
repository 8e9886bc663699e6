-- What the pumping controls need of a workflow's start when a later step sends its SMS
-- (docs/architecture.md, "Pumping controls"): an SMS step may begin long after the start (a
-- silent step timed out by the sweep), with no request of the client's to read them from.
-- sandbox: the starting credential's client had the SANDBOX feature (its codes go to the
-- sandbox SMSC, so its country allow-list is not asked). end_user_address: the end user's
-- address the start gave, kept as the per-address budget keys it (an IPv6 address by its /64),
-- NULL when the start gave none.
ALTER TABLE verification.workflows
    ADD COLUMN sandbox          boolean NOT NULL DEFAULT false,
    ADD COLUMN end_user_address inet;
