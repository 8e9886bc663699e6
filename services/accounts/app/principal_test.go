package app_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
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

// TestClientPrincipalOverTheWire: verification (through accountsclient) reads a client's
// principal by its id as the client is now: its status, features and operators after each
// change, no key. An unknown or malformed id is not found; no other caller may ask.
func TestClientPrincipalOverTheWire(t *testing.T) {
	s := apptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := s.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_NUMBER_SHARE)
	ver, err := accountsclient.Dial(s.Addr, grpcclient.Options{Token: authtest.VerificationToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ver.Close() })

	read := func(t *testing.T) principal.Principal {
		t.Helper()
		p, err := ver.ClientPrincipal(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if p.ClientID != c.ID || p.KeyID != "" || p.SDKTokenID != "" || p.Role != "" {
			t.Fatalf("principal %+v", p)
		}
		return p
	}
	steps := []struct {
		name   string
		change func(t *testing.T)
		status principal.Status
		share  bool // NUMBER_SHARE among the features
		ops    string
	}{
		{"as created", func(*testing.T) {}, principal.StatusActive, true, "default"},
		{"suspended", func(t *testing.T) {
			if _, err := s.Admin.SetClientStatus(ctx, &accountsv1.SetClientStatusRequest{ClientId: c.ID, Status: accountsv1.ClientStatus_CLIENT_STATUS_SUSPENDED}); err != nil {
				t.Fatal(err)
			}
		}, principal.StatusSuspended, true, "default"},
		{"active again, NUMBER_SHARE taken away", func(t *testing.T) {
			if _, err := s.Admin.SetClientStatus(ctx, &accountsv1.SetClientStatusRequest{ClientId: c.ID, Status: accountsv1.ClientStatus_CLIENT_STATUS_ACTIVE}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Admin.SetClientFeatures(ctx, &accountsv1.SetClientFeaturesRequest{ClientId: c.ID, Features: []accountsv1.Feature{accountsv1.Feature_FEATURE_VERIFY}}); err != nil {
				t.Fatal(err)
			}
		}, principal.StatusActive, false, "default"},
		{"no operator at all", func(t *testing.T) {
			if _, err := s.Admin.SetClientOperators(ctx, &accountsv1.SetClientOperatorsRequest{ClientId: c.ID, Operators: &accountsv1.OperatorEnablement{}}); err != nil {
				t.Fatal(err)
			}
		}, principal.StatusActive, false, "none"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.change(t)
			p := read(t)
			ops := "none"
			if p.Operators.Default {
				ops = "default"
			} else if len(p.Operators.Grants) > 0 {
				ops = "grants"
			}
			if p.Status != st.status || slices.Contains(p.Features, "NUMBER_SHARE") != st.share || !slices.Contains(p.Features, "VERIFY") || ops != st.ops {
				t.Fatalf("principal %+v, want %s share %v operators %s", p, st.status, st.share, st.ops)
			}
		})
	}

	t.Run("an unknown or malformed client", func(t *testing.T) {
		for _, id := range []string{uuid.NewString(), "not-a-client", ""} {
			if p, err := ver.ClientPrincipal(ctx, id); !errors.Is(err, fault.ErrNotFound) {
				t.Errorf("%q: %+v %v, want not found", id, p, err)
			}
		}
	})
	t.Run("only verification may ask", func(t *testing.T) {
		for name, token := range map[string]string{"none": "", "gateway": authtest.GatewayToken, "connect": authtest.ConnectToken, "admin": apptest.AdminToken} {
			cl := accountsv1.NewAccountsInternalServiceClient(apptest.Dial(t, s.Addr, token))
			if _, err := cl.GetClientPrincipal(ctx, &accountsv1.GetClientPrincipalRequest{ClientId: c.ID}); status.Code(err) != codes.Unauthenticated {
				t.Errorf("%s: %v, want Unauthenticated", name, err)
			}
		}
	})
}
