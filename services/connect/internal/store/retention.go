package store

import (
	"context"
	"time"

	"github.com/mnvhq/mnv/services/platform/pg"
)

// The purges of retention, judged by the database clock. Each removes up to limit rows past
// their time in one statement and returns how many it removed.
//
// A purge crosses clients, so it takes no lock to pick its rows (docs/operations.md#past-one-postgresql):
// a distributed database runs the delete on every shard, and a row another transaction holds is
// waited for rather than skipped. The outer WHERE repeats the condition, so a row that changed
// while the purge waited for it (an upload queued at the last moment) is left alone.

// PurgeDeliveries deletes deliveries that ended (SUCCEEDED or FAILED) and were queued more
// than age ago. Their attempts stay in the sync history.
func (s *Store) PurgeDeliveries(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return pg.Purge(ctx, s.db, "deliveries", `DELETE FROM connect.deliveries
		WHERE status <> 'PENDING' AND created_at < now() - make_interval(secs => $1)
		  AND (client_id, id) IN (SELECT client_id, id FROM connect.deliveries
			WHERE status <> 'PENDING' AND created_at < now() - make_interval(secs => $1)
			ORDER BY created_at LIMIT $2)`, age, limit)
}

// PurgeSyncEvents deletes sync events that finished more than age ago.
func (s *Store) PurgeSyncEvents(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return pg.Purge(ctx, s.db, "sync events", `DELETE FROM connect.sync_events
		WHERE finished_at < now() - make_interval(secs => $1)
		  AND (client_id, id) IN (SELECT client_id, id FROM connect.sync_events
			WHERE finished_at < now() - make_interval(secs => $1)
			ORDER BY finished_at LIMIT $2)`, age, limit)
}

// PurgeImportJobs deletes import jobs that ended (COMPLETED or FAILED) more than age ago, with
// any chunk of their file left behind. The profiles they wrote stay.
func (s *Store) PurgeImportJobs(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return pg.Purge(ctx, s.db, "import jobs", `DELETE FROM connect.import_jobs
		WHERE status IN ('COMPLETED', 'FAILED') AND finished_at < now() - make_interval(secs => $1)
		  AND (client_id, id) IN (SELECT client_id, id FROM connect.import_jobs
			WHERE status IN ('COMPLETED', 'FAILED') AND finished_at < now() - make_interval(secs => $1)
			ORDER BY finished_at LIMIT $2)`, age, limit)
}

// PurgeAbandonedUploads deletes jobs still UPLOADING, with their chunks, created more than age
// ago: uploads whose replica died before the last byte.
func (s *Store) PurgeAbandonedUploads(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return pg.Purge(ctx, s.db, "abandoned uploads", `DELETE FROM connect.import_jobs
		WHERE status = 'UPLOADING' AND created_at < now() - make_interval(secs => $1)
		  AND (client_id, id) IN (SELECT client_id, id FROM connect.import_jobs
			WHERE status = 'UPLOADING' AND created_at < now() - make_interval(secs => $1)
			ORDER BY created_at LIMIT $2)`, age, limit)
}
