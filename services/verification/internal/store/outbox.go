package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mnvhq/mnv/services/platform/pg"

	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/relay"
)

// movedPerJob bounds the numbers of one job MoveOutbox writes.
const movedPerJob = 500

// MoveOutbox turns the verified numbers that the outbox table of earlier versions holds, not yet
// relayed to Connect, into relay jobs, and deletes them from the table, in the Store's
// transaction (refused outside one): each number is moved once, and nothing is lost if it rolls
// back. It returns how many it moved. The table no longer receives rows from this version; an
// older replica still running during an upgrade relays what it writes itself, and what it
// leaves is moved at the next start. The table is dropped by a later release.
func (st *Store) MoveOutbox(ctx context.Context) (int, error) {
	if _, ok := st.db.(pgx.Tx); !ok {
		return 0, fmt.Errorf("move the outbox: %w", pg.ErrNoTx)
	}
	rows, err := st.db.Query(ctx, `DELETE FROM verification.outbox WHERE relayed_at IS NULL
		RETURNING client_id::text, verification_id::text, number_hash, verified_at`)
	if err != nil {
		return 0, fmt.Errorf("move the outbox: %w", err)
	}
	numbers, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.VerifiedNumber, error) {
		var n domain.VerifiedNumber
		return n, r.Scan(&n.ClientID, &n.VerificationID, &n.NumberHash, &n.VerifiedAt)
	})
	if err != nil {
		return 0, fmt.Errorf("move the outbox: %w", err)
	}
	var params []river.InsertManyParams
	for chunk := range slices.Chunk(numbers, movedPerJob) {
		params = append(params, river.InsertManyParams{Args: relay.NewArgs(chunk...)})
	}
	if err := st.enqueue(ctx, params); err != nil {
		return 0, fmt.Errorf("move the outbox: %w", err)
	}
	return len(numbers), nil
}
