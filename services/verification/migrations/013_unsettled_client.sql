-- The settle queue (migration 008) names each verification's client: the reconciler, which
-- finds its work here across clients, then takes each verification by client and id, and a
-- settle or a rejection removes the verification's row by both
-- (docs/operations.md#past-one-postgresql). The queue stays on the coordinator.
ALTER TABLE verification.unsettled ADD COLUMN client_id uuid;
UPDATE verification.unsettled u SET client_id = v.client_id FROM verification.verifications v WHERE v.id = u.id;
-- A row was always written with its verification, in one statement; one without would be
-- nothing to settle.
DELETE FROM verification.unsettled WHERE client_id IS NULL;
ALTER TABLE verification.unsettled ALTER COLUMN client_id SET NOT NULL,
    DROP CONSTRAINT unsettled_pkey,
    ADD CONSTRAINT unsettled_pkey PRIMARY KEY (client_id, id);
