package app_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/app/apptest"
	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/auth/authtest"
	"github.com/mnvhq/mnv/services/platform/fault"
)

// TestEveryMethodRejectsUnauthenticatedCallers calls every method of every accounts service
// with no credential and with the wrong service credential: each must refuse.
func TestEveryMethodRejectsUnauthenticatedCallers(t *testing.T) {
	s := apptest.Start(t)
	c := s.CreateClient(t, 10)
	anon := apptest.Dial(t, s.Addr, "")
	asInternal := apptest.Dial(t, s.Addr, authtest.VerificationToken)
	asGateway := apptest.Dial(t, s.Addr, authtest.GatewayToken)
	asAdmin := apptest.Dial(t, s.Addr, apptest.AdminToken)

	public := accountsv1.NewAccountsServiceClient(anon)
	internalAnon := accountsv1.NewAccountsInternalServiceClient(anon)
	internalAsAdmin := accountsv1.NewAccountsInternalServiceClient(asAdmin)
	adminAnon := accountsv1.NewAccountsAdminServiceClient(anon)
	adminAsInternal := accountsv1.NewAccountsAdminServiceClient(asInternal)
	publicAsInternal := accountsv1.NewAccountsServiceClient(asInternal)
	internalAsGateway := accountsv1.NewAccountsInternalServiceClient(asGateway)

	ctx := context.Background()
	calls := map[string]func() error{
		"GetClient": func() error { _, err := public.GetClient(ctx, &accountsv1.GetClientRequest{}); return err },
		"GetClient with service token only": func() error {
			_, err := publicAsInternal.GetClient(ctx, &accountsv1.GetClientRequest{})
			return err
		},
		"RotateApiKey": func() error {
			_, err := public.RotateApiKey(ctx, &accountsv1.RotateApiKeyRequest{SecretKey: c.Secret})
			return err
		},
		"ListApiKeys": func() error { _, err := public.ListApiKeys(ctx, &accountsv1.ListApiKeysRequest{}); return err },
		"ListLedgerEntries": func() error {
			_, err := public.ListLedgerEntries(ctx, &accountsv1.ListLedgerEntriesRequest{})
			return err
		},
		"CreateSdkToken": func() error {
			_, err := public.CreateSdkToken(ctx, &accountsv1.CreateSdkTokenRequest{Label: "x"})
			return err
		},
		"Debit": func() error {
			_, err := internalAnon.Debit(ctx, &accountsv1.DebitRequest{ClientId: c.ID, Kind: accountsv1.LedgerKind_LEDGER_KIND_VERIFICATION, Reference: "x"})
			return err
		},
		// A valid internal token of a caller the method does not admit.
		"Debit with the gateway's token": func() error {
			_, err := internalAsGateway.Debit(ctx, &accountsv1.DebitRequest{ClientId: c.ID, Kind: accountsv1.LedgerKind_LEDGER_KIND_VERIFICATION, Reference: "x"})
			return err
		},
		"AuthenticateClientSecret with the gateway's token": func() error {
			_, err := internalAsGateway.AuthenticateClientSecret(ctx, &accountsv1.AuthenticateClientSecretRequest{ClientId: c.ID, ClientSecret: c.Secret})
			return err
		},
		"Debit with admin token": func() error {
			_, err := internalAsAdmin.Debit(ctx, &accountsv1.DebitRequest{ClientId: c.ID, Kind: accountsv1.LedgerKind_LEDGER_KIND_VERIFICATION, Reference: "x"})
			return err
		},
		"Authenticate": func() error {
			_, err := internalAnon.Authenticate(ctx, &accountsv1.AuthenticateRequest{ApiKey: c.APIKey})
			return err
		},
		"GetBalance": func() error {
			_, err := internalAnon.GetBalance(ctx, &accountsv1.GetBalanceRequest{ClientId: c.ID})
			return err
		},
		"Refund": func() error {
			_, err := internalAnon.Refund(ctx, &accountsv1.RefundRequest{ClientId: c.ID, Reference: "x"})
			return err
		},
		"CreateClient": func() error { _, err := adminAnon.CreateClient(ctx, &accountsv1.CreateClientRequest{}); return err },
		"TopUpBalance with internal token": func() error {
			_, err := adminAsInternal.TopUpBalance(ctx, &accountsv1.TopUpBalanceRequest{ClientId: c.ID, Amount: 1000})
			return err
		},
		"SetClientStatus": func() error {
			_, err := adminAnon.SetClientStatus(ctx, &accountsv1.SetClientStatusRequest{ClientId: c.ID})
			return err
		},
	}
	for name, call := range calls {
		if code := status.Code(call()); code != codes.Unauthenticated {
			t.Errorf("%s: code %s, want Unauthenticated", name, code)
		}
	}
	bal, err := s.Internal.GetBalance(ctx, &accountsv1.GetBalanceRequest{ClientId: c.ID})
	if err != nil || bal.GetBalance() != 10 {
		t.Fatalf("balance after the refused calls: %v, %v", bal.GetBalance(), err)
	}
}

func TestMembersCannotManageKeys(t *testing.T) {
	s := apptest.Start(t)
	c := s.CreateClient(t, 0)
	conn := apptest.Dial(t, s.Addr, "")
	public := accountsv1.NewAccountsServiceClient(conn)
	asAdmin := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", c.APIKey, "x-client-id", c.ID)
	member, err := public.CreateApiKey(asAdmin, &accountsv1.CreateApiKeyRequest{Name: "reader", Role: accountsv1.Role_ROLE_MEMBER})
	if err != nil {
		t.Fatal(err)
	}
	asMember := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", member.GetApiKey())
	if _, err := public.ListApiKeys(asMember, &accountsv1.ListApiKeysRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("member lists keys: %v", err)
	}
	if _, err := public.ListLedgerEntries(asMember, &accountsv1.ListLedgerEntriesRequest{}); err != nil {
		t.Fatalf("member reads the ledger: %v", err)
	}
}

// TestConcurrentDebitsOverGRPC is the money invariant end to end over real sockets: 250 debits
// on a balance of 100, exactly 100 succeed, the rest are INSUFFICIENT_BALANCE, balance 0.
func TestConcurrentDebitsOverGRPC(t *testing.T) {
	s := apptest.Start(t)
	c := s.CreateClient(t, 100)
	ctx := context.Background()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok, poor int
		other    []error
	)
	for i := range 250 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Internal.Debit(ctx, &accountsv1.DebitRequest{
				ClientId: c.ID, Kind: accountsv1.LedgerKind_LEDGER_KIND_VERIFICATION, Reference: fmt.Sprintf("v-%d", i),
			})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case apierr.Parse(err).Reason == fault.InsufficientBalance:
				poor++
			default:
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	if len(other) > 0 || ok != 100 || poor != 150 {
		t.Fatalf("ok %d, insufficient %d, other %v; want 100, 150, none", ok, poor, other)
	}
	bal, err := s.Internal.GetBalance(ctx, &accountsv1.GetBalanceRequest{ClientId: c.ID})
	if err != nil || bal.GetBalance() != 0 || bal.GetValid() {
		t.Fatalf("balance %d valid %v, %v", bal.GetBalance(), bal.GetValid(), err)
	}
}
