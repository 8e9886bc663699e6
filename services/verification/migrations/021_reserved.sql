-- Placeholder for the number reserved for the SMS helper (t35-sms): tern needs the numbers
-- without a gap. The merge keeps t35-sms's 021 when it has one, else renumbers 022 to 021.
SELECT 1;
