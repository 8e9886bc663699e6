// Package store is the connect service's access to its Postgres schema, and the only place of
// its SQL. A Store wraps a pool or a transaction, so the same query serves either; the domain
// packages see it through their own small interfaces.
package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/platform/pg"
)

// Answers deletes stored idempotent answers inside the caller's transaction;
// *idempotency.Store is one.
type Answers interface {
	Forget(ctx context.Context, db pg.DB, clientID, subject string) error
}

// Store is the connect schema over a pool or a transaction.
type Store struct {
	db      pg.DB
	answers Answers
}

// New returns the Store over db, a pool or a transaction.
func New(db pg.DB) *Store { return &Store{db: db} }

// WithAnswers returns the Store that also forgets stored answers (ForgetAnswers) in answers.
func (s *Store) WithAnswers(answers Answers) *Store {
	return &Store{db: s.db, answers: answers}
}

// ForgetAnswers deletes the client's stored idempotent answers tagged with subject, in the
// same transaction as the rest of the Store's work: a profile's erasure and the forgetting of
// the answers that hold its data commit together.
func (s *Store) ForgetAnswers(ctx context.Context, clientID, subject string) error {
	if s.answers == nil {
		return errors.New("store: no idempotent answers configured")
	}
	return s.answers.Forget(ctx, s.db, clientID, subject)
}

// errNoTx is a method that needs a transaction (a lock held until commit, a temporary table)
// called on a Store over the pool: a bug of its caller.
var errNoTx = errors.New("store: needs a transaction")

// tx is the Store's transaction, for the methods that must run inside one.
func (s *Store) tx(what string) (pgx.Tx, error) {
	tx, ok := s.db.(pgx.Tx)
	if !ok {
		return nil, fmt.Errorf("%s: %w", what, errNoTx)
	}
	return tx, nil
}

// Savepoint runs fn inside a savepoint of the Store's transaction: when fn fails, what the
// Store wrote while fn ran is undone and the transaction goes on. A transaction is one
// connection, so the statements fn runs through this Store are the savepoint's.
func (s *Store) Savepoint(ctx context.Context, fn func(ctx context.Context) error) error {
	tx, err := s.tx("savepoint")
	if err != nil {
		return err
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	if err := fn(ctx); err != nil {
		if rerr := sp.Rollback(ctx); rerr != nil {
			return errors.Join(err, fmt.Errorf("roll back to savepoint: %w", rerr))
		}
		return err
	}
	if err := sp.Commit(ctx); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}
