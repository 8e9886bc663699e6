// Package reports answers a client's spend from its ledger (docs/api-decisions.md#usage) and
// keeps its roll-up of closed days current (docs/architecture.md#usage).
package reports

import (
	"context"
	"time"

	"github.com/mnvhq/mnv/services/platform/usage"
)

// Dimensions are the report's, in the order of the store's rows: the ledger's kind.
var Dimensions = []string{"kind"}

// Store reads a client's ledger per day and kind.
type Store interface {
	SpendUsage(ctx context.Context, clientID string, r usage.Range) ([]usage.Row, error)
}

// RollupStore writes the next closed days into the roll-up, inside a transaction.
type RollupStore interface {
	RollUpSpend(ctx context.Context, grace time.Duration, maxDays int) (until time.Time, days int, err error)
}

// Tx runs a function with the roll-up's store inside one transaction.
type Tx interface {
	InTx(ctx context.Context, fn func(ctx context.Context, st RollupStore) error) error
}

// Service is the spend of clients.
type Service struct {
	st  Store
	tx  Tx
	now func() time.Time
}

// New returns the Service over st and tx.
func New(st Store, tx Tx) *Service { return &Service{st: st, tx: tx, now: time.Now} }

// Spend is a client's ledger over the range of from and to (usage.ParseRange).
func (s *Service) Spend(ctx context.Context, clientID string, from, to *string) (usage.Report, error) {
	return usage.Answer(from, to, s.now(), Dimensions, func(r usage.Range) ([]usage.Row, error) {
		return s.st.SpendUsage(ctx, clientID, r)
	})
}

// RollUp writes the next closed days (up to usage.StepDays) in one transaction and answers
// how many.
func (s *Service) RollUp(ctx context.Context) (days int, err error) {
	return usage.RollUpStep(ctx, s.tx.InTx, RollupStore.RollUpSpend)
}
