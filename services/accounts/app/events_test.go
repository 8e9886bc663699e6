package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
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

// TestClientSetsItsOwnLowBalanceThreshold: the client's ADMIN sets its threshold with the same
// effect as the operator's (the debit that crosses it sends balance.low once), any key reads it
// with the default beside it, a MEMBER may not set it, and clearing it takes the default again.
func TestClientSetsItsOwnLowBalanceThreshold(t *testing.T) {
	s := apptest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pg.Open(ctx, s.DatabaseURL, pg.PoolConfig{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c := s.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY)
	public := accountsv1.NewAccountsServiceClient(apptest.Dial(t, s.Addr, ""))
	asAdmin := metadata.AppendToOutgoingContext(ctx, "x-api-key", c.APIKey)
	member, err := public.CreateApiKey(asAdmin, &accountsv1.CreateApiKeyRequest{Name: "reader", Role: accountsv1.Role_ROLE_MEMBER})
	if err != nil {
		t.Fatal(err)
	}
	asMember := metadata.AppendToOutgoingContext(ctx, "x-api-key", member.GetApiKey())
	debit := func(ref string) {
		t.Helper()
		if _, err := s.Internal.Debit(ctx, &accountsv1.DebitRequest{ClientId: c.ID, Kind: accountsv1.LedgerKind_LEDGER_KIND_VERIFICATION, Reference: ref}); err != nil {
			t.Fatal(err)
		}
	}
	// A debit before the change: the ledger has seen the client (balance 9, the default
	// threshold), so the next batch is decided against what it saw and must find the change.
	debit("before")

	read := func(as context.Context) *accountsv1.LowBalanceThreshold {
		t.Helper()
		r, err := public.GetLowBalanceThreshold(as, &accountsv1.GetLowBalanceThresholdRequest{})
		if err != nil {
			t.Fatalf("read the threshold: %v", err)
		}
		return r.GetLowBalanceThreshold()
	}
	def := read(asMember)
	if def.Threshold != nil || def.GetEffectiveThreshold() != def.GetDefaultThreshold() {
		t.Fatalf("a new client's threshold: %v, want unset and the default", def)
	}

	for _, tc := range []struct {
		name string
		as   context.Context
		v    *int64
		code codes.Code
	}{
		{"a MEMBER", asMember, ptr(int64(8)), codes.PermissionDenied},
		{"negative", asAdmin, ptr(int64(-1)), codes.InvalidArgument},
		{"above the largest amount", asAdmin, ptr(int64(1_000_000_000_001)), codes.InvalidArgument},
	} {
		if _, err := public.SetLowBalanceThreshold(tc.as, &accountsv1.SetLowBalanceThresholdRequest{Threshold: tc.v}); status.Code(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	if got := read(asAdmin); got.Threshold != nil {
		t.Fatalf("after refused changes: %v, want unset", got)
	}

	set, err := public.SetLowBalanceThreshold(asAdmin, &accountsv1.SetLowBalanceThresholdRequest{Threshold: ptr(int64(8))})
	if got := set.GetLowBalanceThreshold(); err != nil || got.GetThreshold() != 8 || got.GetEffectiveThreshold() != 8 || got.GetDefaultThreshold() != def.GetDefaultThreshold() {
		t.Fatalf("set 8: %v, %v", got, err)
	}
	// The operator sees what the client set: one threshold, whoever sets it.
	d, err := s.Admin.DescribeClient(ctx, &accountsv1.DescribeClientRequest{ClientId: c.ID})
	if err != nil || d.GetDetails().GetLowBalanceThreshold() != 8 {
		t.Fatalf("the operator's view: %v, %v", d.GetDetails().LowBalanceThreshold, err)
	}
	// 9 → 5 crosses 8 once: one balance.low, as with the operator's threshold.
	for i := range 4 {
		debit(fmt.Sprint("v-", i))
	}
	var got []string
	for _, e := range accountstest.Events(t, pool, c.ID) {
		got = append(got, e.Type)
	}
	if want := fmt.Sprint([]string{events.APIKeyCreated, events.APIKeyCreated, events.BalanceLow}); fmt.Sprint(got) != want {
		t.Fatalf("events %v, want %s", got, want)
	}

	cleared, err := public.SetLowBalanceThreshold(asAdmin, &accountsv1.SetLowBalanceThresholdRequest{})
	if got := cleared.GetLowBalanceThreshold(); err != nil || got.Threshold != nil || got.GetEffectiveThreshold() != def.GetDefaultThreshold() {
		t.Fatalf("clear: %v, %v", got, err)
	}
}
