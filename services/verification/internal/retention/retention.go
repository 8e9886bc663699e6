// Package retention decides how long the verification service keeps what it no longer needs,
// as purge rules (services/platform/purge). Kept for good: verifications (each is the record of
// a charge in the accounts ledger, or of a decision) and the stuck-plus reveal audit.
package retention

import (
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mnvhq/mnv/services/platform/purge"
	"github.com/mnvhq/mnv/services/verification/internal/store"
)

// Config is how long each kind of row is kept; 0 keeps it for good.
type Config struct {
	// Sessions: capture sessions and browser transactions, counted from their expiry. Those a
	// verification references stay (the verification needs its session); a transaction that
	// made a stuck-plus session stays with it.
	Sessions time.Duration
	// StuckPlusNumbers: the sealed number of a stuck-plus session, counted from its capture.
	// The session (masked number) and its reveals stay.
	StuckPlusNumbers time.Duration
	// Outbox: verified numbers relayed to Connect, counted from the relay.
	Outbox time.Duration
}

// Rules returns the purge rules of cfg, in an order that frees rows for the next rule:
// transactions before the sessions they reference.
func Rules(pool *pgxpool.Pool, cfg Config) []purge.Rule {
	return purge.Over(pool,
		purge.Aged{Name: "expired browser transactions", Age: cfg.Sessions, Purge: store.PurgeTransactions},
		purge.Aged{Name: "expired capture sessions", Age: cfg.Sessions, Purge: store.PurgeSessions},
		purge.Aged{Name: "stuck-plus numbers", Age: cfg.StuckPlusNumbers, Purge: store.DropStuckPlusNumbers},
		purge.Aged{Name: "relayed outbox rows", Age: cfg.Outbox, Purge: store.PurgeOutbox},
	)
}
