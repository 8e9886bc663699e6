package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/app/apptest"
	"github.com/mnvhq/mnv/services/accounts/internal/accountstest"
	"github.com/mnvhq/mnv/services/platform/auth/authtest"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/pg"
)

// TestEventsOverTheWire: the operator sets a client's threshold over the admin API, debits over
// the internal API cross it once, and the client's events are in accounts' queue, each written
// by the call that made its fact. Only the admin credential may set the threshold.
func TestEventsOverTheWire(t *testing.T) {
	s := apptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pg.Open(ctx, s.DatabaseURL, pg.PoolConfig{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c := s.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY)

	threshold := int64(8)
	resp, err := s.Admin.SetClientLowBalanceThreshold(ctx, &accountsv1.SetClientLowBalanceThresholdRequest{ClientId: c.ID, Threshold: &threshold})
	if err != nil || resp.GetLowBalanceThreshold() != 8 || resp.GetEffectiveLowBalanceThreshold() != 8 {
		t.Fatalf("set threshold: %v, %v", resp, err)
	}
	for _, tc := range []struct {
		name string
		req  *accountsv1.SetClientLowBalanceThresholdRequest
		code codes.Code
	}{
		{"unknown client", &accountsv1.SetClientLowBalanceThresholdRequest{ClientId: "00000000-0000-0000-0000-000000000000", Threshold: &threshold}, codes.NotFound},
		{"negative", &accountsv1.SetClientLowBalanceThresholdRequest{ClientId: c.ID, Threshold: ptr(int64(-1))}, codes.InvalidArgument},
	} {
		if _, err := s.Admin.SetClientLowBalanceThreshold(ctx, tc.req); status.Code(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	// Not the admin: an internal caller, or a client's own key.
	for name, token := range map[string]string{"internal caller": authtest.VerificationToken, "client key": c.APIKey} {
		admin := accountsv1.NewAccountsAdminServiceClient(apptest.Dial(t, s.Addr, token))
		if _, err := admin.SetClientLowBalanceThreshold(ctx, &accountsv1.SetClientLowBalanceThresholdRequest{ClientId: c.ID}); status.Code(err) != codes.Unauthenticated && status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: %v, want refused", name, err)
		}
	}

	for i := range 5 {
		if _, err := s.Internal.Debit(ctx, &accountsv1.DebitRequest{ClientId: c.ID, Kind: accountsv1.LedgerKind_LEDGER_KIND_VERIFICATION, Reference: fmt.Sprint("v-", i)}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, e := range accountstest.Events(t, pool, c.ID) {
		got = append(got, e.Type)
	}
	if want := fmt.Sprint([]string{events.APIKeyCreated, events.BalanceLow}); fmt.Sprint(got) != want {
		t.Fatalf("events %v, want %s", got, want)
	}
}

func ptr[T any](v T) *T { return &v }
