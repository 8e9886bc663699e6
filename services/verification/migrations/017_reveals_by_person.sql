-- A reveal is made by an API key or by a person in the console (docs/api-decisions.md#console):
-- the audit row names one of them.
ALTER TABLE verification.stuck_plus_reveals ALTER COLUMN key_id DROP NOT NULL;
ALTER TABLE verification.stuck_plus_reveals ADD COLUMN person_id uuid;
ALTER TABLE verification.stuck_plus_reveals ADD CONSTRAINT stuck_plus_reveals_who
    CHECK ((key_id IS NULL) <> (person_id IS NULL));
