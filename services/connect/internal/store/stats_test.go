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

// TestProfileCounts: the overview's counts (client_stats), kept by the statements that write
// profiles since no trigger keeps them, follow every way a profile is created, imported, matched,
// enriched and erased, each client's apart, and always equal a count of the profiles themselves.
func TestProfileCounts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := migratedPool(ctx, t)
	client, other := uuid.NewString(), uuid.NewString()
	number := func() []byte {
		h := make([]byte, 32)
		_, _ = rand.Read(h)
		return h
	}
	inTx := func(fn func(st *store.Store) error) {
		t.Helper()
		if err := pg.InTx(ctx, pool, func(tx pgx.Tx) error { return fn(store.New(tx)) }); err != nil {
			t.Fatal(err)
		}
	}
	create := func(clientID string, hash []byte) domain.Profile {
		t.Helper()
		var p domain.Profile
		inTx(func(st *store.Store) error {
			var err error
			p, err = st.InsertProfile(ctx, domain.Profile{ID: uuid.NewString(), ClientID: clientID, NumberSealed: []byte{1},
				NumberHash: hash, NumberMasked: "+97150*****67", CountryCode: "AE", Source: domain.SourceAPI})
			return err
		})
		return p
	}
	verify := func(items ...domain.VerifiedNumber) {
		t.Helper()
		inTx(func(st *store.Store) error { _, err := st.RecordVerified(ctx, items); return err })
	}
	verified := func(clientID string, hash []byte) domain.VerifiedNumber {
		return domain.VerifiedNumber{ClientID: clientID, NumberHash: hash, VerificationID: uuid.NewString(), VerifiedAt: time.Now()}
	}
	enrich := func(p domain.Profile) {
		t.Helper()
		inTx(func(st *store.Store) error {
			_, err := st.SetEnrichment(ctx, p.ClientID, p.ID, domain.Enrichment{Valid: true, EnrichedAt: time.Now()})
			return err
		})
	}
	check := func(step string, want map[string][3]int64) {
		t.Helper()
		for c, w := range want {
			o, err := store.New(pool).OverviewCounts(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if got := [3]int64{o.Profiles, o.Matched, o.Enriched}; got != w {
				t.Errorf("%s: client %s counts %v (profiles, matched, enriched), want %v", step, c[:8], got, w)
			}
			if real := countProfiles(ctx, t, pool, c); real != w {
				t.Errorf("%s: client %s has %v profiles (profiles, matched, enriched), the test wants %v", step, c[:8], real, w)
			}
		}
	}

	n1, n2, n3, n4, n5, n6 := number(), number(), number(), number(), number(), number()
	p1 := create(client, n1)
	create(other, n2)
	check("created", map[string][3]int64{client: {1, 0, 0}, other: {1, 0, 0}})

	// One recording for two clients, one number of each matched, one not yet anyone's.
	verify(verified(client, n1), verified(other, n2), verified(client, n3))
	check("matched", map[string][3]int64{client: {1, 1, 0}, other: {1, 1, 0}})
	verify(verified(client, n1)) // a replay matches nothing more
	p3 := create(client, n3)     // verified before it exists: matched at once
	if p3.MatchedAt == nil {
		t.Fatal("a profile of a verified number was not matched at once")
	}
	check("created matched", map[string][3]int64{client: {2, 2, 0}, other: {1, 1, 0}})

	enrich(p1)
	enrich(p1) // enriched again: counted once
	check("enriched", map[string][3]int64{client: {2, 2, 1}})

	// An import: one number new and unmatched, one new and verified, one of an existing
	// profile (updated, not counted again), and one of a profile the client has unmatched
	// while its number is verified (written here without the recording that would have
	// matched it), which the import matches.
	p5 := create(client, n5)
	if _, err := pool.Exec(ctx, `INSERT INTO connect.verified_numbers (client_id, number_hash, verification_id, verified_at)
		VALUES ($1, $2, gen_random_uuid(), now()), ($1, $3, gen_random_uuid(), now())`, client, n4, n5); err != nil {
		t.Fatal(err)
	}
	check("before the import", map[string][3]int64{client: {3, 2, 1}})
	var job string
	if err := pool.QueryRow(ctx, `INSERT INTO connect.import_jobs (id, client_id, file_name, size_bytes, status, lease_token)
		VALUES (gen_random_uuid(), $1, 'f.csv', 1, 'RUNNING', 1) RETURNING id::text`, client).Scan(&job); err != nil {
		t.Fatal(err)
	}
	var rows []domain.StageRow
	for _, h := range [][]byte{n6, n4, n3, n5} {
		rows = append(rows, domain.StageRow{ID: uuid.New(), NumberSealed: []byte{1}, NumberHash: h, NumberMasked: "+97150*****67",
			CountryCode: "AE", Attributes: []byte("{}")})
	}
	p := domain.Progress{Records: int64(len(rows)), Token: 1, Lease: time.Minute, MaxKept: 100}
	inTx(func(st *store.Store) error { return st.UpsertBatch(ctx, client, job, rows, &p) })
	if p.Imported != 2 || p.Updated != 2 {
		t.Fatalf("import: %d imported, %d updated, want 2 and 2", p.Imported, p.Updated)
	}
	check("imported", map[string][3]int64{client: {5, 4, 1}, other: {1, 1, 0}})

	for _, id := range []string{p1.ID, p5.ID} {
		if _, err := store.New(pool).DeleteProfile(ctx, client, id); err != nil {
			t.Fatal(err)
		}
	}
	check("erased", map[string][3]int64{client: {3, 2, 0}, other: {1, 1, 0}})
}

// countProfiles counts the client's profiles, matched and enriched, from the profiles.
func countProfiles(ctx context.Context, t *testing.T, pool *pgxpool.Pool, clientID string) [3]int64 {
	t.Helper()
	var c [3]int64
	if err := pool.QueryRow(ctx, `SELECT count(*), count(matched_at), count(enriched_at) FROM connect.profiles WHERE client_id = $1`,
		clientID).Scan(&c[0], &c[1], &c[2]); err != nil {
		t.Fatal(err)
	}
	return c
}
