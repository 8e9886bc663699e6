package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
)

// TestCapabilitiesFindTheirClient: what reaches the service alone (a browser's transaction id,
// an operator's OAuth state) leads to its client's row, and to no other client's; the lookup
// goes with its row when the retention purges it, and an expired state's lookup when its
// session's time is over.
func TestCapabilitiesFindTheirClient(t *testing.T) {
	pool, stores := newStores(t)
	ctx := context.Background()
	st := stores.Pool()
	client, other := uuid.NewString(), uuid.NewString()
	lookups := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM verification.client_lookups`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	tr, err := st.InsertTransaction(ctx, domain.Transaction{ID: uuid.NewString(), ClientID: client, ServiceCode: "VERIFY",
		MetadataID: "m", Features: []string{"VERIFY"}, Status: domain.TransactionPending, ExpiresAt: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.TransactionClient(ctx, tr.ID); err != nil || got != client {
		t.Fatalf("the transaction's client: %q %v, want %s", got, err, client)
	}
	for _, id := range []string{uuid.NewString(), "not-a-uuid"} {
		if _, err := st.TransactionClient(ctx, id); !errors.Is(err, fault.ErrNotFound) {
			t.Errorf("the client of transaction %q: %v, want ErrNotFound", id, err)
		}
	}
	if _, err := st.LockTransaction(ctx, other, tr.ID); !errors.Is(err, fault.ErrNotFound) {
		t.Errorf("another client locks the transaction: %v, want ErrNotFound", err)
	}
	if got, err := st.LockTransaction(ctx, client, tr.ID); err != nil || got.ID != tr.ID {
		t.Errorf("the client locks its transaction: %+v %v", got, err)
	}

	op := "alpha"
	state := sha256.Sum256([]byte("the state"))
	sess := domain.Session{ID: uuid.NewString(), ClientID: client, Source: "WEB", Status: domain.AuthorizationPending, OperatorID: &op,
		Method: "NETWORK_API", StateHash: state[:], OAuthSealed: []byte{1}, CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)}
	if err := st.InsertSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClaimAuthorization(ctx, state[:], []string{"SDK"}); !errors.Is(err, fault.ErrNotFound) {
		t.Errorf("a claim for another source: %v, want ErrNotFound", err)
	}
	got, err := st.ClaimAuthorization(ctx, state[:], []string{"WEB"})
	if err != nil || got.ID != sess.ID || got.ClientID != client {
		t.Fatalf("claim: %+v %v, want session %s of %s", got, err, sess.ID, client)
	}
	if _, err := st.ClaimAuthorization(ctx, state[:], []string{"WEB"}); !errors.Is(err, fault.ErrNotFound) {
		t.Errorf("a second claim of the state: %v, want ErrNotFound", err)
	}
	if n := lookups(); n != 2 {
		t.Fatalf("%d lookups, want 2 (the transaction, the state)", n)
	}

	// Both past their retention: the transaction goes with its lookup, the session with its
	// state's.
	if _, err := pool.Exec(ctx, `UPDATE verification.transactions SET expires_at = now() - interval '2 days'`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE verification.sessions SET expires_at = now() - interval '2 days'`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE verification.client_lookups SET expires_at = now() - interval '2 days' WHERE expires_at IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	if n, err := st.PurgeTransactions(ctx, 24*time.Hour, 10); err != nil || n != 1 {
		t.Fatalf("purge transactions: %d %v, want 1", n, err)
	}
	if _, err := st.TransactionClient(ctx, tr.ID); !errors.Is(err, fault.ErrNotFound) {
		t.Errorf("the purged transaction's client: %v, want ErrNotFound", err)
	}
	if n, err := st.PurgeSessions(ctx, 24*time.Hour, 10); err != nil || n != 1 {
		t.Fatalf("purge sessions: %d %v, want 1", n, err)
	}
	if n := lookups(); n != 0 {
		t.Errorf("%d lookups left after the purges, want none", n)
	}
}
