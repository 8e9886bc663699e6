package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/store"
	"github.com/mnvhq/mnv/services/platform/pg"
)

// TestSavepoint checks Store.Savepoint on a real database: what fn writes through the same
// Store is the savepoint's, so a failing fn undoes it while the transaction's other writes
// commit, and a succeeding fn's writes commit with them. Over the pool it is refused.
func TestSavepoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := migratedPool(ctx, t)
	clientID := uuid.NewString()
	insert := func(st *store.Store) (string, error) {
		p, err := st.InsertProfile(ctx, domain.Profile{
			ID: uuid.NewString(), ClientID: clientID, NumberSealed: []byte{1}, NumberHash: []byte(uuid.NewString()),
			NumberMasked: "+97150*****67", CountryCode: "AE", Source: domain.SourceAPI,
		})
		return p.ID, err
	}
	exists := func(id string) bool {
		t.Helper()
		var ok bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM connect.profiles WHERE id = $1)`, id).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	errFn := errors.New("cannot settle")

	for _, tt := range []struct {
		name  string
		fnErr error
		kept  bool
	}{
		{"failing fn is undone", errFn, false},
		{"succeeding fn commits with the transaction", nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var before, inside string
			err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
				st := store.New(tx)
				var err error
				if before, err = insert(st); err != nil {
					return err
				}
				serr := st.Savepoint(ctx, func(ctx context.Context) error {
					if inside, err = insert(st); err != nil {
						return err
					}
					return tt.fnErr
				})
				if !errors.Is(serr, tt.fnErr) {
					t.Errorf("Savepoint = %v, want %v", serr, tt.fnErr)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !exists(before) {
				t.Error("the write before the savepoint was lost")
			}
			if got := exists(inside); got != tt.kept {
				t.Errorf("the savepoint's write kept = %v, want %v", got, tt.kept)
			}
		})
	}

	ran := false
	err := store.New(pool).Savepoint(ctx, func(context.Context) error { ran = true; return nil })
	if !errors.Is(err, pg.ErrNoTx) || ran {
		t.Errorf("Savepoint over the pool = %v (fn ran: %v), want pg.ErrNoTx", err, ran)
	}
}
