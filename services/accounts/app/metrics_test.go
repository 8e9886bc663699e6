package app_test

import (
	"context"
	"testing"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/app/apptest"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/platform/metricstest"
)

// TestMetrics debits and refunds through the real gRPC server and reads the service's registry:
// the business counters, the RPC metrics and the pool's gauges all report.
func TestMetrics(t *testing.T) {
	s := apptest.Start(t)
	c := s.CreateClient(t, 1)
	ctx := context.Background()
	debit := func(ref string) {
		_, _ = s.Internal.Debit(ctx, &accountsv1.DebitRequest{ClientId: c.ID, Kind: accountsv1.LedgerKind_LEDGER_KIND_VERIFICATION, Reference: ref})
	}
	debit("verification:1")
	debit("verification:2") // the balance is spent
	if _, err := s.Internal.Refund(ctx, &accountsv1.RefundRequest{ClientId: c.ID, Reference: "verification:1"}); err != nil {
		t.Fatal(err)
	}

	got := metricstest.Gather(t, s.Metrics)
	tests := []struct {
		name  string
		match []string
		want  float64
	}{
		{"mnv_accounts_debits_total", []string{"kind=VERIFICATION", "outcome=charged"}, 1},
		{"mnv_accounts_debits_total", []string{"kind=VERIFICATION", "outcome=insufficient_balance"}, 1},
		{"mnv_accounts_debited_credits_total", []string{"kind=VERIFICATION"}, 1},
		{"mnv_accounts_refunds_total", []string{"outcome=refunded"}, 1},
		{"mnv_accounts_refunded_credits_total", nil, 1},
		{"grpc_server_handled_total", []string{"grpc_method=Debit", "grpc_code=OK"}, 1},
		{"grpc_server_handled_total", []string{"grpc_method=Debit", "grpc_code=FailedPrecondition"}, 1},
		{"mnv_db_pool_max_connections", []string{"pool=accounts"}, float64(8)}, // apptest's pool
		{"mnv_db_pool_max_connections", []string{"pool=accounts_batch"}, float64(billing.BatchConns)},
	}
	for _, tt := range tests {
		if v := metricstest.Sum(got, tt.name, tt.match...); v != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.name, tt.match, v, tt.want)
		}
	}
}
