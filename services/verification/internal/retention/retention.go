// Package retention decides how long the verification service keeps what it no longer needs,
// as purge rules (services/platform/purge runs them). Kept for good: verifications (each is the
// record of a charge in the accounts ledger, or of a decision) and the stuck-plus reveal audit.
package retention

import (
	"context"
	"time"

	"github.com/mnvhq/mnv/services/platform/purge"
)

// Store is what retention needs of the service's storage: purges that each remove up to limit
// rows older than age in one statement and return how many they removed.
type Store interface {
	PurgeTransactions(ctx context.Context, age time.Duration, limit int) (int64, error)
	PurgeSessions(ctx context.Context, age time.Duration, limit int) (int64, error)
	DropStuckPlusNumbers(ctx context.Context, age time.Duration, limit int) (int64, error)
	DropWorkflowNumbers(ctx context.Context, age time.Duration, limit int) (int64, error)
}

// Config is how long each kind of row is kept; 0 keeps it for good.
type Config struct {
	// Sessions: capture sessions and browser transactions, counted from their expiry. Those a
	// verification references stay (the verification needs its session); a transaction that
	// made a stuck-plus session stays with it.
	Sessions time.Duration
	// StuckPlusNumbers: the sealed number of a stuck-plus session, counted from its capture.
	// The session (masked number) and its reveals stay.
	StuckPlusNumbers time.Duration
	// WorkflowNumbers: the sealed number (and its hash) of a verification workflow, counted
	// from its end. The workflow (masked number), its steps and their charges stay.
	WorkflowNumbers time.Duration
}

// Rules returns the rules of cfg over st, in an order that frees rows for the next rule:
// transactions before the sessions they reference. A kind kept for good has no rule.
func Rules(st Store, cfg Config) []purge.Rule {
	return purge.Rules(
		purge.Aged{Name: "expired browser transactions", Age: cfg.Sessions, Purge: st.PurgeTransactions},
		purge.Aged{Name: "expired capture sessions", Age: cfg.Sessions, Purge: st.PurgeSessions},
		purge.Aged{Name: "stuck-plus numbers", Age: cfg.StuckPlusNumbers, Purge: st.DropStuckPlusNumbers},
		purge.Aged{Name: "workflow numbers", Age: cfg.WorkflowNumbers, Purge: st.DropWorkflowNumbers},
	)
}
