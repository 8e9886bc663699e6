-- Verification workflows (docs/architecture.md#verification-workflows): one number verified
-- through the channels of the client's policy, in order, until one decides.
CREATE TABLE verification.workflows (
    client_id       uuid        NOT NULL,
    id              uuid        NOT NULL,
    -- The number sealed for this row (phone.Vault), its keyed hash, and its masked form. The
    -- sealed number and its hash are dropped MNV_RETENTION_WORKFLOW_NUMBERS after the workflow
    -- ends (retention); the masked form stays.
    number_sealed   bytea,
    number_hash     bytea,
    masked_number   text        NOT NULL,
    -- The number's region (ISO 3166-1 alpha-2), '' when the numbering plans cannot tell.
    country         text        NOT NULL,
    locale          text        NOT NULL DEFAULT '',
    -- The browser transaction whose page may check the code (docs/api-decisions.md#workflows):
    -- one workflow per transaction.
    transaction_id  uuid,
    -- The policy resolved for the number's country when the workflow started: an edit of the
    -- client's policy never changes a running workflow.
    policy          jsonb       NOT NULL,
    status          text        NOT NULL CHECK (status IN ('IN_PROGRESS', 'VERIFIED', 'NOT_VERIFIED', 'FAILED', 'EXPIRED')),
    decided_by      text        CHECK (decided_by IN ('SILENT', 'SMS_OTP')),
    reason          text,
    -- What the SIM-swap check found, when the policy asked for one, and when the operator
    -- answered.
    sim_swap        text        NOT NULL DEFAULT 'NOT_CHECKED' CHECK (sim_swap IN ('NOT_CHECKED', 'NOT_SWAPPED', 'SWAPPED', 'UNAVAILABLE')),
    sim_checked_at  timestamptz,
    -- The step in play (workflow_steps.seq).
    step_seq        int         NOT NULL DEFAULT 1,
    -- The one-time code in play: its step, the id of the derived key that hashed it, its keyed
    -- hash (otp), and the code sealed for the sender until the SMSC has it (then NULL: only the
    -- hash stays). Attempts are counted across resends.
    code_step_id    uuid,
    code_key_id     text,
    code_hash       bytea,
    code_sealed     bytea,
    code_issued_at  timestamptz,
    code_expires_at timestamptz,
    attempts        int         NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    resends         int         NOT NULL DEFAULT 0 CHECK (resends >= 0),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    ended_at        timestamptz,
    PRIMARY KEY (client_id, id)
);
CREATE INDEX workflows_client ON verification.workflows (client_id, created_at DESC, id);
-- The retention's way to the ended workflows that still hold their number.
CREATE INDEX workflows_ended_numbers ON verification.workflows (ended_at) WHERE number_sealed IS NOT NULL AND ended_at IS NOT NULL;
CREATE UNIQUE INDEX workflows_transaction ON verification.workflows (client_id, transaction_id) WHERE transaction_id IS NOT NULL;

-- A workflow's steps, one per channel tried (and one per SMS sent: a resend is a step).
CREATE TABLE verification.workflow_steps (
    client_id        uuid        NOT NULL,
    workflow_id      uuid        NOT NULL,
    seq              int         NOT NULL CHECK (seq >= 1),
    id               uuid        NOT NULL,
    channel          text        NOT NULL CHECK (channel IN ('SILENT', 'SMS_OTP')),
    -- The workflow's country, kept with each step for the usage route's breakdown.
    country          text        NOT NULL,
    status           text        NOT NULL CHECK (status IN ('PENDING', 'QUEUED', 'SENT', 'DELIVERED',
                                     'UNDELIVERABLE', 'VERIFIED', 'NOT_VERIFIED', 'UNDETERMINED',
                                     'FAILED', 'EXPIRED', 'TIMED_OUT', 'REJECTED', 'BLOCKED', 'SUPERSEDED')),
    reason           text,
    -- SILENT: the verification record its blob made (charged as that verify).
    verification_id  uuid,
    -- SMS_OTP: its charge through platform/charge (reference workflow-step:<id>).
    charge_status    text        NOT NULL DEFAULT 'NONE' CHECK (charge_status IN ('NONE', 'PENDING', 'SETTLED', 'REJECTED', 'VOIDED')),
    charged          bigint      NOT NULL DEFAULT 0 CHECK (charged >= 0),
    balance_after    bigint,
    started_at       timestamptz NOT NULL DEFAULT now(),
    -- When the step times out if nothing decided it.
    deadline         timestamptz NOT NULL,
    ended_at         timestamptz,
    PRIMARY KEY (client_id, workflow_id, seq),
    UNIQUE (client_id, id),
    FOREIGN KEY (client_id, workflow_id) REFERENCES verification.workflows (client_id, id)
);
-- The usage route reads a client's steps by the day they started.
CREATE INDEX workflow_steps_client_started ON verification.workflow_steps (client_id, started_at);

-- The sweep's way to the steps whose deadline may pass with nobody reading their workflow
-- (workflows.Service.Sweep): those not ended yet.
CREATE INDEX workflow_steps_open ON verification.workflow_steps (deadline) WHERE ended_at IS NULL;

-- The SMSC's message ids of a step: a delivery receipt names one.
CREATE TABLE verification.workflow_messages (
    client_id   uuid NOT NULL,
    provider_id text NOT NULL,
    step_id     uuid NOT NULL,
    PRIMARY KEY (client_id, provider_id),
    FOREIGN KEY (client_id, step_id) REFERENCES verification.workflow_steps (client_id, id)
);

-- A receipt arrives with the provider's message id alone: client_lookups maps it to its client
-- (kind 'sms_message', key the id's bytes), as it does a browser's transaction id.
ALTER TABLE verification.client_lookups DROP CONSTRAINT client_lookups_kind_check;
ALTER TABLE verification.client_lookups ADD CONSTRAINT client_lookups_kind_check
    CHECK (kind IN ('transaction', 'state', 'camara_request', 'camara_token', 'sms_message'));
