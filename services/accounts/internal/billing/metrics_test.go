package billing_test

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mnvhq/mnv/services/accounts/internal/accountstest"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/platform/metricstest"
	"github.com/mnvhq/mnv/services/platform/money"
)

// TestMetrics drives the real ledger on a real database and checks that every outcome moves
// its counter, and only its counter.
func TestMetrics(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	reg := prometheus.NewRegistry()
	m, err := billing.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	env.Ledger.Metrics = m
	c := env.Client(t, 5)
	id := c.Client.ID
	dv := func(ref string) func() error {
		return func() error {
			_, err := env.Ledger.Debit(ctx, billing.DebitRequest{ClientID: id, Kind: money.KindVerification, Reference: ref})
			return err
		}
	}
	refund := func(ref string) func() error {
		return func() error { _, err := env.Ledger.Refund(ctx, id, ref, nil); return err }
	}
	series := func(kind, outcome string) string {
		return fmt.Sprintf("mnv_accounts_debits_total{kind=%s,outcome=%s}", kind, outcome)
	}
	// A batch's path: the first of a client is locked (not seen yet); a repeated reference is
	// tried optimistically and meets the insert's conflict (fallback); a refusal is locked.
	path := func(p string) string { return "mnv_accounts_debit_batches_total{path=" + p + "}" }
	tests := []struct {
		name string
		do   func() error
		want map[string]float64 // series that move, by how much
	}{
		{"a charge", dv("v-1"), map[string]float64{
			series("VERIFICATION", "charged"): 1, "mnv_accounts_debited_credits_total{kind=VERIFICATION}": 1, "mnv_accounts_debit_batch_size{}": 1,
			path("locked"): 1}},
		{"a replay", dv("v-1"), map[string]float64{series("VERIFICATION", "replayed"): 1, "mnv_accounts_debit_batch_size{}": 1, path("fallback"): 1}},
		{"a conflict", func() error {
			_, err := env.Ledger.Debit(ctx, billing.DebitRequest{ClientID: id, Kind: money.KindConnectEnrichment, Reference: "v-1"})
			return err
		}, map[string]float64{series("CONNECT_ENRICHMENT", "conflict"): 1, "mnv_accounts_debit_batch_size{}": 1, path("fallback"): 1}},
		{"a reveal that does not fit", func() error {
			_, err := env.Ledger.Debit(ctx, billing.DebitRequest{ClientID: id, Kind: money.KindStuckPlusReveal, Reference: "r-1"})
			return err
		}, map[string]float64{series("STUCK_PLUS_REVEAL", "insufficient_balance"): 1, "mnv_accounts_debit_batch_size{}": 1, path("locked"): 1}},
		{"an unknown client", func() error {
			_, err := env.Ledger.Debit(ctx, billing.DebitRequest{ClientID: "00000000-0000-0000-0000-000000000000", Kind: money.KindVerification, Reference: "x"})
			return err
		}, map[string]float64{series("VERIFICATION", "error"): 1, "mnv_accounts_debit_batch_size{}": 1, path("locked"): 1}},
		{"an invalid debit is not counted", func() error {
			_, err := env.Ledger.Debit(ctx, billing.DebitRequest{ClientID: id, Kind: money.KindTopUp, Reference: "x"})
			return err
		}, map[string]float64{}},
		{"a refund", refund("v-1"), map[string]float64{"mnv_accounts_refunds_total{outcome=refunded}": 1, "mnv_accounts_refunded_credits_total{}": 1}},
		{"a repeated refund", refund("v-1"), map[string]float64{"mnv_accounts_refunds_total{outcome=replayed}": 1}},
		{"nothing to refund", refund("nope"), map[string]float64{"mnv_accounts_refunds_total{outcome=nothing_to_refund}": 1}},
	}
	before := metricstest.Gather(t, reg)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_ = tt.do()
			after := metricstest.Gather(t, reg)
			for k, v := range after {
				if d := v - before[k]; d != tt.want[k] {
					t.Errorf("%s moved by %v, want %v", k, d, tt.want[k])
				}
			}
			for k := range tt.want {
				if _, ok := after[k]; !ok {
					t.Errorf("no series %s", k)
				}
			}
			before = after
		})
	}
	t.Run("every series exists before it moves", func(t *testing.T) {
		fresh := prometheus.NewRegistry()
		if _, err := billing.NewMetrics(fresh); err != nil {
			t.Fatal(err)
		}
		// Debits and credits debited per chargeable kind (4, a workflow step's among them).
		if n := len(metricstest.Gather(t, fresh)); n != 4*7+4+4+1+1+3 {
			t.Errorf("a fresh registry has %d series, want %d", n, 4*7+4+4+1+1+3)
		}
	})
	t.Run("a nil Metrics counts nothing", func(t *testing.T) {
		env.Ledger.Metrics = nil
		if err := dv("v-2")(); err != nil {
			t.Fatal(err)
		}
	})
}
