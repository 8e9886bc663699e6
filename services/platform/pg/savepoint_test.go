package pg_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
)

// TestInSavepoint checks pg.InSavepoint against a real server, inside a pg.InTx transaction:
// a failing fn undoes its own writes only and the transaction goes on (even after a failed
// statement, which without the savepoint aborts the whole transaction); a succeeding fn's
// writes commit with the transaction, never before and not when it rolls back. Commits are
// observed from a connection of its own.
func TestInSavepoint(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url := pgtest.NewDatabase(t)
	pool, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: 4})
	if err != nil {
		t.Fatalf("pg.Open: %v", err)
	}
	t.Cleanup(pool.Close)
	observer := itemsTable(ctx, t, url, pool)
	committed := func(t *testing.T, id int) bool {
		t.Helper()
		var ok bool
		if err := observer.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM items WHERE id = $1)`, id).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	add := func(db pg.DB, id int) error {
		_, err := db.Exec(ctx, `INSERT INTO items VALUES ($1)`, id)
		return err
	}
	errFn, errOuter := errors.New("changed my mind"), errors.New("outer changed its mind")

	tests := []struct {
		name string
		// inner writes second in the savepoint (and, when dup, first again: a failed statement),
		// then returns innerErr.
		innerErr error
		dup      bool
		outerErr error
		// kept: whether first (written before the savepoint), second (in it) and third (after
		// it) are committed at the end.
		kept [3]bool
	}{
		{"inner rollback keeps the outer writes", errFn, false, nil, [3]bool{true, false, true}},
		{"inner failed statement: the transaction goes on", nil, true, nil, [3]bool{true, false, true}},
		{"inner release commits with the outer", nil, false, nil, [3]bool{true, true, true}},
		{"outer rollback takes the released savepoint too", nil, false, errOuter, [3]bool{false, false, false}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first, second, third := 10*(i+1), 10*(i+1)+1, 10*(i+1)+2
			err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
				if err := add(tx, first); err != nil {
					return err
				}
				err := pg.InSavepoint(ctx, tx, func(sp pg.DB) error {
					if err := add(sp, second); err != nil {
						return err
					}
					if tt.dup {
						return add(sp, first)
					}
					return tt.innerErr
				})
				if tt.dup {
					if !pg.IsUniqueViolation(err, "") {
						t.Fatalf("InSavepoint = %v, want the unique violation", err)
					}
				} else if !errors.Is(err, tt.innerErr) { // errors.Is(err, nil) is err == nil
					t.Fatalf("InSavepoint = %v, want %v", err, tt.innerErr)
				}
				// Inside the transaction, its writes are seen; outside, none before the commit.
				var seen bool
				if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM items WHERE id = $1)`, second).Scan(&seen); err != nil {
					t.Fatalf("the transaction did not go on after the savepoint: %v", err)
				}
				if want := tt.innerErr == nil && !tt.dup; seen != want {
					t.Errorf("inside the transaction, the savepoint's row seen = %v, want %v", seen, want)
				}
				if committed(t, first) || committed(t, second) {
					t.Error("a write inside the transaction was visible outside before the commit")
				}
				if err := add(tx, third); err != nil {
					return err
				}
				return tt.outerErr
			})
			if !errors.Is(err, tt.outerErr) || (tt.outerErr == nil) != (err == nil) {
				t.Fatalf("InTx = %v, want %v", err, tt.outerErr)
			}
			for j, id := range []int{first, second, third} {
				if got := committed(t, id); got != tt.kept[j] {
					t.Errorf("row %d kept = %v, want %v", id, got, tt.kept[j])
				}
			}
		})
	}

	t.Run("outside a transaction", func(t *testing.T) {
		ran := false
		err := pg.InSavepoint(ctx, pool, func(pg.DB) error { ran = true; return nil })
		if !errors.Is(err, pg.ErrNoTx) || ran {
			t.Fatalf("InSavepoint over the pool = %v (fn ran: %v), want ErrNoTx and fn not run", err, ran)
		}
	})
}
