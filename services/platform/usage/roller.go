package usage

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// Grace is how long after a day's end a roll-up waits before it writes the day: a margin over
// the checks of the stores' roll-ups (the day's last transactions ended), not what makes them
// exact.
const Grace = 5 * time.Minute

// StepDays is how many days one roll-up transaction writes at most, so that catching up
// (a first start over a year of rows) is a series of bounded transactions.
const StepDays = 31

// RollEvery is how often a service rolls up: a day closes once a day, and a pass that finds
// nothing to write is three short statements.
const RollEvery = 10 * time.Minute

// RollUpStep is a Roller's RollUp for a service: one transaction (inTx) in which write writes
// the next closed days, at most StepDays of them and each Grace after its end; it answers how
// many. write is the service's store method (its RollupStore's, as a method expression).
func RollUpStep[S any](ctx context.Context, inTx func(context.Context, func(context.Context, S) error) error,
	write func(st S, ctx context.Context, grace time.Duration, maxDays int) (until time.Time, days int, err error)) (days int, err error) {
	err = inTx(ctx, func(ctx context.Context, st S) error {
		_, days, err = write(st, ctx, Grace, StepDays)
		return err
	})
	return days, err
}

// Roller runs a service's roll-up of closed days: at start, then every Every. Each pass calls
// RollUp, one transaction writing up to StepDays days, until it writes none.
type Roller struct {
	// Name is what the logs call it.
	Name string
	// RollUp writes the next closed days and answers how many.
	RollUp func(ctx context.Context) (days int, err error)
	Every  time.Duration
	Log    *zap.Logger
}

// Once rolls up every day that can be, and answers how many.
func (r Roller) Once(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := r.RollUp(ctx)
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}

// Run rolls up until ctx ends.
func (r Roller) Run(ctx context.Context) {
	t := time.NewTicker(r.Every)
	defer t.Stop()
	for {
		if n, err := r.Once(ctx); err != nil && ctx.Err() == nil {
			r.Log.Error("usage roll-up failed", zap.String("rollup", r.Name), zap.Error(err))
		} else if n > 0 {
			r.Log.Info("usage rolled up", zap.String("rollup", r.Name), zap.Int("days", n))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
