-- What settled and Connect has not been told yet: a row per settled verification, its
-- verification.completed event and, when VERIFIED, its number's record. A settle wrote a River
-- job per batch instead, and under a light load a batch is one verify: the job's insert, fetch
-- and completion (each touching five indexes) and its two calls to Connect cost more than the
-- verify's own writes (make bench, issue 15). A row here is one heap tuple and one right-edge
-- index entry; a drain job (relay.Drain) takes every row there is in one pass.
CREATE TABLE verification.relay_queue (
    seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queued_at       timestamptz NOT NULL DEFAULT now(),
    -- The event as outbox.EventJSON writes it.
    event           text        NOT NULL,
    client_id       uuid        NOT NULL,
    verification_id uuid        NOT NULL,
    -- Set for a VERIFIED verification alone: the record of its number Connect keeps.
    number_hash     bytea,
    verified_at     timestamptz
);
