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

	// Metrics, when set, count relayed rows and failed rounds and are told the backlog.
	Metrics *Metrics
	// MeasureEvery is how often Run measures the backlog for Metrics.
	MeasureEvery time.Duration
	measured     time.Time
}

// New returns a Relay.
func New(pool *pgxpool.Pool, connect connectv1.ConnectInternalServiceClient, log *zap.Logger) *Relay {
	return &Relay{pool: pool, connect: connect, log: log, batch: 500, MeasureEvery: 5 * time.Second}
}

// Run relays until ctx ends, looking every poll when there is nothing to do.
func (r *Relay) Run(ctx context.Context, poll time.Duration) {
	for ctx.Err() == nil {
		n, err := r.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("relay the outbox to connect", zap.Error(err))
			r.Metrics.failure()
		}
		r.measure(ctx)
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
	if err == nil {
		r.Metrics.relay(n)
	}
	return n, err
}

// measure tells Metrics the backlog, at most every MeasureEvery: two indexed lookups, whatever
// the outbox's size.
func (r *Relay) measure(ctx context.Context) {
	if r.Metrics == nil || time.Since(r.measured) < r.MeasureEvery {
		return
	}
	r.measured = time.Now()
	lag, pending, err := Backlog(ctx, r.pool)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("measure the outbox backlog", zap.Error(err))
		}
		return
	}
	r.Metrics.backlog(lag, pending)
}

// MaxCounted caps the pending count of Backlog, so that measuring a huge backlog stays cheap.
const MaxCounted = 100_000

// Backlog measures the facts not relayed yet: the age of the oldest (0 when none) and how many
// there are, up to MaxCounted. Both read the partial index of pending rows (outbox_pending),
// never the relayed ones; ids follow insertion, so the lowest pending id is the oldest fact (give
// or take a transaction).
func Backlog(ctx context.Context, pool *pgxpool.Pool) (lag time.Duration, pending int64, err error) {
	var oldest *time.Time
	err = pool.QueryRow(ctx, `SELECT
			(SELECT created_at FROM verification.outbox WHERE relayed_at IS NULL ORDER BY id LIMIT 1),
			(SELECT count(*) FROM (SELECT 1 FROM verification.outbox WHERE relayed_at IS NULL LIMIT $1) p)`,
		MaxCounted).Scan(&oldest, &pending)
	if err != nil {
		return 0, 0, fmt.Errorf("outbox backlog: %w", err)
	}
	if oldest != nil {
		lag = max(time.Since(*oldest), 0)
	}
	return lag, pending, nil
}
