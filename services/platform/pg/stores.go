package pg

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Stores hands a service's store to its domain packages: one over the pool, and one inside a
// transaction for a callback. S is the domain's own port (an interface the store satisfies), so
// a domain package sees neither pgx nor the store's concrete type.
type Stores[S any] struct {
	pool  *pgxpool.Pool
	open  func(DB) S
	piped bool
}

// NewStores returns the Stores of pool; open wraps a pool or a transaction in the store.
func NewStores[S any](pool *pgxpool.Pool, open func(DB) S) Stores[S] {
	return Stores[S]{pool: pool, open: open}
}

// Pool is the store outside any transaction: each statement its own commit.
func (s Stores[S]) Pool() S { return s.open(s.pool) }

// Piped is s with its transactions piped (InPipedTx): for a store whose transactions are a
// few batches, the last of them ending the transaction (QueueCommit).
func (s Stores[S]) Piped() Stores[S] {
	s.piped = true
	return s
}

// InTx runs fn with the store inside one transaction, committed when fn returns nil and rolled
// back otherwise.
func (s Stores[S]) InTx(ctx context.Context, fn func(ctx context.Context, st S) error) error {
	run := InTx
	if s.piped {
		run = InPipedTx
	}
	return run(ctx, s.pool, func(tx pgx.Tx) error { return fn(ctx, s.open(tx)) })
}
