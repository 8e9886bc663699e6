// Package retention decides how long the connect service keeps what it no longer needs, as
// purge rules (services/platform/purge runs them). Kept for good: profiles (until the client
// erases them), the erasure records (what was erased, when: no personal data), the verified
// numbers that match profiles (a keyed hash per number), and integrations.
package retention

import (
	"context"
	"time"

	"github.com/mnvhq/mnv/services/connect/internal/imports"
	"github.com/mnvhq/mnv/services/platform/purge"
)

// Store is what retention needs of the service's storage: each purge removes up to limit rows
// older than age, judged by the database clock, and returns how many it removed.
type Store interface {
	PurgeAbandonedUploads(ctx context.Context, age time.Duration, limit int) (int64, error)
	PurgeDeliveries(ctx context.Context, age time.Duration, limit int) (int64, error)
	PurgeSyncEvents(ctx context.Context, age time.Duration, limit int) (int64, error)
	PurgeImportJobs(ctx context.Context, age time.Duration, limit int) (int64, error)
	PurgeWebhookEvents(ctx context.Context, age time.Duration, limit int) (int64, error)
}

// Config is how long each kind of row is kept; 0 keeps it for good.
type Config struct {
	// Deliveries: finished deliveries (the queue's done rows), counted from their queueing.
	Deliveries time.Duration
	// SyncEvents: the sync history, counted from each attempt's end.
	SyncEvents time.Duration
	// ImportJobs: finished import jobs, counted from their end.
	ImportJobs time.Duration
	// WebhookEvents: events accepted for webhook delivery, with their deliveries and attempts
	// (the delivery log), counted from their acceptance; never while a delivery is PENDING.
	WebhookEvents time.Duration
}

// Rules returns the purge rules of cfg over st, and always the one of abandoned uploads.
func Rules(st Store, cfg Config) []purge.Rule {
	return purge.Rules(
		purge.Aged{Name: "abandoned uploads", Age: imports.AbandonedUploadAge, Purge: st.PurgeAbandonedUploads},
		purge.Aged{Name: "finished deliveries", Age: cfg.Deliveries, Purge: st.PurgeDeliveries},
		purge.Aged{Name: "sync events", Age: cfg.SyncEvents, Purge: st.PurgeSyncEvents},
		purge.Aged{Name: "finished import jobs", Age: cfg.ImportJobs, Purge: st.PurgeImportJobs},
		purge.Aged{Name: "webhook events", Age: cfg.WebhookEvents, Purge: st.PurgeWebhookEvents},
	)
}
