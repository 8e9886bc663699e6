package app_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/accountsclient"
	"github.com/mnvhq/mnv/services/accounts/app/apptest"
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

// TestDebitMany: each debit of a DebitMany call is answered at its index as Debit would answer
// it, as if the debits came one after another (a reference repeated is replayed at its second
// place, a balance runs out on the later ones), whatever its neighbours' outcomes; a malformed
// call, and a caller that may not move money, are refused whole.
func TestDebitMany(t *testing.T) {
	s := apptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rich := s.CreateClient(t, 10) // two reveals at 5
	poor := s.CreateClient(t, 0)
	reveal := accountsv1.LedgerKind_LEDGER_KIND_STUCK_PLUS_REVEAL
	debits := []struct {
		req        *accountsv1.DebitRequest
		wantCode   codes.Code // OK: charged
		wantAfter  int64
		wantReplay bool
	}{
		{&accountsv1.DebitRequest{ClientId: rich.ID, Kind: reveal, Reference: "reveal:1"}, codes.OK, 5, false},
		{&accountsv1.DebitRequest{ClientId: poor.ID, Kind: reveal, Reference: "reveal:1"}, codes.FailedPrecondition, 0, false},
		{&accountsv1.DebitRequest{ClientId: "not-a-client-id", Kind: reveal, Reference: "reveal:1"}, codes.InvalidArgument, 0, false},
		{&accountsv1.DebitRequest{ClientId: uuid.NewString(), Kind: reveal, Reference: "reveal:1"}, codes.NotFound, 0, false},
		{&accountsv1.DebitRequest{ClientId: rich.ID, Kind: reveal, Reference: "reveal:1"}, codes.OK, 5, true},
		{&accountsv1.DebitRequest{ClientId: rich.ID, Reference: "reveal:2"}, codes.InvalidArgument, 0, false},
		{&accountsv1.DebitRequest{ClientId: rich.ID, Kind: reveal, Reference: "reveal:3"}, codes.OK, 0, false},
		{&accountsv1.DebitRequest{ClientId: rich.ID, Kind: reveal, Reference: "reveal:4"}, codes.FailedPrecondition, 0, false},
	}
	req := &accountsv1.DebitManyRequest{}
	for _, d := range debits {
		req.Debits = append(req.Debits, d.req)
	}
	resp, err := s.Internal.DebitMany(ctx, req)
	if err != nil || len(resp.GetOutcomes()) != len(debits) {
		t.Fatalf("DebitMany = %d outcomes, %v; want %d", len(resp.GetOutcomes()), err, len(debits))
	}
	var first string
	for i, d := range debits {
		o := resp.GetOutcomes()[i]
		if d.wantCode != codes.OK {
			if f := o.GetFailure(); f == nil || codes.Code(f.GetCode()) != d.wantCode || f.GetReason() == "" || f.GetMessage() == "" {
				t.Errorf("debit %d: %v, want a failure with code %v", i, o, d.wantCode)
			}
			continue
		}
		r := o.GetDebit()
		if r == nil || r.GetCharged() != 5 || r.GetBalanceAfter() != d.wantAfter || r.GetReplayed() != d.wantReplay {
			t.Errorf("debit %d: %v, want 5 charged, %d left, replayed %v", i, o, d.wantAfter, d.wantReplay)
			continue
		}
		if d.req.GetReference() == "reveal:1" {
			if first != "" && r.GetEntryId() != first {
				t.Errorf("debit %d: entry %s, want the first one's %s", i, r.GetEntryId(), first)
			}
			first = r.GetEntryId()
		}
	}
	if f := resp.GetOutcomes()[1].GetFailure(); f.GetReason() != string(fault.InsufficientBalance) {
		t.Errorf("poor client's failure %v, want %s", f, fault.InsufficientBalance)
	}
	if f := resp.GetOutcomes()[2].GetFailure(); f.GetField() != "clientId" {
		t.Errorf("malformed client id's failure %v, want the field clientId", f)
	}
	balance, err := s.Internal.GetBalance(ctx, &accountsv1.GetBalanceRequest{ClientId: rich.ID})
	if err != nil || balance.GetBalance() != 0 {
		t.Fatalf("balance = %v, %v; want 0 (two reveals charged)", balance, err)
	}

	refused := []struct {
		name  string
		token string
		req   *accountsv1.DebitManyRequest
		want  codes.Code
	}{
		{"no debits", authtest.VerificationToken, &accountsv1.DebitManyRequest{}, codes.InvalidArgument},
		{"too many debits", authtest.VerificationToken, &accountsv1.DebitManyRequest{Debits: slices.Repeat(req.Debits[:1], 501)}, codes.InvalidArgument},
		{"no credential", "", req, codes.Unauthenticated},
		{"a client's API key", rich.APIKey, req, codes.Unauthenticated},
		{"the gateway, which moves no money", authtest.GatewayToken, req, codes.Unauthenticated},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			cl := accountsv1.NewAccountsInternalServiceClient(apptest.Dial(t, s.Addr, tt.token))
			if _, err := cl.DebitMany(ctx, tt.req); status.Code(err) != tt.want {
				t.Fatalf("DebitMany error = %v, want %v", err, tt.want)
			}
		})
	}
	if balance, err := s.Internal.GetBalance(ctx, &accountsv1.GetBalanceRequest{ClientId: poor.ID}); err != nil || balance.GetBalance() != 0 {
		t.Fatalf("poor balance = %v, %v; want 0", balance, err)
	}
}

// TestLedgerPortConcurrent: concurrent debits through the port share DebitMany calls, and each
// still gets its own answer: on a balance of six reveals, six of ten distinct debits are
// charged, the rest refused, each charged reference replays as itself, and nothing is charged
// twice.
func TestLedgerPortConcurrent(t *testing.T) {
	s := apptest.Start(t)
	ledger := dialLedger(t, s.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := s.CreateClient(t, 30) // six reveals at 5
	const n = 10
	got := make([]money.Charged, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = ledger.Debit(ctx, money.Charge{ClientID: client.ID, Kind: money.KindStuckPlusReveal, Reference: fmt.Sprint("reveal:", i)})
		})
	}
	wg.Wait()
	charged := 0
	for i := range n {
		switch {
		case errs[i] == nil && got[i].Amount == 5 && !got[i].Replayed:
			charged++
			again, err := ledger.Debit(ctx, money.Charge{ClientID: client.ID, Kind: money.KindStuckPlusReveal, Reference: fmt.Sprint("reveal:", i)})
			if err != nil || again.EntryID != got[i].EntryID || !again.Replayed {
				t.Errorf("debit %d again: %+v, %v; want its first charge, replayed", i, again, err)
			}
		case errs[i] != money.ErrInsufficientBalance:
			t.Errorf("debit %d: %+v, %v; want a charge or ErrInsufficientBalance", i, got[i], errs[i])
		}
	}
	if balance, err := ledger.Balance(ctx, client.ID); charged != 6 || err != nil || balance != 0 {
		t.Fatalf("%d charged, balance %d, %v; want 6 charged, 0 left", charged, balance, err)
	}
}
