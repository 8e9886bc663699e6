package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/store"
	"github.com/mnvhq/mnv/services/platform/pg"
)

// TestStaleEnrichmentsAcrossClients: the reconciler's claim takes the old PENDING records of
// every client, oldest first and up to its limit, each locked with its client, and passes over
// one another transaction holds (a request settling it) and ones not old enough or settled.
func TestStaleEnrichmentsAcrossClients(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := migratedPool(ctx, t)
	record := func(clientID, status string, age time.Duration) string {
		t.Helper()
		id := uuid.NewString()
		if _, err := pool.Exec(ctx, `INSERT INTO connect.enrichments (id, client_id, profile_id, status, created_at)
			VALUES ($1, $2, gen_random_uuid(), $3, now() - make_interval(secs => $4))`, id, clientID, status, age.Seconds()); err != nil {
			t.Fatal(err)
		}
		return id
	}
	a, b, c := uuid.NewString(), uuid.NewString(), uuid.NewString()
	held := record(a, "PENDING", 5*time.Minute)
	oldest := record(b, "PENDING", 4*time.Minute)
	next := record(c, "PENDING", 3*time.Minute)
	record(a, "PENDING", 2*time.Minute) // past the limit
	record(b, "SETTLED", 10*time.Minute)
	record(c, "PENDING", time.Second) // not stale yet

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT FROM connect.enrichments WHERE client_id = $1 AND id = $2 FOR UPDATE`, a, held); err != nil {
		t.Fatal(err)
	}
	var got []string
	err = pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		recs, err := store.New(tx).StaleEnrichments(ctx, time.Now().Add(-time.Minute), 2)
		for _, r := range recs {
			got = append(got, r.ID)
			if r.Status != domain.EnrichmentPending {
				t.Errorf("record %s is %s", r.ID, r.Status)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{oldest, next}; !slices.Equal(got, want) {
		t.Errorf("claimed %v, want %v (the oldest two not held elsewhere)", got, want)
	}
}
