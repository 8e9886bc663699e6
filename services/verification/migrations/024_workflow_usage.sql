-- The workflow usage route's roll-up (docs/architecture.md#usage): a client's workflow steps
-- counted per UTC day each started, channel, country and status, with the credits their own
-- charges took (settled ones). Written like usage_days (store.RollUpWorkflowUsage): a day once
-- it is over and no transaction that could still add a step to it is open. Unlike a
-- verification, a step's status and charge move after its day (a late delivery receipt, a
-- charge settled on a retry), so the transaction that moves a step of a day already rolled up
-- moves its count here too (store.CorrectStepUsage): the route reads the days before the
-- watermark here and the others from the steps, in one statement.
CREATE TABLE verification.workflow_usage_days (
    client_id uuid   NOT NULL,
    day       date   NOT NULL,
    channel   text   NOT NULL,
    country   text   NOT NULL,
    status    text   NOT NULL,
    count     bigint NOT NULL CHECK (count >= 0),
    charged   bigint NOT NULL CHECK (charged >= 0),
    PRIMARY KEY (client_id, day, channel, country, status)
);
-- A correction that counts a row down to 0 deletes it in the same transaction: a row is never
-- left at 0 (the CHECK allows the moment in between).

-- The watermark: every day before rolled_until is in workflow_usage_days, for every client;
-- NULL until the first roll-up. One row, locked by the roll-up (FOR UPDATE) so replicas take
-- turns, and by a correction (FOR SHARE) so a day is never rolled up while a step of it moves.
CREATE TABLE verification.workflow_usage_rollup (
    one          boolean PRIMARY KEY DEFAULT true CHECK (one),
    rolled_until date
);
INSERT INTO verification.workflow_usage_rollup DEFAULT VALUES;

-- The roll-up reads the steps of a range of days across clients: a BRIN index, as on the
-- verifications (migration 016), narrows it to the pages of those days for next to nothing
-- per insert.
CREATE INDEX workflow_steps_started_brin ON verification.workflow_steps USING brin (started_at);
