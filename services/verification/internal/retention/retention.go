// Package retention decides how long the verification service keeps what it no longer needs,
// as purge rules (services/platform/purge). Kept for good: verifications (each is the record of
// a charge in the accounts ledger, or of a decision) and the stuck-plus reveal audit.
package retention

import (
	"context"
	"time"
)

// Store is what retention needs of the service's storage: purges that each remove up to limit
// rows older than age in one statement and return how many they removed.
type Store interface {
	PurgeTransactions(ctx context.Context, age time.Duration, limit int) (int64, error)
	PurgeSessions(ctx context.Context, age time.Duration, limit int) (int64, error)
	DropStuckPlusNumbers(ctx context.Context, age time.Duration, limit int) (int64, error)
	PurgeOutbox(ctx context.Context, age time.Duration, limit int) (int64, error)
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
	// Outbox: verified numbers relayed to Connect, counted from the relay.
	Outbox time.Duration
}

// Rule is one kind of row past its retention, shaped as purge.Rule (which the app converts it
// to: platform/purge runs its statements on a pg.DB, which this package does not see).
type Rule struct {
	Name  string
	Purge func(ctx context.Context, limit int) (int64, error)
}

// Rules returns the rules of cfg over st, in an order that frees rows for the next rule:
// transactions before the sessions they reference. A kind kept for good has no rule.
func Rules(st Store, cfg Config) []Rule {
	var out []Rule
	for _, a := range []struct {
		name  string
		age   time.Duration
		purge func(ctx context.Context, age time.Duration, limit int) (int64, error)
	}{
		{"expired browser transactions", cfg.Sessions, st.PurgeTransactions},
		{"expired capture sessions", cfg.Sessions, st.PurgeSessions},
		{"stuck-plus numbers", cfg.StuckPlusNumbers, st.DropStuckPlusNumbers},
		{"relayed outbox rows", cfg.Outbox, st.PurgeOutbox},
	} {
		if a.age <= 0 {
			continue
		}
		out = append(out, Rule{Name: a.name, Purge: func(ctx context.Context, limit int) (int64, error) {
			return a.purge(ctx, a.age, limit)
		}})
	}
	return out
}
