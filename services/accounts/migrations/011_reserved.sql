-- Placeholder: migration 011 belongs to the console-session work on another branch, and this
-- branch's 012 cannot run with a gap before it. Merging: take that branch's 011 and delete
-- this file. It changes nothing, but a database migrated with it records version 12 and would
-- skip the real 011: only throwaway (test and development) databases may run this branch.
SELECT 1;
