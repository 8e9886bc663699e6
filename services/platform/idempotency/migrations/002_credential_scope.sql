-- Keys are scoped to the credential that sent them, not to the client
-- (docs/api-decisions.md#idempotency): one credential's key never replays another credential's
-- answer. credential is 'key:<api key id>', 'sdk:<sdk token id>', or 'bootstrap' for the first-key
-- request, which has no credential yet.
--
-- Rows written before this migration get '' and so match no request any more: they expire with
-- the retention like any other. An older binary still running during a roll inserts '' too,
-- and shares those rows only with its own kind.
ALTER TABLE {{.schema}}.idempotency_keys
    ADD COLUMN credential text NOT NULL DEFAULT '',
    -- What the stored answer is about (e.g. 'profile:<id>'), so erasing that forgets the answer.
    ADD COLUMN subject    text;

ALTER TABLE {{.schema}}.idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
ALTER TABLE {{.schema}}.idempotency_keys ADD PRIMARY KEY (client_id, credential, key);

CREATE INDEX idempotency_keys_subject ON {{.schema}}.idempotency_keys (client_id, subject) WHERE subject IS NOT NULL;
