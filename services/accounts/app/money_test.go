package app_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/status"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/app/apptest"
	"github.com/mnvhq/mnv/services/platform/accountsclient"
	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/auth/authtest"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/grpcclient"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
	"github.com/mnvhq/mnv/services/platform/money"
)

func dialLedger(t *testing.T, addr string) *accountsclient.Client {
	t.Helper()
	c, err := accountsclient.Dial(addr, grpcclient.Options{Token: authtest.ConnectToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestLedgerPort drives accountsclient, the money port over gRPC, against a real accounts: a
// charge and its replay, each refusal as the very value accounts' rules return (so a caller
// tests it with errors.Is, and answers its own caller with accounts' reason and message), and
// every other failure as an unknown outcome.
func TestLedgerPort(t *testing.T) {
	s := apptest.Start(t)
	ledger := dialLedger(t, s.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	rich := s.CreateClient(t, 10)
	poor := s.CreateClient(t, 0)
	suspended := s.CreateClient(t, 10)
	if _, err := s.Admin.SetClientStatus(ctx, &accountsv1.SetClientStatusRequest{ClientId: suspended.ID, Status: accountsv1.ClientStatus_CLIENT_STATUS_SUSPENDED}); err != nil {
		t.Fatal(err)
	}
	expired := s.CreateClient(t, 10)
	db, err := pgx.Connect(ctx, s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	if _, err := db.Exec(ctx, `UPDATE accounts.balances SET expires_at = now() - interval '1 second' WHERE client_id = $1`, expired.ID); err != nil {
		t.Fatal(err)
	}

	first, err := ledger.Debit(ctx, money.Charge{ClientID: rich.ID, Kind: money.KindStuckPlusReveal, Reference: "reveal:1"})
	if err != nil || first.Amount != 5 || first.BalanceAfter != 5 || first.Replayed || first.EntryID == "" {
		t.Fatalf("debit = %+v, %v; want 5 charged, 5 left", first, err)
	}
	again, err := ledger.Debit(ctx, money.Charge{ClientID: rich.ID, Kind: money.KindStuckPlusReveal, Reference: "reveal:1"})
	if err != nil || again.EntryID != first.EntryID || again.Amount != 5 || !again.Replayed {
		t.Fatalf("repeated debit = %+v, %v; want the first charge, replayed", again, err)
	}

	refusals := []struct {
		name   string
		charge money.Charge
		want   error
	}{
		{"balance too low", money.Charge{ClientID: poor.ID, Kind: money.KindVerification, Variant: "HEADER_ENRICHMENT", Reference: "verification:1"}, money.ErrInsufficientBalance},
		{"balance expired", money.Charge{ClientID: expired.ID, Kind: money.KindVerification, Reference: "verification:2"}, money.ErrBalanceExpired},
		{"client suspended", money.Charge{ClientID: suspended.ID, Kind: money.KindConnectEnrichment, Reference: "enrichment:1"}, fault.ErrSuspended},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ledger.Debit(ctx, tt.charge)
			if err != tt.want {
				t.Fatalf("debit error = %v, want %v itself", err, tt.want)
			}
			// What the caller answers is what accounts answered: the reason survives the hop.
			_, raw := s.Internal.Debit(ctx, &accountsv1.DebitRequest{ClientId: tt.charge.ClientID, Kind: accountsv1.LedgerKind(accountsv1.LedgerKind_value["LEDGER_KIND_"+string(tt.charge.Kind)]), Variant: tt.charge.Variant, Reference: tt.charge.Reference})
			relayed := grpcserver.Status(ctx, zaptest.NewLogger(t), err)
			if status.Code(relayed) != status.Code(raw) || apierr.Parse(relayed) != apierr.Parse(raw) {
				t.Fatalf("relayed %v, accounts answered %v", relayed, raw)
			}
		})
	}

	t.Run("an answer that is no refusal leaves the outcome unknown", func(t *testing.T) {
		// The reference was charged for another kind: accounts refuses it as a CONFLICT, which is
		// a caller's bug, not a refusal of the debit.
		_, err := ledger.Debit(ctx, money.Charge{ClientID: rich.ID, Kind: money.KindVerification, Reference: "reveal:1"})
		if !errors.Is(err, fault.ErrUnavailable) || money.Away(err) || errors.Is(err, money.ErrInsufficientBalance) {
			t.Fatalf("debit error = %v, want an unknown outcome, accounts not away", err)
		}
	})

	t.Run("refund", func(t *testing.T) {
		desc := "test"
		back, err := ledger.Refund(ctx, money.Refund{ClientID: rich.ID, Reference: "reveal:1", Description: &desc})
		if err != nil || back.Amount != 5 || back.BalanceAfter != 10 || back.Replayed {
			t.Fatalf("refund = %+v, %v; want 5 back, 10 left", back, err)
		}
		if again, err := ledger.Refund(ctx, money.Refund{ClientID: rich.ID, Reference: "reveal:1"}); err != nil || again.EntryID != back.EntryID || !again.Replayed {
			t.Fatalf("repeated refund = %+v, %v; want the first, replayed", again, err)
		}
		if _, err := ledger.Refund(ctx, money.Refund{ClientID: rich.ID, Reference: "never-charged"}); err != money.ErrNothingToRefund {
			t.Fatalf("refund of nothing = %v, want ErrNothingToRefund", err)
		}
		if balance, err := ledger.Balance(ctx, rich.ID); err != nil || balance != 10 {
			t.Fatalf("balance = %d, %v; want 10", balance, err)
		}
	})
}

// TestLedgerPortAway: a call that cannot reach accounts, or runs out of time, has an unknown
// outcome and is Away, so a reconciler stops its round instead of timing out item by item.
func TestLedgerPortAway(t *testing.T) {
	s := apptest.Start(t)
	client := s.CreateClient(t, 10)
	gone := dialLedger(t, "127.0.0.1:1") // nothing listens on port 1
	live := dialLedger(t, s.Addr)
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	ctx, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	tests := []struct {
		name   string
		ledger *accountsclient.Client
		ctx    context.Context
	}{
		{"unreachable", gone, ctx},
		{"out of time", live, expired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.ledger.Debit(tt.ctx, money.Charge{ClientID: client.ID, Kind: money.KindVerification, Reference: "verification:away"})
			if !errors.Is(err, fault.ErrUnavailable) || !money.Away(err) {
				t.Fatalf("debit error = %v, want an unknown outcome with accounts away", err)
			}
			_, err = tt.ledger.Refund(tt.ctx, money.Refund{ClientID: client.ID, Reference: "verification:away"})
			if !errors.Is(err, fault.ErrUnavailable) || !money.Away(err) {
				t.Fatalf("refund error = %v, want an unknown outcome with accounts away", err)
			}
		})
	}
}
