// Package relay delivers the verification outbox to Connect: at least once, in order of the
// outbox, in batches; a row is marked relayed only after Connect has acknowledged it, and
// Connect's receiver is idempotent. Replicas share the work (FOR UPDATE SKIP LOCKED).
package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
)

// Relay moves outbox rows to Connect.
type Relay struct {
	pool    *pgxpool.Pool
	connect connectv1.ConnectInternalServiceClient
	log     *zap.Logger
	batch   int
}

// New returns a Relay.
func New(pool *pgxpool.Pool, connect connectv1.ConnectInternalServiceClient, log *zap.Logger) *Relay {
	return &Relay{pool: pool, connect: connect, log: log, batch: 500}
}

// Run relays until ctx ends, looking every poll when there is nothing to do.
func (r *Relay) Run(ctx context.Context, poll time.Duration) {
	for ctx.Err() == nil {
		n, err := r.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("relay the outbox to connect", zap.Error(err))
		}
		if n < r.batch {
			select {
			case <-ctx.Done():
			case <-time.After(poll):
			}
		}
	}
}

// RunOnce relays one batch and returns its size.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id, client_id::text, verification_id::text, number_hash, verified_at
			FROM verification.outbox WHERE relayed_at IS NULL ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`, r.batch)
		if err != nil {
			return fmt.Errorf("read outbox: %w", err)
		}
		var ids []int64
		req := &connectv1.RecordVerifiedNumbersRequest{}
		for rows.Next() {
			var (
				id   int64
				item connectv1.VerifiedNumber
				at   time.Time
			)
			if err := rows.Scan(&id, &item.ClientId, &item.VerificationId, &item.NumberHash, &at); err != nil {
				rows.Close()
				return fmt.Errorf("read outbox: %w", err)
			}
			item.VerifiedAt = timestamppb.New(at)
			ids = append(ids, id)
			req.Items = append(req.Items, &item)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read outbox: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		if _, err := r.connect.RecordVerifiedNumbers(ctx, req); err != nil {
			return fmt.Errorf("send to connect: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE verification.outbox SET relayed_at = now() WHERE id = ANY($1)`, ids); err != nil {
			return fmt.Errorf("mark relayed: %w", err)
		}
		n = len(ids)
		return nil
	})
	return n, err
}

// Lag is the age of the oldest fact not relayed yet (0 when none): the outbox lag metric.
func Lag(ctx context.Context, pool *pgxpool.Pool) (time.Duration, error) {
	var oldest *time.Time
	if err := pool.QueryRow(ctx, `SELECT min(created_at) FROM verification.outbox WHERE relayed_at IS NULL`).Scan(&oldest); err != nil {
		return 0, err
	}
	if oldest == nil {
		return 0, nil
	}
	return time.Since(*oldest), nil
}
