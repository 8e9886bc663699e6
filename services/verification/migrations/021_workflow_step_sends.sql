-- How many times the SMS job has handed a step's message to the SMS centre: written and
-- committed before each submit, so an attempt that finds it above zero with no message ids
-- recorded knows an earlier one died mid-send and its message is in doubt
-- (docs/architecture.md, "SMS over SMPP": what is guaranteed across a crash).
ALTER TABLE verification.workflow_steps ADD COLUMN send_attempts int NOT NULL DEFAULT 0 CHECK (send_attempts >= 0);
