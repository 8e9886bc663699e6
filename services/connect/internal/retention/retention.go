// Package retention decides how long the connect service keeps what it no longer needs, as
// purge rules (services/platform/purge). Kept for good: profiles (until the client erases
// them), the erasure records (what was erased, when: no personal data), the verified numbers
// that match profiles (a keyed hash per number), and integrations.
package retention

import (
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mnvhq/mnv/services/connect/internal/imports"
	"github.com/mnvhq/mnv/services/connect/internal/store"
	"github.com/mnvhq/mnv/services/platform/purge"
)

// Config is how long each kind of row is kept; 0 keeps it for good.
type Config struct {
	// Deliveries: finished deliveries (the queue's done rows), counted from their queueing.
	Deliveries time.Duration
	// SyncEvents: the sync history, counted from each attempt's end.
	SyncEvents time.Duration
	// ImportJobs: finished import jobs, counted from their end.
	ImportJobs time.Duration
}

// Rules returns the purge rules of cfg, and always the one of abandoned uploads.
func Rules(pool *pgxpool.Pool, cfg Config) []purge.Rule {
	return purge.Over(pool,
		purge.Aged{Name: "abandoned uploads", Age: imports.AbandonedUploadAge, Purge: store.PurgeAbandonedUploads},
		purge.Aged{Name: "finished deliveries", Age: cfg.Deliveries, Purge: store.PurgeDeliveries},
		purge.Aged{Name: "sync events", Age: cfg.SyncEvents, Purge: store.PurgeSyncEvents},
		purge.Aged{Name: "finished import jobs", Age: cfg.ImportJobs, Purge: store.PurgeImportJobs},
	)
}
