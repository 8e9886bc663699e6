// Package store is the connect service's access to its Postgres schema, and the only place of
// its SQL. A Store wraps a pool or a transaction, so the same query serves either; the domain
// packages see it through their own small interfaces.
package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/outbox"
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
	outbox  *outbox.Outbox
	jobs    *jobs.Queue
}

// New returns the Store over db, a pool or a transaction.
func New(db pg.DB) *Store { return &Store{db: db} }

// WithAnswers returns the Store that also forgets stored answers (ForgetAnswers) in answers.
func (s *Store) WithAnswers(answers Answers) *Store {
	c := *s
	c.answers = answers
	return &c
}

// WithOutbox returns the Store that also writes events (Emit) through box.
func (s *Store) WithOutbox(box *outbox.Outbox) *Store {
	c := *s
	c.outbox = box
	return &c
}

// WithJobs returns the Store that also queues deliveries' jobs in q, in the transaction that
// queues the deliveries.
func (s *Store) WithJobs(q *jobs.Queue) *Store {
	c := *s
	c.jobs = q
	return &c
}

// Emit writes evs in the Store's transaction, so each commits with its fact or not at all.
// Outside a transaction it is refused: an event written on its own could outlive a fact that
// rolled back.
func (s *Store) Emit(ctx context.Context, evs ...events.Event) error {
	return s.outbox.Emit(ctx, s.db, evs...)
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

// tx is the Store's transaction, for the methods that must run inside one (a lock held until
// commit, a temporary table); over the pool it is pg.ErrNoTx, a bug of the caller.
func (s *Store) tx(what string) (pgx.Tx, error) {
	tx, ok := s.db.(pgx.Tx)
	if !ok {
		return nil, fmt.Errorf("%s: %w", what, pg.ErrNoTx)
	}
	return tx, nil
}

// Savepoint runs fn inside a savepoint of the Store's transaction: when fn fails, what the
// Store wrote while fn ran is undone and the transaction goes on. A transaction is one
// connection, so the statements fn runs through this Store are the savepoint's.
func (s *Store) Savepoint(ctx context.Context, fn func(ctx context.Context) error) error {
	return pg.InSavepoint(ctx, s.db, func(pg.DB) error { return fn(ctx) })
}
