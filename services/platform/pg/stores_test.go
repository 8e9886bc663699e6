package pg_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
)

// items is a store as a service writes one: its queries over a pg.DB.
type items struct{ db pg.DB }

func (s items) Add(ctx context.Context, id int) error {
	_, err := s.db.Exec(ctx, `INSERT INTO items VALUES ($1)`, id)
	return err
}

// itemsTable creates the items table in url's database, and returns a connection outside pool
// to observe what is committed there: a write only visible inside its own transaction does not
// pass for committed.
func itemsTable(ctx context.Context, t *testing.T, url string, pool *pgxpool.Pool) *pgx.Conn {
	t.Helper()
	if _, err := pool.Exec(ctx, `CREATE TABLE items (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	observer, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = observer.Close(context.Background()) })
	return observer
}

// itemPort is what a domain package would declare: it sees neither pgx nor items.
type itemPort interface {
	Add(ctx context.Context, id int) error
}

// TestStores checks pg.Stores against a real server: InTx commits or rolls back as one
// transaction, and Pool's writes are committed at once. Each check is observed from a
// connection of its own, outside the pool, so a write that is only visible inside its own
// transaction does not pass for committed.
func TestStores(t *testing.T) {
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
	stores := pg.NewStores(pool, func(db pg.DB) itemPort { return items{db: db} })
	errFn := errors.New("changed my mind")

	tests := []struct {
		name    string
		fnErr   error
		wantErr error
		kept    bool
	}{
		{"nil commits", nil, nil, true},
		{"error rolls back every write", errFn, errFn, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first, second := 10*(i+1), 10*(i+1)+1
			err := stores.InTx(ctx, func(ctx context.Context, st itemPort) error {
				if err := st.Add(ctx, first); err != nil {
					return err
				}
				if err := st.Add(ctx, second); err != nil {
					return err
				}
				// Inside the transaction, nothing is committed yet.
				if committed(t, first) {
					t.Error("a write inside InTx was visible outside before the commit")
				}
				return tt.fnErr
			})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("InTx = %v, want %v", err, tt.wantErr)
			}
			for _, id := range []int{first, second} {
				if got := committed(t, id); got != tt.kept {
					t.Errorf("row %d kept = %v, want %v", id, got, tt.kept)
				}
			}
		})
	}

	t.Run("Pool writes commit at once", func(t *testing.T) {
		st := stores.Pool()
		if err := st.Add(ctx, 100); err != nil {
			t.Fatal(err)
		}
		if !committed(t, 100) {
			t.Fatal("a write through Pool was not committed")
		}
		// A failing statement afterwards does not take the first one back.
		if err := st.Add(ctx, 100); !pg.IsUniqueViolation(err, "") {
			t.Fatalf("second insert of 100 = %v, want a unique violation", err)
		}
		if !committed(t, 100) {
			t.Error("the first write through Pool was lost after a later failure")
		}
	})
}
