package store

import (
	"context"
	"fmt"

	"github.com/mnvhq/mnv/services/verification/internal/pumping"
)

// The blocked prefixes (migration 020) are global, a Reference table: a prefix blocked for one
// client's traffic is blocked for all of them, so these statements name no client.

// PrefixBlocked reports whether any of prefixes is blocked (pumping.Blocks).
func (st *Store) PrefixBlocked(ctx context.Context, prefixes []string) (bool, error) {
	var blocked bool
	if err := st.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM verification.blocked_prefixes WHERE prefix = ANY($1))`,
		prefixes).Scan(&blocked); err != nil {
		return false, fmt.Errorf("store: blocked prefixes: %w", err)
	}
	return blocked, nil
}

// BlockPrefix records b unless its prefix is blocked already; created says whether this call
// wrote the row, so of replicas that see the same collapse together, one raises the alert
// (pumping.Blocks).
func (st *Store) BlockPrefix(ctx context.Context, b pumping.Block) (bool, error) {
	tag, err := st.db.Exec(ctx, `INSERT INTO verification.blocked_prefixes (prefix, reason, starts, verified, blocked_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (prefix) DO NOTHING`, b.Prefix, b.Reason, b.Starts, b.Verified, b.At)
	if err != nil {
		return false, fmt.Errorf("store: block prefix: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}
