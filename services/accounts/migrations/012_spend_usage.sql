-- The spend route's roll-up (docs/architecture.md#usage): a client's ledger summed per UTC day
-- of its entries and kind, credits taken and given apart. A day is written once, whole, when
-- no transaction that could still append to it is open (store.RollUpSpend); the route reads the
-- days before the watermark here and the entries after it from the ledger, in one statement.
CREATE TABLE accounts.spend_days (
    client_id uuid   NOT NULL,
    day       date   NOT NULL,
    kind      text   NOT NULL,
    count     bigint NOT NULL CHECK (count > 0),
    charged   bigint NOT NULL,
    credited  bigint NOT NULL,
    PRIMARY KEY (client_id, day, kind)
);

-- The watermark: every day before rolled_until is in spend_days, for every client, and every
-- entry of a day from rolled_until on has a seq above tail_seq, so the route reads a client's
-- tail along the ledger's key (client_id, seq). NULL until the first roll-up. One row, locked by
-- the roll-up so replicas take turns.
CREATE TABLE accounts.spend_rollup (
    one           boolean PRIMARY KEY DEFAULT true CHECK (one),
    rolled_until  date,
    tail_seq      bigint NOT NULL DEFAULT 0
);
INSERT INTO accounts.spend_rollup DEFAULT VALUES;

-- The ledger's sequence as the roll-up found it, each value read before its time: every entry
-- of a transaction begun after taken_at has a seq above seq. The roll-up keeps the newest mark
-- at or before its watermark and deletes older ones.
CREATE TABLE accounts.spend_marks (
    taken_at timestamptz PRIMARY KEY,
    seq      bigint      NOT NULL
);

-- The roll-up reads the ledger of a range of days across clients: appended in time order, its
-- entries sit on the table's pages in that order, which a BRIN index narrows for a few pages of
-- index and next to nothing per debit.
CREATE INDEX ledger_created_brin ON accounts.ledger USING brin (created_at);
