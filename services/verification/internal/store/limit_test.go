package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/store"
)

// TestRecordHoldsTheNumberLimit records verifications of one number against the per-client limit
// the record statement enforces: the client's verifications since the limit's start and the
// counted items ahead in the batch count, another client's and uncounted items do not, and an
// item held back is not recorded and leaves its session unused.
func TestRecordHoldsTheNumberLimit(t *testing.T) {
	eachSpread(t, testRecordHoldsTheNumberLimit)
}

func testRecordHoldsTheNumberLimit(t *testing.T, pool *pgxpool.Pool, stores pg.Stores[*store.Store]) {
	ctx := context.Background()
	st := stores.Pool()
	client, other := uuid.NewString(), uuid.NewString()
	number, elsewhere := []byte{9, 9, 9}, []byte{8, 8, 8}
	item := func(clientID string, hash []byte) domain.Verification {
		t.Helper()
		s := domain.Session{ID: uuid.NewString(), ClientID: clientID, Source: "SDK", Status: "CAPTURED", CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)}
		if err := st.InsertSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		return domain.Verification{ID: uuid.NewString(), ClientID: clientID, SessionID: s.ID, Status: domain.StatusUndetermined,
			Outcome: domain.StatusUndetermined, Reason: "NO_NETWORK_IDENTITY", OperatorID: "alpha", ServiceType: "HEADER_ENRICHMENT",
			NumberSealed: []byte{1}, NumberHash: hash}
	}
	limit := domain.NumberLimit{Max: 3, Since: time.Now().Add(-time.Hour)}
	first := item(client, number)
	before, err := st.RecordVerifications(ctx, []domain.Verification{first, item(client, number)}, limit, []bool{true, true})
	if err != nil || !before[0].OK || !before[1].OK {
		t.Fatalf("the first two: %+v %v", before, err)
	}

	batch := []domain.Verification{
		item(client, number),    // the third: recorded
		item(client, elsewhere), // another number
		item(other, number),     // another client
		item(client, number),    // the fourth: held back
		item(client, number),    // not counted (asked before, as NETWORK_API does): recorded
		item(client, number),    // the fifth: held back
	}
	counted := []bool{true, true, true, true, false, true}
	rec, err := st.RecordVerifications(ctx, batch, limit, counted)
	if err != nil {
		t.Fatal(err)
	}
	var ok, limited []bool
	for _, r := range rec {
		ok, limited = append(ok, r.OK), append(limited, r.Limited)
	}
	if want := []bool{true, true, true, false, true, false}; !slices.Equal(ok, want) {
		t.Errorf("recorded %v, want %v", ok, want)
	}
	if want := []bool{false, false, false, true, false, true}; !slices.Equal(limited, want) {
		t.Errorf("limited %v, want %v", limited, want)
	}
	var firstAt time.Time
	if err := pool.QueryRow(ctx, `SELECT created_at FROM verification.verifications WHERE id = $1`, first.ID).Scan(&firstAt); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{3, 5} {
		if !rec[i].Oldest.Equal(firstAt) {
			t.Errorf("item %d: oldest attempt %v, want the first verification's %v", i, rec[i].Oldest, firstAt)
		}
		var used *time.Time
		if err := pool.QueryRow(ctx, `SELECT used_at FROM verification.sessions WHERE id = $1`, batch[i].SessionID).Scan(&used); err != nil || used != nil {
			t.Errorf("item %d held back, its session used at %v (%v), want unused", i, used, err)
		}
	}

	for _, tc := range []struct {
		name  string
		limit domain.NumberLimit
	}{
		{"attempts before the limit's start do not count", domain.NumberLimit{Max: 3, Since: time.Now().Add(time.Minute)}},
		{"no limit", domain.NumberLimit{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := st.RecordVerifications(ctx, []domain.Verification{item(client, number)}, tc.limit, []bool{true})
			if err != nil || !rec[0].OK || rec[0].Limited {
				t.Fatalf("a sixth verification of the number: %+v %v, want recorded", rec, err)
			}
		})
	}
}
