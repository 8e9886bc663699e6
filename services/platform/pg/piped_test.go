package pg_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
)

// roundTrips counts what a pool sends: each statement and each batch is one round trip.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestInPipedTx checks pg.InPipedTx against a real server, each row observed from a connection
// outside the pool: a transaction of two batches, the last ending it, takes two round trips and
// commits both; a failure anywhere commits nothing; and the pool's one connection comes back
// outside any transaction every time.
func TestInPipedTx(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url := pgtest.NewDatabase(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	trips := &roundTrips{}
	cfg.MaxConns = 1 // every case gets the connection the one before gave back
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	observer := itemsTable(ctx, t, url, pool)
	committed := func(t *testing.T, ids ...int) []int {
		t.Helper()
		var got []int
		if err := observer.QueryRow(ctx, `SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM items WHERE id = ANY($1)`, ids).Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	batch := func(commit bool, db pg.DB, ids ...int) *pgx.Batch {
		b := &pgx.Batch{}
		for _, id := range ids {
			b.Queue(`INSERT INTO items VALUES ($1)`, id)
		}
		if commit && !pg.QueueCommit(db, b) {
			t.Fatal("QueueCommit did not take a piped transaction")
		}
		return b
	}
	// send sends b and reads every answer (Close does), as a store does.
	send := func(ctx context.Context, tx pgx.Tx, b *pgx.Batch) error {
		return tx.SendBatch(ctx, b).Close()
	}
	errFn := errors.New("changed my mind")

	tests := []struct {
		name       string
		fn         func(ctx context.Context, tx pgx.Tx) error
		wantErr    func(error) bool
		ids        []int // written by fn
		wantCommit bool
		wantTrips  int64
	}{
		{"two batches, the last commits", func(ctx context.Context, tx pgx.Tx) error {
			if err := send(ctx, tx, batch(false, tx, 1)); err != nil {
				return err
			}
			return send(ctx, tx, batch(true, tx, 2, 3))
		}, nil, []int{1, 2, 3}, true, 2},
		{"one batch begins and commits", func(ctx context.Context, tx pgx.Tx) error {
			return send(ctx, tx, batch(true, tx, 4))
		}, nil, []int{4}, true, 1},
		{"no batch commits: COMMIT when fn returns", func(ctx context.Context, tx pgx.Tx) error {
			return send(ctx, tx, batch(false, tx, 5))
		}, nil, []int{5}, true, 2},
		{"a statement first: BEGIN of its own", func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO items VALUES (6)`); err != nil {
				return err
			}
			return send(ctx, tx, batch(true, tx, 7))
		}, nil, []int{6, 7}, true, 3},
		{"the committing batch fails: its COMMIT is skipped", func(ctx context.Context, tx pgx.Tx) error {
			if err := send(ctx, tx, batch(false, tx, 8)); err != nil {
				return err
			}
			return send(ctx, tx, batch(true, tx, 9, 1)) // 1 is taken
		}, func(err error) bool { return pg.IsUniqueViolation(err, "") }, []int{8, 9}, false, 3},
		{"fn fails after its first batch", func(ctx context.Context, tx pgx.Tx) error {
			if err := send(ctx, tx, batch(false, tx, 10)); err != nil {
				return err
			}
			return errFn
		}, func(err error) bool { return errors.Is(err, errFn) }, []int{10}, false, 2},
		{"nothing after the committing batch", func(ctx context.Context, tx pgx.Tx) error {
			if err := send(ctx, tx, batch(true, tx, 11)); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO items VALUES (12)`); !errors.Is(err, pg.ErrTxDone) {
				t.Errorf("a statement after the commit: err = %v, want ErrTxDone", err)
			}
			return send(ctx, tx, batch(false, tx, 13))
		}, func(err error) bool { return errors.Is(err, pg.ErrTxDone) }, []int{11}, true, 1},
		{"an aborted transaction does not commit", func(ctx context.Context, tx pgx.Tx) error {
			_ = send(ctx, tx, batch(false, tx, 14, 1)) // fails, and the caller goes on
			return send(ctx, tx, batch(true, tx, 15))
		}, func(err error) bool { return err != nil }, []int{14, 15}, false, 3},
		{"no statement: no connection, no round trip", func(context.Context, pgx.Tx) error { return nil },
			nil, nil, false, 0},
	}
	conns := pool.Stat().NewConnsCount()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := trips.n.Load()
			err := pg.InPipedTx(ctx, pool, func(tx pgx.Tx) error { return tt.fn(ctx, tx) })
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("InPipedTx = %v", err)
			case tt.wantErr != nil && !tt.wantErr(err):
				t.Fatalf("InPipedTx = %v, not the error expected", err)
			}
			if got := trips.n.Load() - before; got != tt.wantTrips {
				t.Errorf("%d round trips, want %d", got, tt.wantTrips)
			}
			got := committed(t, tt.ids...)
			if tt.wantCommit && len(got) != len(tt.ids) || !tt.wantCommit && len(got) != 0 {
				t.Errorf("committed %v of %v, want all: %v", got, tt.ids, tt.wantCommit)
			}
			// The connection came back outside any transaction: a pool destroys one left
			// inside (a rollback not sent) and opens another.
			if n := pool.Stat().NewConnsCount(); n != conns {
				t.Errorf("the pool opened %d connections, want %d: the transaction left its connection unusable", n, conns)
			}
		})
	}
}

// TestInPipedTxOutbox checks that what needs a transaction takes a piped one: the outbox and
// River assert pgx.Tx, and pg.Stores.Piped runs its stores in one.
func TestInPipedTxOutbox(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	pool := newPool(t)
	stores := pg.NewStores(pool, func(db pg.DB) pg.DB { return db }).Piped()
	err := stores.InTx(ctx, func(ctx context.Context, db pg.DB) error {
		if _, ok := db.(pgx.Tx); !ok {
			t.Error("a piped store's db is not a pgx.Tx")
		}
		if err := pg.InSavepoint(ctx, db, func(pg.DB) error { return nil }); err == nil {
			t.Error("a savepoint in a piped transaction did not fail")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestInPipedTxPanic checks that a function that panics, or ends its goroutine (t.Fatal),
// neither commits nor keeps its connection.
func TestInPipedTxPanic(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	pool := newPool(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE items (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() { _ = recover() }()
		_ = pg.InPipedTx(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO items VALUES (1)`); err != nil {
				t.Fatal(err)
			}
			panic("boom")
		})
	}()
	if n := pool.Stat().AcquiredConns(); n != 0 {
		t.Errorf("%d connections still held after the panic", n)
	}
	if n := scalar[int64](t, pool, `SELECT count(*) FROM items`); n != 0 {
		t.Errorf("%d rows committed by a function that panicked", n)
	}
}
