package pg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrTxDone is a statement sent on a piped transaction after the batch that commits it.
var ErrTxDone = errors.New("pg: the transaction was committed by its last batch")

// InPipedTx runs fn in a transaction that spends no round trip of its own: its BEGIN travels
// in front of fn's first batch, and its COMMIT behind the batch a store ends it with
// (QueueCommit), instead of each alone. A transaction of two batches, such as accounts' debit
// batch (lock and read, then write), takes two round trips instead of four. That is what a
// batch costs most when batches are small (make bench's open loop, issue 15). A first
// statement that is not a batch is preceded by a BEGIN of its own; a transaction not committed
// by a batch commits when fn returns nil, as InTx does. When fn fails, or a statement of the
// committing batch does (the rest of the batch, its COMMIT too, is then skipped), it is rolled
// back.
//
// The transaction is a pgx.Tx, so what needs one (an outbox, River's inserts) takes it; it has
// no savepoints.
func InPipedTx(ctx context.Context, pool *pgxpool.Pool, fn func(tx pgx.Tx) error) (err error) {
	t := &pipedTx{pool: pool}
	returned := false
	defer func() {
		if !returned { // fn panicked or exited its goroutine: roll back, give the connection back
			_ = t.end(ctx, false)
		}
	}()
	err = fn(t)
	returned = true
	if err != nil {
		_ = t.end(ctx, false)
		return err
	}
	return t.end(ctx, true)
}

// QueueCommit queues the COMMIT of db's transaction at the end of b when db is a piped
// transaction (InPipedTx), and reports whether it did: the store sending b ends the
// transaction, and nothing may be sent on it after b (ErrTxDone). Once b's COMMIT has
// answered, the transaction is committed whatever its function returns next, so b is its last
// fallible step. On any other db it does nothing, and the transaction commits when its
// function returns, as always.
func QueueCommit(db DB, b *pgx.Batch) bool {
	t, ok := db.(*pipedTx)
	if !ok {
		return false
	}
	t.commitWith = b
	b.Queue("commit").Exec(func(tag pgconn.CommandTag) error {
		// An aborted transaction answers COMMIT with ROLLBACK.
		if tag.String() != "COMMIT" {
			return pgx.ErrTxCommitRollback
		}
		t.committed = true
		return nil
	})
	return true
}

// pipedTx is InPipedTx's transaction. It holds a connection from its first statement on.
type pipedTx struct {
	pool *pgxpool.Pool
	conn *pgxpool.Conn
	// commitWith is the batch QueueCommit ended the transaction with; committed is set when
	// that batch's COMMIT answered COMMIT.
	commitWith *pgx.Batch
	committed  bool
}

// open makes sure the transaction has its connection, and has begun unless b (the batch about
// to be sent) will begin it: a batch with BEGIN queued first.
func (t *pipedTx) open(ctx context.Context, beginsWith *pgx.Batch) error {
	if t.commitWith != nil && t.commitWith != beginsWith {
		return ErrTxDone
	}
	if t.conn != nil {
		return nil
	}
	c, err := t.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("piped transaction: %w", err)
	}
	t.conn = c
	if beginsWith != nil {
		beginsWith.QueuedQueries = append([]*pgx.QueuedQuery{{SQL: "begin"}}, beginsWith.QueuedQueries...)
		return nil
	}
	if _, err := c.Exec(ctx, "begin"); err != nil {
		return fmt.Errorf("piped transaction: begin: %w", err)
	}
	return nil
}

// end commits (commit) or rolls back the transaction, unless its batch committed it, and gives
// its connection back. The pool closes a connection left inside a transaction rather than
// reuse it (a rollback that failed, a context that ended).
func (t *pipedTx) end(ctx context.Context, commit bool) error {
	if t.conn == nil {
		return nil
	}
	defer func() {
		t.conn.Release()
		t.conn = nil
	}()
	switch {
	case t.committed:
		return nil
	case commit && t.commitWith != nil:
		// The batch was sent but its COMMIT did not answer: a statement before it failed and
		// the caller went on, or the batch was not closed.
		_, _ = t.conn.Exec(ctx, "rollback")
		return fmt.Errorf("piped transaction: %w", pgx.ErrTxCommitRollback)
	case commit:
		tag, err := t.conn.Exec(ctx, "commit")
		if err != nil {
			return fmt.Errorf("piped transaction: commit: %w", err)
		}
		if tag.String() != "COMMIT" {
			return fmt.Errorf("piped transaction: %w", pgx.ErrTxCommitRollback)
		}
		return nil
	}
	if t.conn.Conn().PgConn().TxStatus() != 'I' {
		_, _ = t.conn.Exec(ctx, "rollback")
	}
	return nil
}

func (t *pipedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	first := t.conn == nil
	if err := t.open(ctx, b); err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	br := t.conn.SendBatch(ctx, b)
	if !first {
		return br
	}
	// The BEGIN's answer comes first, before the ones the caller reads.
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return pgx.FailedBatchResults(b, fmt.Errorf("piped transaction: begin: %w", err))
	}
	return br
}

func (t *pipedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.open(ctx, nil); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.conn.Exec(ctx, sql, args...)
}

func (t *pipedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.open(ctx, nil); err != nil {
		return nil, err
	}
	return t.conn.Query(ctx, sql, args...)
}

func (t *pipedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.open(ctx, nil); err != nil {
		return errRow{err}
	}
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *pipedTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.open(ctx, nil); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, columns, src)
}

func (t *pipedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.open(ctx, nil); err != nil {
		return nil, err
	}
	return t.conn.Conn().Prepare(ctx, name, sql)
}

// Begin would open a savepoint; a piped transaction has none (see InSavepoint for InTx's).
func (t *pipedTx) Begin(context.Context) (pgx.Tx, error) {
	return nil, errors.New("pg: a piped transaction has no savepoints")
}

// Commit and Rollback belong to InPipedTx, which ends the transaction when fn returns.
func (t *pipedTx) Commit(context.Context) error {
	return errors.New("pg: a piped transaction commits when its function returns")
}

func (t *pipedTx) Rollback(context.Context) error {
	return errors.New("pg: a piped transaction rolls back when its function fails")
}

func (t *pipedTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

// Conn is the transaction's connection, nil before its first statement.
func (t *pipedTx) Conn() *pgx.Conn {
	if t.conn == nil {
		return nil
	}
	return t.conn.Conn()
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
