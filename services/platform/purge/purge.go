// Package purge runs retention: rules that delete (or scrub) rows past their retention, in
// small batches on a timer. Every replica runs it; a batch is one short statement that takes
// its rows with FOR UPDATE SKIP LOCKED, so replicas share the work, a purge never holds many
// locks for long, and a row in use by a request is left for the next round.
//
// The package holds no database driver, so a service's retention rules (a domain package) use
// its types directly; the statements are the store's, run through pg.Purge.
package purge

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Rule is one kind of row past its retention.
type Rule struct {
	// Name says what the rule removes, for logs ("finished deliveries").
	Name string
	// Purge removes up to limit rows in one statement and returns how many it removed.
	Purge func(ctx context.Context, limit int) (int64, error)
}

// Aged is the rows of one kind older than Age, removed by Purge (a store method).
type Aged struct {
	Name string
	// Age is the retention; 0 keeps the rows for good (no rule).
	Age   time.Duration
	Purge func(ctx context.Context, age time.Duration, limit int) (int64, error)
}

// Rules returns the rules of aged, in order, leaving out those kept for good.
func Rules(aged ...Aged) []Rule {
	var out []Rule
	for _, a := range aged {
		if a.Age <= 0 {
			continue
		}
		out = append(out, Rule{Name: a.Name, Purge: func(ctx context.Context, limit int) (int64, error) {
			return a.Purge(ctx, a.Age, limit)
		}})
	}
	return out
}

// Runner applies rules.
type Runner struct {
	Rules []Rule
	// Every is the time between two rounds.
	Every time.Duration
	// Batch is the most rows one statement removes (500 when 0).
	Batch int
	Log   *zap.Logger
}

// Run purges now, then every Every, until ctx ends.
func (r *Runner) Run(ctx context.Context) {
	if len(r.Rules) == 0 {
		return
	}
	for {
		if _, err := r.Once(ctx); err != nil && ctx.Err() == nil {
			r.Log.Warn("retention purge", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.Every):
		}
	}
}

// Once runs every rule until a batch comes back short, and returns the rows removed by rule.
// A rule that fails does not stop the others; the first error is returned.
func (r *Runner) Once(ctx context.Context) (map[string]int64, error) {
	batch := r.Batch
	if batch <= 0 {
		batch = 500
	}
	removed := map[string]int64{}
	var first error
	for _, rule := range r.Rules {
		for ctx.Err() == nil {
			n, err := rule.Purge(ctx, batch)
			removed[rule.Name] += n
			if err != nil {
				if first == nil {
					first = fmt.Errorf("purge %s: %w", rule.Name, err)
				}
				break
			}
			if n < int64(batch) {
				break
			}
		}
		if n := removed[rule.Name]; n > 0 {
			r.Log.Info("retention purge", zap.String("rule", rule.Name), zap.Int64("rows", n))
		}
	}
	return removed, first
}
