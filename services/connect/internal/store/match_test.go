package store_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/store"
	"github.com/mnvhq/mnv/services/platform/pg"
)

// TestMatchingRace runs a profile write and the recording of its verified number in two
// transactions that overlap, each order in turn, on a real database: the profile must end
// matched whichever commits second. Without the matching lock each transaction misses the
// other's uncommitted row and the profile stays unmatched for good.
func TestMatchingRace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := migratedPool(ctx, t)
	writers := []struct {
		name  string
		write func(tx pgx.Tx, clientID string, hash []byte) error
	}{
		{"profile created", func(tx pgx.Tx, clientID string, hash []byte) error {
			_, err := store.New(tx).InsertProfile(ctx, domain.Profile{
				ID: uuid.NewString(), ClientID: clientID, NumberSealed: []byte{1}, NumberHash: hash,
				NumberMasked: "+97150*****67", CountryCode: "AE", Source: domain.SourceAPI,
			})
			return err
		}},
		{"profile imported", func(tx pgx.Tx, clientID string, hash []byte) error {
			var job string
			if err := tx.QueryRow(ctx, `INSERT INTO connect.import_jobs (id, client_id, file_name, size_bytes, status, lease_token)
				VALUES (gen_random_uuid(), $1, 'f.csv', 1, 'RUNNING', 1) RETURNING id::text`, clientID).Scan(&job); err != nil {
				return err
			}
			row := domain.StageRow{NumberSealed: []byte{1}, NumberHash: hash, NumberMasked: "+97150*****67", CountryCode: "AE", Attributes: []byte("{}")}
			row.ID = uuid.New()
			return store.New(tx).UpsertBatch(ctx, clientID, job, []domain.StageRow{row}, &domain.Progress{Token: 1, Lease: time.Minute, MaxKept: 100})
		}},
	}
	for _, w := range writers {
		for _, profileFirst := range []bool{true, false} {
			name := w.name + ", then the number recorded"
			if !profileFirst {
				name = "number recorded, then " + w.name
			}
			t.Run(name, func(t *testing.T) {
				clientID := uuid.NewString()
				hash := make([]byte, 32)
				_, _ = rand.Read(hash)
				// A batch names several clients: the one racing here sorts after another, so
				// its lock is not the first the recording takes.
				record := func(db pgx.Tx) error {
					_, err := store.New(db).RecordVerified(ctx, []domain.VerifiedNumber{
						{ClientID: clientID, NumberHash: hash, VerificationID: uuid.NewString(), VerifiedAt: time.Now()},
						{ClientID: uuid.Nil.String(), NumberHash: hash, VerificationID: uuid.NewString(), VerifiedAt: time.Now()},
					})
					return err
				}
				first, second := func(tx pgx.Tx) error { return w.write(tx, clientID, hash) }, record
				if !profileFirst {
					first, second = record, first
				}
				overlap(t, ctx, pool, first, second)
				var matched bool
				if err := pool.QueryRow(ctx, `SELECT matched_at IS NOT NULL FROM connect.profiles WHERE client_id = $1 AND number_hash = $2`,
					clientID, hash).Scan(&matched); err != nil {
					t.Fatal(err)
				}
				if !matched {
					t.Error("the profile is not matched although its number was verified")
				}
			})
		}
	}
}

// overlap runs first in a transaction left open, starts second in another, commits first a
// moment later and waits for second: second's statements run while first is uncommitted,
// unless a lock makes second wait.
func overlap(t *testing.T, ctx context.Context, pool *pgxpool.Pool, first, second func(pgx.Tx) error) {
	t.Helper()
	tx1, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(ctx)
	if err := first(tx1); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pg.InTx(ctx, pool, second) }()
	time.Sleep(200 * time.Millisecond)
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
