-- A person manages their own passkeys in the console (docs/api-decisions.md#console): each has a
-- name of their choosing, and a signed-in person may register another one, a ceremony of its
-- own purpose bound to the session that began it.
ALTER TABLE accounts.passkeys ADD COLUMN name text NOT NULL DEFAULT '' CHECK (length(name) <= 100);

ALTER TABLE accounts.webauthn_ceremonies DROP CONSTRAINT webauthn_ceremonies_purpose_check;
ALTER TABLE accounts.webauthn_ceremonies ADD CONSTRAINT webauthn_ceremonies_purpose_check
    CHECK (purpose IN ('sign-in', 'register', 'step-up', 'sso', 'passkey'));
