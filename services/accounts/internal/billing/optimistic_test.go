package billing_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mnvhq/mnv/services/accounts/internal/accountstest"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/accounts/internal/store"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/metricstest"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/tenancy"
)

// spreads runs test for each way a batch across clients is written.
func spreads(t *testing.T, test func(t *testing.T, spread tenancy.Spread)) {
	for _, spread := range tenancy.Spreads {
		t.Run(spread.String(), func(t *testing.T) { test(t, spread) })
	}
}

// paths counts a ledger's debit batches by path (billing.Metrics).
type paths struct {
	reg  *prometheus.Registry
	last map[string]float64
}

func countPaths(t *testing.T, l *billing.Ledger) *paths {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := billing.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	l.Metrics = m
	return &paths{reg: reg, last: metricstest.Gather(t, reg)}
}

// since is the batches of each path since the last call, of the paths that moved.
func (p *paths) since(t *testing.T) map[string]int {
	t.Helper()
	now := metricstest.Gather(t, p.reg)
	out := map[string]int{}
	for _, path := range []string{billing.PathOptimistic, billing.PathFallback, billing.PathLocked} {
		k := "mnv_accounts_debit_batches_total{path=" + path + "}"
		if d := int(now[k] - p.last[k]); d != 0 {
			out[path] = d
		}
	}
	p.last = now
	return out
}

func samePaths(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestOptimisticDebit: a batch of two clients the ledger has seen is written in one round trip
// when nothing changed them; when one changed behind the ledger's back, by another replica or
// an operator, the attempt writes nothing and the batch is decided under the locks, answering
// each debit as the locked path alone would. The expiry is judged by the database's clock, not
// compared: an expiry moved further away keeps the batch optimistic.
func TestOptimisticDebit(t *testing.T) {
	spreads(t, testOptimisticDebit)
}

func testOptimisticDebit(t *testing.T, spread tenancy.Spread) {
	env := accountstest.NewSpread(t, billing.DefaultPrices(), spread)
	ctx := accountstest.Deadline(t)
	replica := env.Replica()
	counted := countPaths(t, env.Ledger)
	three := int64(3)
	tests := []struct {
		name      string
		change    func(t *testing.T, id string) // of the client x, after the ledger saw it at 8
		wantPath  string
		wantErr   error // of x's debit
		wantAfter int64 // x's balance after its debit
		wantLows  [][2]int64
	}{
		{name: "nothing changed", wantPath: billing.PathOptimistic, wantAfter: 7},
		{name: "a top-up by another replica", wantPath: billing.PathFallback, wantAfter: 12, change: func(t *testing.T, id string) {
			if _, err := replica.TopUp(ctx, nil, billing.TopUpRequest{ClientID: id, Amount: 5}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a refund by another replica", wantPath: billing.PathFallback, wantAfter: 8, change: func(t *testing.T, id string) {
			if _, err := replica.Refund(ctx, id, "a", nil); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a debit by another replica", wantPath: billing.PathFallback, wantAfter: 6, change: func(t *testing.T, id string) {
			req := debit("r-1")
			req.ClientID = id
			if _, err := replica.Debit(ctx, req); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a top-up and a debit that cancel out", wantPath: billing.PathOptimistic, wantAfter: 7, change: func(t *testing.T, id string) {
			// The rows hold what the ledger saw: the decision is the same, so is the write.
			if _, err := replica.TopUp(ctx, nil, billing.TopUpRequest{ClientID: id, Amount: 1}); err != nil {
				t.Fatal(err)
			}
			req := debit("r-1")
			req.ClientID = id
			if _, err := replica.Debit(ctx, req); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "the client suspended", wantPath: billing.PathFallback, wantErr: fault.ErrSuspended, wantAfter: 8, change: func(t *testing.T, id string) {
			if _, err := env.Clients.SetStatus(ctx, id, principal.StatusSuspended); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "the balance expired", wantPath: billing.PathFallback, wantErr: money.ErrBalanceExpired, wantAfter: 8, change: func(t *testing.T, id string) {
			env.ExpireBalance(t, id)
		}},
		{name: "the expiry moved away", wantPath: billing.PathOptimistic, wantAfter: 7, change: func(t *testing.T, id string) {
			later := time.Now().Add(time.Hour)
			if _, err := replica.TopUp(ctx, nil, billing.TopUpRequest{ClientID: id, ExpiresAt: &later}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a price override set by another replica", wantPath: billing.PathFallback, wantAfter: 5, change: func(t *testing.T, id string) {
			if _, err := replica.SetPrice(ctx, id, money.KindVerification, "HEADER_ENRICHMENT", &three); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "an override of another variant", wantPath: billing.PathFallback, wantAfter: 7, change: func(t *testing.T, id string) {
			// Not this debit's price, but the check compares every override: a miss, never a
			// wrong price.
			if _, err := replica.SetPrice(ctx, id, money.KindVerification, "NETWORK_API", &three); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a low-balance threshold set", wantPath: billing.PathFallback, wantAfter: 7, wantLows: [][2]int64{{7, 8}}, change: func(t *testing.T, id string) {
			// Seen without one, the batch crosses none; the locked path, which reads it, sends
			// balance.low once.
			if _, err := env.Clients.SetLowBalanceThreshold(ctx, id, ptr(int64(8))); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, y := env.Client(t, 10).Client.ID, env.Client(t, 10).Client.ID
			batch := func(ref string) ([]billing.DebitResult, []error) {
				rx, ry := debit(ref), debit(ref)
				rx.ClientID, ry.ClientID = x, y
				return env.Ledger.DebitMany(ctx, []billing.DebitRequest{rx, ry})
			}
			// Seen by a locked batch, then written by an optimistic one.
			for _, step := range []struct{ ref, want string }{{"a", billing.PathLocked}, {"b", billing.PathOptimistic}} {
				if _, errs := batch(step.ref); errors.Join(errs...) != nil {
					t.Fatal(errs)
				}
				if got := counted.since(t); !samePaths(got, map[string]int{step.want: 1}) {
					t.Fatalf("batch %s took %v, want %s", step.ref, got, step.want)
				}
			}
			if tt.change != nil {
				tt.change(t, x)
			}
			res, errs := batch("c")
			if got := counted.since(t); !samePaths(got, map[string]int{tt.wantPath: 1}) {
				t.Errorf("the batch after the change took %v, want %s", got, tt.wantPath)
			}
			if tt.wantErr != nil {
				if !errors.Is(errs[0], tt.wantErr) {
					t.Errorf("x's debit: %v, want %v", errs[0], tt.wantErr)
				}
			} else if errs[0] != nil || res[0].Replayed || res[0].Entry.BalanceAfter != tt.wantAfter {
				t.Errorf("x's debit: %+v, %v; want charged, balance after %d", res[0], errs[0], tt.wantAfter)
			}
			if errs[1] != nil || res[1].Replayed || res[1].Charged != 1 || res[1].Entry.BalanceAfter != 7 {
				t.Errorf("y's debit: %+v, %v; want charged 1, balance after 7", res[1], errs[1])
			}
			if got := env.CheckLedger(t, x); got != tt.wantAfter {
				t.Errorf("x's balance %d, want %d", got, tt.wantAfter)
			}
			env.CheckLedger(t, y)
			if got := lows(t, env, x); fmt.Sprint(got) != fmt.Sprint(tt.wantLows) {
				t.Errorf("x's balance.low events %v, want %v", got, tt.wantLows)
			}
			// A retry of a debit the optimistic batch wrote replays it.
			if tt.wantErr == nil {
				again, errs := batch("c")
				if errs[0] != nil || !again[0].Replayed || again[0].Entry.ID != res[0].Entry.ID {
					t.Errorf("retry of x's debit: %+v, %v; want %s replayed", again[0], errs[0], res[0].Entry.ID)
				}
				counted.since(t)
			}
		})
	}
}

// TestOptimisticDebitBacksOff: after a miss, a client's next batch takes the locked path
// without trying, and the one after tries again.
func TestOptimisticDebitBacksOff(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	counted := countPaths(t, env.Ledger)
	id := env.Client(t, 10).Client.ID
	spend := func(ref string) {
		t.Helper()
		req := debit(ref)
		req.ClientID = id
		if _, err := env.Ledger.Debit(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	spend("seen")
	counted.since(t)
	steps := []struct {
		name string
		want string
	}{
		{"behind the ledger's back", billing.PathFallback},
		{"backing off", billing.PathLocked},
		{"trying again", billing.PathOptimistic},
		{"and again", billing.PathOptimistic},
	}
	for i, st := range steps {
		if i == 0 {
			if _, err := env.Replica().TopUp(ctx, nil, billing.TopUpRequest{ClientID: id, Amount: 1}); err != nil {
				t.Fatal(err)
			}
		}
		spend(fmt.Sprint("d-", i))
		if got := counted.since(t); !samePaths(got, map[string]int{st.want: 1}) {
			t.Errorf("%s: took %v, want %s", st.name, got, st.want)
		}
	}
	if got := env.CheckLedger(t, id); got != 6 {
		t.Errorf("balance %d, want 6", got)
	}
}

// TestTwoReplicasNeverOverdraw: two ledgers over one database (two replicas of accounts) debit
// the same clients at once, each optimistic against what it last saw, which the other keeps
// changing, with a fifth of the references sent to both: each client's balance takes exactly as
// many distinct debits as it holds, no reference is charged twice, and every balance is the sum
// of its ledger, its balance_after chain unbroken.
func TestTwoReplicasNeverOverdraw(t *testing.T) {
	spreads(t, testTwoReplicasNeverOverdraw)
}

func testTwoReplicasNeverOverdraw(t *testing.T, spread tenancy.Spread) {
	env := accountstest.NewSpread(t, billing.DefaultPrices(), spread)
	ctx := accountstest.Deadline(t)
	ledgers := []*billing.Ledger{env.Ledger, env.Replica()}
	counts := []*paths{countPaths(t, ledgers[0]), countPaths(t, ledgers[1])}
	const clients, balance, workers, each = 3, 60, 8, 20 // 160 debits a replica, 288 references, 180 credits
	ids := make([]string, clients)
	for i := range ids {
		ids[i] = env.Client(t, balance).Client.ID
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		charged  = map[string]string{} // client/reference -> entry id
		failures []error
	)
	start := make(chan struct{})
	for r, l := range ledgers {
		for w := range workers {
			wg.Go(func() {
				<-start
				for i := range each {
					n := w*each + i
					ref := fmt.Sprintf("r%d-%d", r, n)
					if n%5 == 0 {
						ref = fmt.Sprint("both-", n) // sent by both replicas
					}
					req := debit(ref)
					req.ClientID = ids[n%clients]
					res, err := l.Debit(ctx, req)
					mu.Lock()
					key := req.ClientID + "/" + ref
					switch {
					case errors.Is(err, money.ErrInsufficientBalance):
					case err != nil:
						failures = append(failures, err)
					case charged[key] != "" && charged[key] != res.Entry.ID:
						failures = append(failures, fmt.Errorf("%s charged twice: %s and %s", key, charged[key], res.Entry.ID))
					default:
						charged[key] = res.Entry.ID
					}
					mu.Unlock()
				}
			})
		}
	}
	close(start)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("unexpected errors: %v", failures)
	}
	for r, c := range counts {
		t.Logf("replica %d: batches by path %v", r, c.since(t))
	}
	if len(charged) != clients*balance {
		t.Errorf("%d distinct debits charged, want %d", len(charged), clients*balance)
	}
	for _, id := range ids {
		if got := env.CheckLedger(t, id); got != 0 {
			t.Errorf("client %s: balance %d, want 0", id, got)
		}
		entries, total, err := store.New(env.Pool).ListLedger(ctx, id, 1000, 0)
		if err != nil {
			t.Fatal(err)
		}
		if total != balance+1 { // the initial top-up and a debit per credit
			t.Errorf("client %s: %d ledger rows, want %d", id, total, balance+1)
		}
		for i := len(entries) - 2; i >= 0; i-- {
			if entries[i].BalanceAfter != entries[i+1].BalanceAfter+entries[i].Amount {
				t.Fatalf("client %s, ledger row %d: balance_after %d does not follow %d%+d", id, i, entries[i].BalanceAfter, entries[i+1].BalanceAfter, entries[i].Amount)
			}
		}
	}
}
