-- An SMS step in doubt (docs/architecture.md, "SMS over SMPP"): an attempt found it still
-- QUEUED with send_attempts > 0, so an earlier submit may have reached the SMS centre. The job
-- holds its resend until in_doubt_since plus MNV_SMS_IN_DOUBT_HOLD, waiting for a delivery
-- receipt that settles it; NULL while the step was never in doubt.
ALTER TABLE verification.workflow_steps ADD COLUMN in_doubt_since timestamptz;

-- A receipt whose message id was never recorded is matched against the SMS steps whose submit
-- may have reached the SMS centre (QUEUED with an attempt counted): few at any time, so this
-- index stays small whatever the table holds. It crosses clients, as the receipt names none.
CREATE INDEX workflow_steps_sending ON verification.workflow_steps (client_id, workflow_id)
    WHERE status = 'QUEUED' AND send_attempts > 0;
