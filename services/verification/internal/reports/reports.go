// Package reports answers the usage of a client's verifications (docs/api-decisions.md#usage)
// and keeps its roll-up of closed days current (docs/architecture.md#usage).
package reports

import (
	"context"
	"time"

	"github.com/mnvhq/mnv/services/platform/freetext"
	"github.com/mnvhq/mnv/services/platform/usage"
)

// Dimensions are the report's, in the order of the store's rows.
var Dimensions = []string{"status", "operator", "method"}

// Store reads a client's verifications per day and Dimensions.
type Store interface {
	VerificationUsage(ctx context.Context, clientID string, r usage.Range, operator *string) ([]usage.Row, error)
}

// RollupStore writes the next closed days into the roll-up, inside a transaction.
type RollupStore interface {
	RollUpUsage(ctx context.Context, grace time.Duration, maxDays int) (until time.Time, days int, err error)
}

// Tx runs a function with the roll-up's store inside one transaction.
type Tx interface {
	InTx(ctx context.Context, fn func(ctx context.Context, st RollupStore) error) error
}

// Service is the usage of verifications.
type Service struct {
	st  Store
	tx  Tx
	now func() time.Time
}

// New returns the Service over st and tx.
func New(st Store, tx Tx) *Service { return &Service{st: st, tx: tx, now: time.Now} }

// Verifications is a client's usage over the range of from and to (usage.ParseRange), only
// operator's when it is not nil.
func (s *Service) Verifications(ctx context.Context, clientID string, from, to, operator *string) (usage.Report, error) {
	return usage.Answer(from, to, s.now(), Dimensions, func(r usage.Range) ([]usage.Row, error) {
		if operator != nil {
			if err := (freetext.Rule{Max: 64}).Check("operator", *operator); err != nil {
				return nil, err
			}
		}
		return s.st.VerificationUsage(ctx, clientID, r, operator)
	})
}

// RollUp writes the next closed days (up to usage.StepDays) in one transaction and answers
// how many.
func (s *Service) RollUp(ctx context.Context) (days int, err error) {
	return usage.RollUpStep(ctx, s.tx.InTx, RollupStore.RollUpUsage)
}
