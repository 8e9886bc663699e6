package billing_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/accounts/internal/accountstest"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/money"
)

func ptr[T any](v T) *T { return &v }

// lows reads a client's balance.low events as (balance, threshold) pairs.
func lows(t *testing.T, env *accountstest.Env, clientID string) [][2]int64 {
	t.Helper()
	var out [][2]int64
	for _, e := range env.Events(t, clientID, events.BalanceLow) {
		var d events.BalanceLowData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, [2]int64{d.Balance, d.Threshold})
	}
	return out
}

// TestBalanceLow: a debit that takes the balance from at or above the threshold to below it
// sends balance.low once; further debits below it send nothing until a credit lifts the balance
// back, which re-arms it. The client's own threshold wins over the default; 0 sends none.
func TestBalanceLow(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	env.Ledger.LowBalance = 3
	ctx := accountstest.Deadline(t)

	type step struct {
		debits int   // debits of 1, one after the other
		topUp  int64 // then credit
	}
	tests := []struct {
		name    string
		balance int64
		own     *int64
		steps   []step
		want    [][2]int64
	}{
		{name: "default threshold, one crossing", balance: 5, steps: []step{{debits: 5}}, want: [][2]int64{{2, 3}}},
		{name: "from exactly the threshold", balance: 3, steps: []step{{debits: 1}}, want: [][2]int64{{2, 3}}},
		{name: "already below: nothing", balance: 2, steps: []step{{debits: 2}}},
		{name: "above the threshold: nothing", balance: 10, steps: []step{{debits: 6}}},
		{name: "own threshold wins", balance: 10, own: ptr(int64(8)), steps: []step{{debits: 4}}, want: [][2]int64{{7, 8}}},
		{name: "own threshold 0: none", balance: 5, own: ptr(int64(0)), steps: []step{{debits: 5}}},
		{name: "a credit back above re-arms", balance: 4, steps: []step{{debits: 2, topUp: 3}, {debits: 3}}, want: [][2]int64{{2, 3}, {2, 3}}},
		{name: "a credit still below does not", balance: 4, steps: []step{{debits: 2, topUp: 0}, {debits: 1, topUp: 1}, {debits: 1}}, want: [][2]int64{{2, 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := env.Client(t, tt.balance)
			if tt.own != nil {
				if _, err := env.Clients.SetLowBalanceThreshold(ctx, c.Client.ID, tt.own); err != nil {
					t.Fatal(err)
				}
			}
			n := 0
			for _, s := range tt.steps {
				for range s.debits {
					n++
					if _, err := env.Ledger.Debit(ctx, billing.DebitRequest{ClientID: c.Client.ID, Kind: money.KindVerification, Reference: fmt.Sprint("v-", n)}); err != nil {
						t.Fatal(err)
					}
				}
				if s.topUp > 0 {
					if _, err := env.Ledger.TopUp(ctx, nil, billing.TopUpRequest{ClientID: c.Client.ID, Amount: s.topUp}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if got := lows(t, env, c.Client.ID); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("balance.low events (balance, threshold) %v, want %v", got, tt.want)
			}
		})
	}
}

// TestBalanceLowOnceUnderConcurrentDebits: many debits at once, group-committed in batches of
// any size, cross the threshold once, and the event tells the balance the crossing batch left.
func TestBalanceLowOnceUnderConcurrentDebits(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	env.Ledger.LowBalance = 50
	ctx := accountstest.Deadline(t)
	var mu sync.Mutex
	var batches, largest int
	env.Ledger.Observe = func(n int) { mu.Lock(); batches++; largest = max(largest, n); mu.Unlock() }
	cs := []string{env.Client(t, 100).Client.ID, env.Client(t, 100).Client.ID}

	var wg sync.WaitGroup
	errs := make(chan error, 200)
	start := make(chan struct{})
	for i := range 100 {
		for _, id := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := env.Ledger.Debit(ctx, billing.DebitRequest{ClientID: id, Kind: money.KindVerification, Reference: fmt.Sprint("v-", i)})
				if err != nil && !errors.Is(err, money.ErrInsufficientBalance) {
					errs <- err
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d batches, the largest of %d", batches, largest)
	for _, id := range cs {
		got := lows(t, env, id)
		if len(got) != 1 || got[0][1] != 50 || got[0][0] >= 50 {
			t.Fatalf("client %s: balance.low events %v, want one below 50", id, got)
		}
		// The balance it reports is one a committed batch left: a ledger row says so.
		var n int
		if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM accounts.ledger WHERE client_id = $1 AND balance_after = $2`, id, got[0][0]).Scan(&n); err != nil || n != 1 {
			t.Fatalf("no ledger row left the balance at %d (%v)", got[0][0], err)
		}
	}
}

// TestBalanceLowFollowsItsBatch: a batch whose commit fails after its event was written leaves
// neither its debits nor its event; the next crossing sends it.
func TestBalanceLowFollowsItsBatch(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	env.Ledger.LowBalance = 6
	ctx := accountstest.Deadline(t)
	c := env.Client(t, 10)
	if _, err := env.Pool.Exec(ctx, `
		CREATE FUNCTION accounts.doom() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN IF NEW.reference = 'doomed' THEN RAISE EXCEPTION 'doomed'; END IF; RETURN NULL; END $$;
		CREATE CONSTRAINT TRIGGER doom AFTER INSERT ON accounts.ledger
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION accounts.doom();`); err != nil {
		t.Fatal(err)
	}
	reveal := func(ref string) error {
		_, err := env.Ledger.Debit(ctx, billing.DebitRequest{ClientID: c.Client.ID, Kind: money.KindStuckPlusReveal, Reference: ref})
		return err
	}
	if err := reveal("doomed"); err == nil {
		t.Fatal("the doomed debit committed")
	}
	if got := lows(t, env, c.Client.ID); len(got) != 0 {
		t.Fatalf("balance.low %v of a batch that rolled back", got)
	}
	if err := reveal("kept"); err != nil {
		t.Fatal(err)
	}
	if got := lows(t, env, c.Client.ID); fmt.Sprint(got) != "[[5 6]]" {
		t.Fatalf("balance.low %v, want [[5 6]]", got)
	}
}

// TestExpiryEvents: balance.expiring once when the expiry comes within the notice,
// balance.expired once when it passes, each again only for a new expiry.
func TestExpiryEvents(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	const notice = 7 * 24 * time.Hour
	setExpiry := func(t *testing.T, id, in string) {
		t.Helper()
		if _, err := env.Pool.Exec(ctx, `UPDATE accounts.balances SET expires_at = now() + $2::interval WHERE client_id = $1`, id, in); err != nil {
			t.Fatal(err)
		}
	}
	run := func(t *testing.T) {
		t.Helper()
		for range 2 { // the second run finds nothing new
			if _, err := env.Ledger.NotifyExpiries(ctx, notice); err != nil {
				t.Fatal(err)
			}
		}
	}
	types := func(t *testing.T, id string) []string {
		var out []string
		for _, e := range env.Events(t, id, events.BalanceExpiring, events.BalanceExpired) {
			out = append(out, e.Type)
		}
		return out
	}
	never := env.Client(t, 10)
	far := env.Client(t, 10)
	setExpiry(t, far.Client.ID, "30 days")
	c := env.Client(t, 10)

	setExpiry(t, c.Client.ID, "3 days")
	run(t)
	if got := types(t, c.Client.ID); fmt.Sprint(got) != "[balance.expiring]" {
		t.Fatalf("within the notice: %v", got)
	}
	var raw struct {
		Balance   int64  `json:"balance"`
		ExpiresAt string `json:"expiresAt"`
	}
	if err := json.Unmarshal(env.Events(t, c.Client.ID, events.BalanceExpiring)[0].Data, &raw); err != nil || raw.Balance != 10 || raw.ExpiresAt == "" {
		t.Fatalf("data %+v (%v)", raw, err)
	}

	env.ExpireBalance(t, c.Client.ID)
	run(t)
	if got := types(t, c.Client.ID); fmt.Sprint(got) != "[balance.expiring balance.expired]" {
		t.Fatalf("after the expiry: %v", got)
	}

	// A top-up that moves the expiry re-arms both.
	if _, err := env.Ledger.TopUp(ctx, nil, billing.TopUpRequest{ClientID: c.Client.ID, Amount: 1, ExpiresAt: ptr(time.Now().Add(24 * time.Hour))}); err != nil {
		t.Fatal(err)
	}
	run(t)
	if got := types(t, c.Client.ID); fmt.Sprint(got) != "[balance.expiring balance.expired balance.expiring]" {
		t.Fatalf("after a new expiry: %v", got)
	}

	// First seen already expired: balance.expired alone, never a late notice.
	late := env.Client(t, 10)
	env.ExpireBalance(t, late.Client.ID)
	run(t)
	if got := types(t, late.Client.ID); fmt.Sprint(got) != "[balance.expired]" {
		t.Fatalf("first seen expired: %v", got)
	}
	for _, id := range []string{never.Client.ID, far.Client.ID} {
		if got := types(t, id); len(got) != 0 {
			t.Fatalf("client %s without a near expiry got %v", id, got)
		}
	}

	// A balance a debit holds is skipped and the others are notified; the next run takes it.
	held, free := env.Client(t, 10), env.Client(t, 10)
	setExpiry(t, held.Client.ID, "1 day")
	setExpiry(t, free.Client.ID, "1 day")
	holder, err := env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx) //nolint:errcheck // released below; this covers a failure
	if _, err := holder.Exec(ctx, `SELECT 1 FROM accounts.balances WHERE client_id = $1 FOR UPDATE`, held.Client.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Ledger.NotifyExpiries(ctx, notice); err != nil {
		t.Fatal(err)
	}
	if got, gotHeld := types(t, free.Client.ID), types(t, held.Client.ID); fmt.Sprint(got) != "[balance.expiring]" || len(gotHeld) != 0 {
		t.Fatalf("with one balance held: %v for the free one, %v for the held one", got, gotHeld)
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	run(t)
	if got := types(t, held.Client.ID); fmt.Sprint(got) != "[balance.expiring]" {
		t.Fatalf("once released: %v", got)
	}
}
