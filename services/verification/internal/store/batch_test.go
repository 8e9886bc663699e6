package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mnvhq/mnv/services/platform/outbox"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/relay"
	"github.com/mnvhq/mnv/services/verification/internal/store"
)

// TestBatchesKeepEachVerificationsAnswer: one record statement and one settle transaction for
// many verifications give each the answer it would get alone: a used session, another client's
// session and an unknown one record nothing; a verification settled already, or named twice in
// a batch, settles (and writes its jobs) once.
func TestBatchesKeepEachVerificationsAnswer(t *testing.T) {
	eachSpread(t, testBatchesKeepEachVerificationsAnswer)
}

func testBatchesKeepEachVerificationsAnswer(t *testing.T, pool *pgxpool.Pool, stores pg.Stores[*store.Store]) {
	ctx := context.Background()
	st := stores.Pool()
	client, other := uuid.NewString(), uuid.NewString()
	session := func(owner string, used bool) string {
		s := domain.Session{ID: uuid.NewString(), ClientID: owner, Source: "SDK", Status: "CAPTURED", CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)}
		if err := st.InsertSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		if used {
			if _, err := pool.Exec(ctx, `UPDATE verification.sessions SET used_at = now() WHERE id = $1`, s.ID); err != nil {
				t.Fatal(err)
			}
		}
		return s.ID
	}
	verification := func(sessionID string, status, outcome domain.Status) domain.Verification {
		return domain.Verification{ID: uuid.NewString(), ClientID: client, SessionID: sessionID, Status: status, Outcome: outcome,
			Reason: "NUMBER_MATCH", OperatorID: "alpha", ServiceType: "HEADER_ENRICHMENT", NumberSealed: []byte{1}, NumberHash: []byte{7}}
	}
	verified := verification(session(client, false), domain.StatusPending, domain.StatusVerified)
	mismatch := verification(session(client, false), domain.StatusPending, domain.StatusNotVerified)
	free := verification(session(client, false), domain.StatusUndetermined, domain.StatusUndetermined)
	batch := []domain.Verification{
		verified,
		verification(session(client, true), domain.StatusPending, domain.StatusVerified), // used
		verification(session(other, false), domain.StatusPending, domain.StatusVerified), // another client's
		verification(uuid.NewString(), domain.StatusPending, domain.StatusVerified),      // no such session
		mismatch,
		free,
	}
	rec, err := st.RecordVerifications(ctx, batch, domain.NumberLimit{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ok []bool
	for _, r := range rec {
		ok = append(ok, r.OK)
		if r.OK == r.CreatedAt.IsZero() {
			t.Errorf("recorded %v with created_at %v", r.OK, r.CreatedAt)
		}
	}
	if want := []bool{true, false, false, false, true, true}; !slices.Equal(ok, want) {
		t.Fatalf("recorded %v, want %v", ok, want)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM verification.verifications WHERE client_id = $1`, client).Scan(&n); err != nil || n != 3 {
		t.Fatalf("%d verifications of the client (%v), want 3", n, err)
	}

	settle := []domain.Settlement{
		{ID: verified.ID, ClientID: verified.ClientID, Charged: 1, BalanceAfter: 9, Completed: completed(t, verified)},
		{ID: mismatch.ID, ClientID: mismatch.ClientID, Charged: 1, BalanceAfter: 8, Completed: completed(t, mismatch)},
		{ID: verified.ID, ClientID: verified.ClientID, Charged: 1, BalanceAfter: 7, Completed: completed(t, verified)}, // named twice
		{ID: free.ID, ClientID: free.ClientID, Charged: 1, BalanceAfter: 6, Completed: completed(t, free)},             // final already
		{ID: uuid.NewString(), ClientID: free.ClientID, Charged: 1, BalanceAfter: 5, Completed: completed(t, free)},    // unknown
	}
	eventsBefore, recordsBefore := len(forwarded(t, pool)), len(relayed(t, pool))
	jobsBefore := len(jobArgs(t, pool, outbox.Kind, relay.Kind, relay.SettledKind))
	var settled []bool
	if err := stores.InTx(ctx, func(ctx context.Context, st *store.Store) error {
		settled, err = st.SettleVerifications(ctx, settle)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, true, false, false, false}; !slices.Equal(settled, want) {
		t.Fatalf("settled %v, want %v", settled, want)
	}
	if got := len(forwarded(t, pool)) - eventsBefore; got != 2 {
		t.Errorf("%d events written, want 2 (one per verification settled)", got)
	}
	if got := len(relayed(t, pool)) - recordsBefore; got != 1 {
		t.Errorf("%d numbers for Connect written, want 1 (the VERIFIED one)", got)
	}
	if got := len(jobArgs(t, pool, outbox.Kind, relay.Kind, relay.SettledKind)) - jobsBefore; got != 0 {
		t.Errorf("%d event or number jobs written, want none (they are in the relay queue)", got)
	}
	if got := drains(t, pool); got != 1 {
		t.Errorf("%d drain jobs written, want 1 (the process's first settle)", got)
	}
	var status domain.Status
	var charged, after int64
	if err := pool.QueryRow(ctx, `SELECT status, charged, balance_after FROM verification.verifications WHERE id = $1`, verified.ID).
		Scan(&status, &charged, &after); err != nil {
		t.Fatal(err)
	}
	if status != domain.StatusVerified || charged != 1 || after != 9 {
		t.Errorf("settled row %s charged %d balance_after %d, want VERIFIED 1 9 (the first settlement)", status, charged, after)
	}
}
