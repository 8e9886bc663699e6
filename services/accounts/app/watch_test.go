package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/app/apptest"
	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/accounts/internal/store"
	"github.com/mnvhq/mnv/services/platform/pg"
)

// TestWatchPrincipals: the stream starts, beats, and pushes exactly the committed changes that
// stale a principal, from a change on another replica; only verification and connect may
// watch; a replica that loses its LISTEN ends its streams.
func TestWatchPrincipals(t *testing.T) {
	s := apptest.Start(t)
	other := apptest.StartReplica(t, s)
	db, err := pgxpool.New(context.Background(), s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	c := other.CreateClient(t, 100)
	var keyID string
	if err := db.QueryRow(context.Background(), `SELECT id::text FROM accounts.api_keys WHERE client_id = $1`, c.ID).Scan(&keyID); err != nil {
		t.Fatal(err)
	}

	// The operator's token is no internal caller's.
	operator := accountsv1.NewAccountsInternalServiceClient(apptest.Dial(t, s.Addr, apptest.AdminToken))
	refused, err := operator.WatchPrincipals(context.Background(), &accountsv1.WatchPrincipalsRequest{})
	if err == nil {
		_, err = refused.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("the operator's watch: %v, want Unauthenticated", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stream accountsv1.AccountsInternalService_WatchPrincipalsClient
	for {
		// The replica's LISTEN may still be coming up: UNAVAILABLE until it is.
		stream, err = s.Internal.WatchPrincipals(ctx, &accountsv1.WatchPrincipalsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		first, err := stream.Recv()
		if status.Code(err) == codes.Unavailable {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if first.GetKind() != accountsv1.WatchPrincipalsResponse_KIND_STARTED || first.GetHeartbeatEvery().AsDuration() != 250*time.Millisecond {
			t.Fatalf("first message %v", first)
		}
		break
	}
	// next returns the next message that is not a heartbeat, failing after a second of them.
	next := func() *accountsv1.WatchPrincipalsResponse {
		t.Helper()
		deadline := time.Now().Add(time.Second)
		for {
			m, err := stream.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if m.GetKind() != accountsv1.WatchPrincipalsResponse_KIND_HEARTBEAT {
				return m
			}
			if time.Now().After(deadline) {
				return nil
			}
		}
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Exec(context.Background(), sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	// The store sends the notice of each change in the change's transaction (the tables run no
	// trigger: docs/operations.md#past-one-postgresql).
	st := store.New(db)
	ok := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// Not a change of the principal: nothing pushed (a new token is not in any cache yet). A
	// rolled-back revoke: nothing pushed.
	const tokenID = "20000000-0000-4000-8000-000000000001"
	_, err = st.InsertSDKToken(context.Background(), domain.SDKToken{ID: tokenID, ClientID: c.ID, Label: "app", Hint: "h"}, []byte("fingerprint"))
	ok(err)
	ok(st.TouchKeys(context.Background(), [][2]string{{c.ID, keyID}}))
	if err := pg.InTx(context.Background(), db, func(tx pgx.Tx) error {
		if err := store.New(tx).RevokeKey(context.Background(), c.ID, keyID); err != nil {
			return err
		}
		return errRollback
	}); err != errRollback {
		t.Fatal(err)
	}
	if m := next(); m != nil {
		t.Fatalf("pushed %v for no committed change", m)
	}

	tests := []struct {
		name   string
		change func()
		want   *accountsv1.WatchPrincipalsResponse
	}{
		{"suspended through the other replica", func() {
			if _, err := other.Admin.SetClientStatus(context.Background(), &accountsv1.SetClientStatusRequest{
				ClientId: c.ID, Status: accountsv1.ClientStatus_CLIENT_STATUS_SUSPENDED,
			}); err != nil {
				t.Fatal(err)
			}
		}, &accountsv1.WatchPrincipalsResponse{Kind: accountsv1.WatchPrincipalsResponse_KIND_CLIENT, ClientId: c.ID}},
		{"features changed", func() {
			if _, err := other.Admin.SetClientFeatures(context.Background(), &accountsv1.SetClientFeaturesRequest{
				ClientId: c.ID, Features: []accountsv1.Feature{accountsv1.Feature_FEATURE_CONNECT},
			}); err != nil {
				t.Fatal(err)
			}
		}, &accountsv1.WatchPrincipalsResponse{Kind: accountsv1.WatchPrincipalsResponse_KIND_CLIENT, ClientId: c.ID}},
		{"client changed by the one path", func() { ok(st.ClientChanged(context.Background(), c.ID)) },
			&accountsv1.WatchPrincipalsResponse{Kind: accountsv1.WatchPrincipalsResponse_KIND_CLIENT, ClientId: c.ID}},
		{"key role changed by an operator's SQL, with its notice", func() {
			ok(pg.InTx(context.Background(), db, func(tx pgx.Tx) error {
				if _, err := tx.Exec(context.Background(), `UPDATE accounts.api_keys SET role = 'MEMBER' WHERE client_id = $1 AND id = $2`, c.ID, keyID); err != nil {
					return err
				}
				_, err := tx.Exec(context.Background(), `SELECT pg_notify('mnv_accounts_principals', 'api_key:' || $1 || ':' || $2)`, c.ID, keyID)
				return err
			}))
		}, &accountsv1.WatchPrincipalsResponse{Kind: accountsv1.WatchPrincipalsResponse_KIND_API_KEY, ClientId: c.ID, CredentialId: keyID}},
		{"key retired by a rotation with grace", func() {
			// Replaced by itself: the notice is what is looked at, not the rotation.
			_, err := st.RetireKey(context.Background(), c.ID, keyID, keyID, time.Hour)
			ok(err)
		}, &accountsv1.WatchPrincipalsResponse{Kind: accountsv1.WatchPrincipalsResponse_KIND_API_KEY, ClientId: c.ID, CredentialId: keyID}},
		{"SDK token revoked", func() {
			_, err := st.RevokeSDKToken(context.Background(), c.ID, tokenID)
			ok(err)
		}, &accountsv1.WatchPrincipalsResponse{Kind: accountsv1.WatchPrincipalsResponse_KIND_SDK_TOKEN, ClientId: c.ID, CredentialId: tokenID}},
		{"key revoked", func() { ok(st.RevokeKey(context.Background(), c.ID, keyID)) },
			&accountsv1.WatchPrincipalsResponse{Kind: accountsv1.WatchPrincipalsResponse_KIND_API_KEY, ClientId: c.ID, CredentialId: keyID}},
	}
	for _, tt := range tests {
		tt.change()
		m := next()
		if m == nil || m.GetKind() != tt.want.GetKind() || m.GetClientId() != tt.want.GetClientId() || m.GetCredentialId() != tt.want.GetCredentialId() {
			t.Fatalf("%s: pushed %v, want %v", tt.name, m, tt.want)
		}
	}

	// The replica's LISTEN connection is lost: its streams end.
	exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'mnv-accounts-listen'`)
	for {
		_, err := stream.Recv()
		if err == nil {
			continue
		}
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("after the LISTEN was lost the stream ended with %v, want Unavailable", err)
		}
		break
	}
}

var errRollback = rollback{}

type rollback struct{}

func (rollback) Error() string { return "roll back" }
