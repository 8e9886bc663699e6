-- client_stats is kept by the store code now, in the transaction of the statement that changes a
-- client's profiles, with the counts the triggers computed: a table distributed by client runs
-- no trigger on the coordinator (docs/operations.md#past-one-postgresql). The counts the
-- triggers kept so far stay as they are.
--
-- A replica of the previous version still running after this migration (a rolling upgrade)
-- writes profiles without counting them; stop those replicas before migrating, or recount once
-- they are gone:
--   INSERT INTO connect.client_stats AS s (client_id, profiles, matched, enriched)
--   SELECT client_id, count(*), count(matched_at), count(enriched_at) FROM connect.profiles GROUP BY client_id
--   ON CONFLICT (client_id) DO UPDATE SET profiles = excluded.profiles, matched = excluded.matched, enriched = excluded.enriched;
DROP TRIGGER profiles_count_insert ON connect.profiles;
DROP TRIGGER profiles_count_update ON connect.profiles;
DROP TRIGGER profiles_count_delete ON connect.profiles;
DROP FUNCTION connect.profiles_count();
