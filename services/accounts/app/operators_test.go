package app_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/accountsclient"
	"github.com/mnvhq/mnv/services/accounts/app/apptest"
	"github.com/mnvhq/mnv/services/platform/auth/authtest"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/grpcclient"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// TestClientOperatorsOverTheWire: the operator of the service sets a client's operators through
// the admin API; DescribeClient shows them and the principal verification gets from
// Authenticate (through accountsclient) carries them. Nobody else may set them.
func TestClientOperatorsOverTheWire(t *testing.T) {
	s := apptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := s.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX)
	other := s.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY)
	auth := dialLedger(t, s.Addr) // accountsclient, as connect
	he, api := accountsv1.OperatorMethod_OPERATOR_METHOD_HEADER_ENRICHMENT, accountsv1.OperatorMethod_OPERATOR_METHOD_NETWORK_API

	principalOps := func(key, client string) principal.Operators {
		t.Helper()
		p, err := auth.AuthenticateAPIKey(ctx, key, client)
		if err != nil {
			t.Fatal(err)
		}
		return p.Operators
	}
	if got := principalOps(c.APIKey, c.ID); !got.Default {
		t.Fatalf("a new client's principal: %+v, want the default set", got)
	}

	resp, err := s.Admin.SetClientOperators(ctx, &accountsv1.SetClientOperatorsRequest{ClientId: c.ID, Operators: &accountsv1.OperatorEnablement{
		Grants: []*accountsv1.OperatorGrant{{OperatorId: "sandbox", Methods: []accountsv1.OperatorMethod{api, he}}, {OperatorId: "acme-ae", Methods: []accountsv1.OperatorMethod{api}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := principal.Operators{Grants: []principal.OperatorGrant{
		{Operator: "acme-ae", Methods: []string{"NETWORK_API"}},
		{Operator: "sandbox", Methods: []string{"HEADER_ENRICHMENT", "NETWORK_API"}},
	}}
	if g := resp.GetOperators().GetGrants(); len(g) != 2 || g[0].GetOperatorId() != "acme-ae" || resp.GetOperators().GetDefaultSet() {
		t.Fatalf("answer: %v", resp.GetOperators())
	}
	if got := principalOps(c.APIKey, c.ID); !reflect.DeepEqual(got, want) {
		t.Fatalf("principal: %+v, want %+v", got, want)
	}
	d, err := s.Admin.DescribeClient(ctx, &accountsv1.DescribeClientRequest{ClientId: c.ID})
	if err != nil || len(d.GetDetails().GetOperators().GetGrants()) != 2 {
		t.Fatalf("described: %v, %v", d.GetDetails().GetOperators(), err)
	}
	if got := principalOps(other.APIKey, other.ID); !got.Default {
		t.Fatalf("the other client's principal changed: %+v", got)
	}

	// None at all, and back to the default set.
	if _, err := s.Admin.SetClientOperators(ctx, &accountsv1.SetClientOperatorsRequest{ClientId: c.ID, Operators: &accountsv1.OperatorEnablement{}}); err != nil {
		t.Fatal(err)
	}
	if got := principalOps(c.APIKey, c.ID); got.Default || len(got.Grants) != 0 {
		t.Fatalf("after none: %+v", got)
	}
	if _, err := s.Admin.SetClientOperators(ctx, &accountsv1.SetClientOperatorsRequest{ClientId: c.ID, Operators: &accountsv1.OperatorEnablement{DefaultSet: true}}); err != nil {
		t.Fatal(err)
	}
	if got := principalOps(c.APIKey, c.ID); !got.Default {
		t.Fatalf("after the default: %+v", got)
	}

	// Refused: no enablement at all, a method left unspecified, another client id, other callers.
	for name, req := range map[string]*accountsv1.SetClientOperatorsRequest{
		"no enablement":      {ClientId: c.ID},
		"unspecified method": {ClientId: c.ID, Operators: &accountsv1.OperatorEnablement{Grants: []*accountsv1.OperatorGrant{{OperatorId: "x", Methods: []accountsv1.OperatorMethod{0}}}}},
		"default and grants": {ClientId: c.ID, Operators: &accountsv1.OperatorEnablement{DefaultSet: true, Grants: []*accountsv1.OperatorGrant{{OperatorId: "x", Methods: []accountsv1.OperatorMethod{he}}}}},
	} {
		if _, err := s.Admin.SetClientOperators(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if _, err := s.Admin.SetClientOperators(ctx, &accountsv1.SetClientOperatorsRequest{ClientId: "6f1c2e4a-0000-4000-8000-000000000000", Operators: &accountsv1.OperatorEnablement{}}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown client: %v, want NotFound", err)
	}
	all := &accountsv1.SetClientOperatorsRequest{ClientId: c.ID, Operators: &accountsv1.OperatorEnablement{Grants: []*accountsv1.OperatorGrant{{OperatorId: "*", Methods: []accountsv1.OperatorMethod{he, api}}}}}
	for name, token := range map[string]string{"no credential": "", "verification": authtest.VerificationToken, "gateway": authtest.GatewayToken} {
		admin := accountsv1.NewAccountsAdminServiceClient(apptest.Dial(t, s.Addr, token))
		if _, err := admin.SetClientOperators(ctx, all); status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: %v, want Unauthenticated", name, err)
		}
	}
	if got := principalOps(c.APIKey, c.ID); !got.Default {
		t.Fatalf("after the refusals: %+v", got)
	}
}

// TestClientPrincipalCarriesOperators: the principal verification reads by a client's id alone
// (accountsclient.ClientPrincipal: the CAMARA facade, before and after the client
// authenticates) carries its status, features and operators, and no credential. Who may ask is
// TestClientPrincipalOverTheWire's.
func TestClientPrincipalCarriesOperators(t *testing.T) {
	s := apptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := s.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY)
	api := accountsv1.OperatorMethod_OPERATOR_METHOD_NETWORK_API
	if _, err := s.Admin.SetClientOperators(ctx, &accountsv1.SetClientOperatorsRequest{ClientId: c.ID, Operators: &accountsv1.OperatorEnablement{
		Grants: []*accountsv1.OperatorGrant{{OperatorId: "acme-ae", Methods: []accountsv1.OperatorMethod{api}}},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Admin.SetClientStatus(ctx, &accountsv1.SetClientStatusRequest{ClientId: c.ID, Status: accountsv1.ClientStatus_CLIENT_STATUS_SUSPENDED}); err != nil {
		t.Fatal(err)
	}
	verification, err := accountsclient.Dial(s.Addr, grpcclient.Options{Token: authtest.VerificationToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = verification.Close() })

	p, err := verification.ClientPrincipal(ctx, c.ID)
	want := principal.Operators{Grants: []principal.OperatorGrant{{Operator: "acme-ae", Methods: []string{"NETWORK_API"}}}}
	if err != nil || p.ClientID != c.ID || p.Status != principal.StatusSuspended || !reflect.DeepEqual(p.Features, []string{"VERIFY"}) ||
		!reflect.DeepEqual(p.Operators, want) || p.KeyID != "" || p.SDKTokenID != "" || p.Role != "" {
		t.Fatalf("access %+v, %v", p, err)
	}
	if _, err := verification.ClientPrincipal(ctx, "6f1c2e4a-0000-4000-8000-000000000000"); !errors.Is(err, fault.ErrNotFound) {
		t.Errorf("unknown client: %v, want fault.ErrNotFound", err)
	}
}
