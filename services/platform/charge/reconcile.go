package charge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/money"
)

// Claims is the port through which the reconciler finds what a crash or an absent accounts
// left PENDING.
//
// Claim runs fn in one transaction of the owner with up to limit intents PENDING since before
// that no other transaction holds (FOR UPDATE SKIP LOCKED: replicas share the work, and a
// request settling its own record is skipped), held until it ends, and Books that write in that
// transaction; what fn's Books wrote commits when fn returns nil.
type Claims[R any] interface {
	Claim(ctx context.Context, before time.Time, limit int, fn func(ctx context.Context, pending []Intent[R], b Books[R]) error) error
}

// Reconciler batch and debit bounds.
const (
	// ReconcileBatch bounds how many intents one transaction of the reconciler claims.
	ReconcileBatch = 100
	// reconcileDebitTimeout bounds each debit of the reconciler, whose transaction holds the
	// claims of its batch.
	reconcileDebitTimeout = 10 * time.Second
)

// Reconciler finishes intents left PENDING: it debits their reference again (accounts answers a
// charge it made with that charge) and settles, rejects or voids them, as Saga.Complete does.
type Reconciler[R any] struct {
	// What names the records, for the log ("verifications").
	What   string
	Ledger money.Ledger
	Claims Claims[R]
	// After is how long an intent stays PENDING before the reconciler takes it: its request has
	// given up on it by then.
	After time.Duration
	Log   *zap.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Run reconciles every every until ctx ends.
func (r *Reconciler[R]) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := r.Once(ctx); err != nil && ctx.Err() == nil {
				r.Log.Warn("reconcile pending "+r.What, zap.Error(err))
			} else if n > 0 {
				r.Log.Info("settled pending "+r.What, zap.Int("count", n))
			}
		}
	}
}

// Once finishes one batch and returns how many intents it settled, rejected or voided. When
// accounts is away it stops there, keeping what it finished, and the rest wait for the next
// round; an intent that fails for a reason of its own stays PENDING without holding up the
// ones after it.
func (r *Reconciler[R]) Once(ctx context.Context) (int, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	saga := Saga[R]{Ledger: r.Ledger, DebitTimeout: reconcileDebitTimeout}
	n := 0
	err := r.Claims.Claim(ctx, now().Add(-r.After), ReconcileBatch, func(ctx context.Context, pending []Intent[R], b Books[R]) error {
		for _, in := range pending {
			out, _, err := saga.Complete(ctx, b, in)
			switch {
			case out != Pending:
				n++
			case errors.Is(err, fault.ErrUnavailable) && money.Away(err):
				return nil
			default:
				r.Log.Warn(r.What+": charge not settled", zap.String("reference", in.Charge.Reference), zap.Error(err))
			}
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("reconcile %s: %w", r.What, err)
	}
	return n, nil
}
