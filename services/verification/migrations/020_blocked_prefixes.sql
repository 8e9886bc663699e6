-- The prefixes no one-time code is sent to by SMS, for any client (docs/architecture.md, "Pumping
-- controls"): written once when a prefix's conversion collapses at volume, or by an operator;
-- deleting the row lifts the block. Global, so a Reference table.
CREATE TABLE verification.blocked_prefixes (
    prefix     text PRIMARY KEY CHECK (prefix ~ '^\+[1-9][0-9]{0,14}$'),
    reason     text NOT NULL CHECK (reason <> ''),
    starts     bigint NOT NULL DEFAULT 0,
    verified   bigint NOT NULL DEFAULT 0,
    blocked_at timestamptz NOT NULL DEFAULT now()
);
