-- The usage route's roll-up (docs/architecture.md#usage): a client's verifications counted per
-- UTC day of their record, status, operator and method, with the credits charged. A day is
-- written once, whole, when it can no longer change (store.RollUpUsage): it is over, none of
-- its verifications waits for its charge, and no transaction that could still record one in it
-- is open. The route reads the days before the watermark here and the days after it from the
-- verifications themselves, in one statement.
CREATE TABLE verification.usage_days (
    client_id    uuid   NOT NULL,
    day          date   NOT NULL,
    status       text   NOT NULL,
    operator_id  text   NOT NULL,
    service_type text   NOT NULL,
    count        bigint NOT NULL CHECK (count > 0),
    charged      bigint NOT NULL,
    PRIMARY KEY (client_id, day, status, operator_id, service_type)
);

-- The watermark: every day before rolled_until is in usage_days, for every client; NULL until
-- the first roll-up. One row, locked by the roll-up so replicas take turns.
CREATE TABLE verification.usage_rollup (
    one          boolean PRIMARY KEY DEFAULT true CHECK (one),
    rolled_until date
);
INSERT INTO verification.usage_rollup DEFAULT VALUES;

-- The roll-up reads the verifications of a range of days across clients. Recorded in time
-- order, they sit on the table's pages in that order, which a BRIN index narrows to a few
-- blocks per range for a few pages of index, and which a verify's insert barely touches (a
-- btree on created_at would be one more index entry per verify).
CREATE INDEX verifications_created_brin ON verification.verifications USING brin (created_at);
