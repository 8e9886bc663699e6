package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/verification/internal/domain"
)

// PendingOutbox reads up to limit facts not relayed yet, oldest first, skipping those another
// replica is relaying. Inside a transaction, it locks them until it ends.
func (st *Store) PendingOutbox(ctx context.Context, limit int) ([]domain.OutboxFact, error) {
	rows, err := st.db.Query(ctx, `SELECT id, client_id::text, verification_id::text, number_hash, verified_at
		FROM verification.outbox WHERE relayed_at IS NULL ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`, limit)
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.OutboxFact, error) {
		var f domain.OutboxFact
		return f, r.Scan(&f.ID, &f.ClientID, &f.VerificationID, &f.NumberHash, &f.VerifiedAt)
	})
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	return out, nil
}

// MarkRelayed records that Connect acknowledged the facts ids.
func (st *Store) MarkRelayed(ctx context.Context, ids []int64) error {
	if _, err := st.db.Exec(ctx, `UPDATE verification.outbox SET relayed_at = now() WHERE id = ANY($1)`, ids); err != nil {
		return fmt.Errorf("mark relayed: %w", err)
	}
	return nil
}

// OutboxBacklog reads the facts not relayed yet: when the oldest was written (nil when none)
// and how many there are, up to maxCounted. Both read the partial index of pending rows
// (outbox_pending), never the relayed ones; ids follow insertion, so the lowest pending id is
// the oldest fact (give or take a transaction).
func (st *Store) OutboxBacklog(ctx context.Context, maxCounted int64) (oldest *time.Time, pending int64, err error) {
	err = st.db.QueryRow(ctx, `SELECT
			(SELECT created_at FROM verification.outbox WHERE relayed_at IS NULL ORDER BY id LIMIT 1),
			(SELECT count(*) FROM (SELECT 1 FROM verification.outbox WHERE relayed_at IS NULL LIMIT $1) p)`,
		maxCounted).Scan(&oldest, &pending)
	if err != nil {
		return nil, 0, fmt.Errorf("outbox backlog: %w", err)
	}
	return oldest, pending, nil
}
