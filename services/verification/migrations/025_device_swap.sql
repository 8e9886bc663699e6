-- The workflow's device-swap check (docs/api-decisions.md#workflows), made with its SIM-swap
-- one: what it found, and when the operator answered. Both checks may now also say
-- NOT_OFFERED: no operator of the number's country offers the API (told apart from
-- UNAVAILABLE, an operator that did not answer).
ALTER TABLE verification.workflows DROP CONSTRAINT workflows_sim_swap_check;
ALTER TABLE verification.workflows ADD CONSTRAINT workflows_sim_swap_check
    CHECK (sim_swap IN ('NOT_CHECKED', 'NOT_SWAPPED', 'SWAPPED', 'UNAVAILABLE', 'NOT_OFFERED'));
ALTER TABLE verification.workflows
    ADD COLUMN device_swap text NOT NULL DEFAULT 'NOT_CHECKED'
        CHECK (device_swap IN ('NOT_CHECKED', 'NOT_SWAPPED', 'SWAPPED', 'UNAVAILABLE', 'NOT_OFFERED')),
    ADD COLUMN device_checked_at timestamptz;
