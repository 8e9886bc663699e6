// Package relay delivers the verification outbox to Connect: at least once, in order of the
// outbox, in batches; a row is marked relayed only after Connect has acknowledged it, and
// Connect's receiver is idempotent. Replicas share the work (FOR UPDATE SKIP LOCKED).
package relay

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/verification/internal/domain"
)

// Store is what the relay needs of the service's storage.
type Store interface {
	// PendingOutbox reads up to limit facts not relayed yet, oldest first, that no other
	// replica holds, and holds them until the transaction ends.
	PendingOutbox(ctx context.Context, limit int) ([]domain.OutboxFact, error)
	MarkRelayed(ctx context.Context, ids []int64) error
	// OutboxBacklog reads when the oldest fact not relayed was written (nil: none) and how many
	// there are, up to maxCounted.
	OutboxBacklog(ctx context.Context, maxCounted int64) (oldest *time.Time, pending int64, err error)
}

// Tx runs a function with the store inside one transaction.
type Tx interface {
	InTx(ctx context.Context, fn func(ctx context.Context, st Store) error) error
}

// Connect is Connect's receiver of verified numbers, idempotent: a fact it is told twice is
// kept once.
type Connect interface {
	RecordVerifiedNumbers(ctx context.Context, facts []domain.OutboxFact) error
}

// Relay moves outbox rows to Connect.
type Relay struct {
	st      Store
	tx      Tx
	connect Connect
	log     *zap.Logger
	batch   int

	// Metrics, when set, count relayed rows and failed rounds and are told the backlog.
	Metrics *Metrics
	// MeasureEvery is how often Run measures the backlog for Metrics.
	MeasureEvery time.Duration
	measured     time.Time
}

// New returns a Relay.
func New(st Store, tx Tx, connect Connect, log *zap.Logger) *Relay {
	return &Relay{st: st, tx: tx, connect: connect, log: log, batch: 500, MeasureEvery: 5 * time.Second}
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

// RunOnce relays one batch and returns its size. The batch's rows stay locked while Connect is
// told, and are marked relayed only once it has answered.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	n := 0
	err := r.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		facts, err := st.PendingOutbox(ctx, r.batch)
		if err != nil || len(facts) == 0 {
			return err
		}
		if err := r.connect.RecordVerifiedNumbers(ctx, facts); err != nil {
			return fmt.Errorf("send to connect: %w", err)
		}
		ids := make([]int64, len(facts))
		for i, f := range facts {
			ids[i] = f.ID
		}
		if err := st.MarkRelayed(ctx, ids); err != nil {
			return err
		}
		n = len(facts)
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
	lag, pending, err := r.Backlog(ctx)
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
// there are, up to MaxCounted. Both are indexed lookups, whatever the outbox's size.
func (r *Relay) Backlog(ctx context.Context) (lag time.Duration, pending int64, err error) {
	oldest, pending, err := r.st.OutboxBacklog(ctx, MaxCounted)
	if err != nil {
		return 0, 0, err
	}
	if oldest != nil {
		lag = max(time.Since(*oldest), 0)
	}
	return lag, pending, nil
}
