-- A client's verification workflow policy (docs/api-decisions.md#workflows): the default
-- settings and the per-country overrides, as the API writes them, validated by
-- workflows.Policy.Validate before they are stored. No row: the defaults
-- (workflows.DefaultPolicy).
CREATE TABLE verification.workflow_policies (
    client_id  uuid        NOT NULL,
    policy     jsonb       NOT NULL,
    -- Who wrote it last: principal.Principal.Credential() (key:<id> or session:<id>).
    updated_by text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client_id)
);
