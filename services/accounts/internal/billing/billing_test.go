package billing_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mnvhq/mnv/services/accounts/internal/accountstest"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/accounts/internal/store"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/tenancy"
)

func debit(ref string) billing.DebitRequest {
	return billing.DebitRequest{Kind: money.KindVerification, Variant: "HEADER_ENRICHMENT", Reference: ref}
}

func TestDebit(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)

	tests := []struct {
		name        string
		balance     int64
		prepare     func(t *testing.T, clientID string)
		req         billing.DebitRequest
		wantErr     error
		wantInvalid bool
		wantCharged int64
		wantAfter   int64
	}{
		{name: "charges the default price", balance: 10, req: debit("v-1"), wantCharged: 1, wantAfter: 9},
		{name: "reveal costs 5", balance: 10, req: billing.DebitRequest{Kind: money.KindStuckPlusReveal, Reference: "r-1"}, wantCharged: 5, wantAfter: 5},
		{name: "a workflow's SMS step costs 2, whatever its country", balance: 10, req: billing.DebitRequest{Kind: money.KindVerificationStep, Variant: "SMS_OTP:GB", Reference: "workflow-step:s-1"}, wantCharged: 2, wantAfter: 8},
		{name: "last unit", balance: 1, req: debit("v-1"), wantCharged: 1, wantAfter: 0},
		{name: "insufficient", balance: 4, req: billing.DebitRequest{Kind: money.KindStuckPlusReveal, Reference: "r-1"}, wantErr: money.ErrInsufficientBalance},
		{name: "empty balance", balance: 0, req: debit("v-1"), wantErr: money.ErrInsufficientBalance},
		{name: "expired balance", balance: 10, prepare: func(t *testing.T, id string) { env.ExpireBalance(t, id) }, req: debit("v-1"), wantErr: money.ErrBalanceExpired},
		{name: "suspended client", balance: 10, prepare: func(t *testing.T, id string) {
			if _, err := env.Clients.SetStatus(ctx, id, principal.StatusSuspended); err != nil {
				t.Fatal(err)
			}
		}, req: debit("v-1"), wantErr: fault.ErrSuspended},
		{name: "client override of the variant", balance: 10, prepare: func(t *testing.T, id string) {
			amount := int64(3)
			if _, err := env.Ledger.SetPrice(ctx, id, money.KindVerification, "HEADER_ENRICHMENT", &amount); err != nil {
				t.Fatal(err)
			}
		}, req: debit("v-1"), wantCharged: 3, wantAfter: 7},
		{name: "free operation on an expired balance", balance: 0, prepare: func(t *testing.T, id string) {
			free := int64(0)
			if _, err := env.Ledger.SetPrice(ctx, id, money.KindVerification, "", &free); err != nil {
				t.Fatal(err)
			}
			env.ExpireBalance(t, id)
		}, req: debit("v-1"), wantCharged: 0, wantAfter: 0},
		{name: "kind that cannot be charged", balance: 10, req: billing.DebitRequest{Kind: money.KindTopUp, Reference: "x"}, wantInvalid: true},
		{name: "empty reference", balance: 10, req: billing.DebitRequest{Kind: money.KindVerification}, wantInvalid: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := env.Client(t, tt.balance)
			if tt.prepare != nil {
				tt.prepare(t, c.Client.ID)
			}
			tt.req.ClientID = c.Client.ID
			res, err := env.Ledger.Debit(ctx, tt.req)
			switch {
			case tt.wantInvalid:
				if fault.Find(err, fault.InvalidArgument) == nil {
					t.Fatalf("err = %v, want INVALID_ARGUMENT", err)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			default:
				if res.Charged != tt.wantCharged || res.Entry.BalanceAfter != tt.wantAfter || res.Replayed {
					t.Fatalf("charged %d after %d replayed %v, want %d after %d", res.Charged, res.Entry.BalanceAfter, res.Replayed, tt.wantCharged, tt.wantAfter)
				}
			}
			env.CheckLedger(t, c.Client.ID)
		})
	}
}

func TestDebitIsIdempotentByReference(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	c := env.Client(t, 10)

	first, err := env.Ledger.Debit(ctx, billing.DebitRequest{ClientID: c.Client.ID, Kind: money.KindVerification, Reference: "ver-1"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := env.Ledger.Debit(ctx, billing.DebitRequest{ClientID: c.Client.ID, Kind: money.KindVerification, Reference: "ver-1"})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || again.Entry.ID != first.Entry.ID || again.Charged != 1 || again.Entry.BalanceAfter != 9 {
		t.Fatalf("replay = %+v, want the first debit %+v replayed", again, first)
	}
	if u, err := uuid.Parse(first.Entry.ID); err != nil || u.Version() != 7 {
		t.Errorf("entry id %q is not a UUIDv7 (rowid): ledger ids must sort in the order they are written", first.Entry.ID)
	}
	if _, err := env.Ledger.Debit(ctx, billing.DebitRequest{ClientID: c.Client.ID, Kind: money.KindConnectEnrichment, Reference: "ver-1"}); !errors.Is(err, domain.ErrReferenceConflict) {
		t.Fatalf("same reference, other kind: err = %v, want ErrReferenceConflict", err)
	}
	if got := env.CheckLedger(t, c.Client.ID); got != 9 {
		t.Fatalf("balance %d, want 9", got)
	}
}

// TestConcurrentDebitsNeverOverdraw races 200 debits (20 of them retries of the same reference)
// for a balance of 100: exactly 100 distinct debits succeed, the balance ends at 0 and equals
// the ledger sum.
func TestConcurrentDebitsNeverOverdraw(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	c := env.Client(t, 100)
	var mu2 sync.Mutex
	var batches, largest int
	env.Ledger.Observe = func(n int) { mu2.Lock(); batches++; largest = max(largest, n); mu2.Unlock() }

	const n = 220
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		succeeded = map[string]string{} // reference -> entry id
		short     int
		failures  []error
	)
	start := make(chan struct{})
	for i := range n {
		ref := fmt.Sprintf("ver-%d", i)
		if i >= 200 {
			ref = fmt.Sprintf("ver-%d", i-200) // a retry racing its original
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := env.Ledger.Debit(ctx, billing.DebitRequest{ClientID: c.Client.ID, Kind: money.KindVerification, Reference: ref})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, money.ErrInsufficientBalance):
				short++
			case err != nil:
				failures = append(failures, err)
			default:
				if prev, ok := succeeded[ref]; ok && prev != res.Entry.ID {
					failures = append(failures, fmt.Errorf("reference %s charged twice: %s and %s", ref, prev, res.Entry.ID))
				}
				succeeded[ref] = res.Entry.ID
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("unexpected errors: %v", failures)
	}
	mu2.Lock()
	t.Logf("%d debits in %d batches, the largest of %d", n, batches, largest)
	mu2.Unlock()
	if len(succeeded) != 100 {
		t.Fatalf("%d distinct debits succeeded, want exactly 100", len(succeeded))
	}
	if got := env.CheckLedger(t, c.Client.ID); got != 0 {
		t.Fatalf("final balance %d, want 0", got)
	}
	entries, total, err := store.New(env.Pool).ListLedger(ctx, c.Client.ID, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	if total != 101 { // the initial top-up and 100 debits
		t.Fatalf("ledger has %d rows, want 101", total)
	}
	// Every row's balance_after is its predecessor's minus its own amount: no gap, no overlap.
	for i := len(entries) - 2; i >= 0; i-- {
		if entries[i].BalanceAfter != entries[i+1].BalanceAfter+entries[i].Amount {
			t.Fatalf("ledger row %d: balance_after %d does not follow %d%+d", i, entries[i].BalanceAfter, entries[i+1].BalanceAfter, entries[i].Amount)
		}
	}
}

// TestConcurrentDebitsAcrossClients: debits of 20 clients share batches; each client's balance
// of 5 takes exactly 5 of its 10 debits, whether a batch is written in one statement per step
// or one per client.
func TestConcurrentDebitsAcrossClients(t *testing.T) {
	for _, spread := range tenancy.Spreads {
		t.Run(spread.String(), func(t *testing.T) { testConcurrentDebitsAcrossClients(t, spread) })
	}
}

func testConcurrentDebitsAcrossClients(t *testing.T, spread tenancy.Spread) {
	env := accountstest.NewSpread(t, billing.DefaultPrices(), spread)
	ctx := accountstest.Deadline(t)
	const clients, each, balance = 20, 10, 5
	ids := make([]string, clients)
	for i := range ids {
		ids[i] = env.Client(t, balance).Client.ID
	}
	var (
		batchMu sync.Mutex
		largest int
	)
	env.Ledger.Observe = func(n int) { batchMu.Lock(); largest = max(largest, n); batchMu.Unlock() }
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		ok   = map[string]int{}
		errs []error
	)
	start := make(chan struct{})
	for i := range clients * each {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			id := ids[i%clients]
			_, err := env.Ledger.Debit(ctx, billing.DebitRequest{ClientID: id, Kind: money.KindVerification, Reference: fmt.Sprint("v-", i)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok[id]++
			case !errors.Is(err, money.ErrInsufficientBalance):
				errs = append(errs, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	batchMu.Lock()
	t.Logf("the largest batch held %d debits", largest)
	batchMu.Unlock()
	for _, id := range ids {
		if ok[id] != balance {
			t.Errorf("client %s: %d debits succeeded, want %d", id, ok[id], balance)
		}
		if got := env.CheckLedger(t, id); got != 0 {
			t.Errorf("client %s: balance %d, want 0", id, got)
		}
	}
	// A debit of a client that does not exist fails alone, not its batch.
	if _, err := env.Ledger.Debit(ctx, billing.DebitRequest{ClientID: "00000000-0000-4000-8000-000000000000", Kind: money.KindVerification, Reference: "x"}); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("unknown client: %v", err)
	}
}

func TestRefund(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	c := env.Client(t, 10)
	if _, err := env.Ledger.Debit(ctx, billing.DebitRequest{ClientID: c.Client.ID, Kind: money.KindStuckPlusReveal, Reference: "rev-1"}); err != nil {
		t.Fatal(err)
	}
	first, err := env.Ledger.Refund(ctx, c.Client.ID, "rev-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.Refunded != 5 || first.Entry.BalanceAfter != 10 || first.Replayed {
		t.Fatalf("refund = %+v, want 5 back to 10", first)
	}
	again, err := env.Ledger.Refund(ctx, c.Client.ID, "rev-1", nil)
	if err != nil || !again.Replayed || again.Entry.ID != first.Entry.ID {
		t.Fatalf("second refund = %+v, %v; want the first replayed", again, err)
	}
	if _, err := env.Ledger.Refund(ctx, c.Client.ID, "no-such-debit", nil); !errors.Is(err, money.ErrNothingToRefund) {
		t.Fatalf("refund of nothing: err = %v", err)
	}
	if _, err := env.Ledger.Refund(ctx, c.Client.ID, "initial-balance", nil); !errors.Is(err, money.ErrNothingToRefund) {
		t.Fatalf("refund of a top-up: err = %v", err)
	}
	other := env.Client(t, 10)
	if _, err := env.Ledger.Refund(ctx, other.Client.ID, "rev-1", nil); !errors.Is(err, money.ErrNothingToRefund) {
		t.Fatalf("refund of another client's debit: err = %v", err)
	}
	if got := env.CheckLedger(t, c.Client.ID); got != 10 {
		t.Fatalf("balance %d, want 10", got)
	}
}

func TestTopUp(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	c := env.Client(t, 0)
	env.ExpireBalance(t, c.Client.ID)

	res, err := env.Ledger.TopUp(ctx, nil, billing.TopUpRequest{ClientID: c.Client.ID, Amount: 50, Reference: "invoice-7"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Entry.BalanceAfter != 50 || res.Entry.Kind != money.KindTopUp {
		t.Fatalf("top-up entry %+v", res.Entry)
	}
	if again, err := env.Ledger.TopUp(ctx, nil, billing.TopUpRequest{ClientID: c.Client.ID, Amount: 50, Reference: "invoice-7"}); err != nil || !again.Replayed {
		t.Fatalf("repeat top-up = %+v, %v; want replayed", again, err)
	}
	// Credit alone does not revive an expired balance: the expiry must move too.
	if _, err := env.Ledger.Debit(ctx, billing.DebitRequest{ClientID: c.Client.ID, Kind: money.KindVerification, Reference: "v"}); !errors.Is(err, money.ErrBalanceExpired) {
		t.Fatalf("debit on expired balance: err = %v", err)
	}
	for _, bad := range []billing.TopUpRequest{
		{ClientID: c.Client.ID, Amount: -1},
		{ClientID: c.Client.ID, Amount: 0},
		{ClientID: c.Client.ID, Amount: billing.MaxAmount + 1},
	} {
		if _, err := env.Ledger.TopUp(ctx, nil, bad); fault.Find(err, fault.InvalidArgument) == nil {
			t.Errorf("top-up %+v: err = %v, want invalid", bad, err)
		}
	}
	if got := env.CheckLedger(t, c.Client.ID); got != 50 {
		t.Fatalf("balance %d, want 50", got)
	}
}

// TestLedgerIsAppendOnly: the ledger's owner (the role the service runs as, which migrated it)
// may read and append, and is refused UPDATE, DELETE and TRUNCATE (migration 010 revoked them:
// privileges, since a table distributed by client runs no trigger). A superuser bypasses
// privileges, so the statements run as an ordinary role made the ledger's owner, the tests'
// own connections being a superuser's.
func TestLedgerIsAppendOnly(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	c := env.Client(t, 5)
	ctx := accountstest.Deadline(t)
	owner := ledgerOwner(t, env)
	asOwner := func(sql string, args ...any) error {
		return pg.InTx(ctx, env.Pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL ROLE `+owner); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, sql, args...)
			return err
		})
	}
	for _, sql := range []string{
		`SELECT count(*) FROM accounts.ledger WHERE client_id = $1`,
		`INSERT INTO accounts.ledger (id, client_id, kind, amount, balance_after, reference)
			VALUES (gen_random_uuid(), $1, 'ADJUSTMENT', 0, 5, 'appended by the owner')`,
	} {
		if err := asOwner(sql, c.Client.ID); err != nil {
			t.Errorf("%s: %v, want the owner to read and append", sql, err)
		}
	}
	for _, sql := range []string{
		`UPDATE accounts.ledger SET amount = 1000 WHERE client_id = $1`,
		`DELETE FROM accounts.ledger WHERE client_id = $1`,
		`TRUNCATE accounts.ledger`,
	} {
		args := []any{c.Client.ID}
		if !strings.Contains(sql, "$1") {
			args = nil
		}
		var pgErr *pgconn.PgError
		if err := asOwner(sql, args...); !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("%s: %v, want insufficient_privilege (42501) on the append-only ledger", sql, err)
		}
	}
	env.CheckLedger(t, c.Client.ID)
	if _, err := env.Pool.Exec(context.Background(), `UPDATE accounts.balances SET balance = -1 WHERE client_id = $1`, c.Client.ID); err == nil {
		t.Error("a negative balance was stored")
	}
}

// ledgerOwner makes a role of the test's own (roles belong to the server, not the test's
// database) the owner of the ledger, as the service's role is, and returns its name; it is
// dropped when the test ends.
func ledgerOwner(t *testing.T, env *accountstest.Env) string {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	role := "mnvtest_ledger_owner_" + hex.EncodeToString(b)
	for _, sql := range []string{
		`CREATE ROLE ` + role + ` NOLOGIN`,
		`GRANT USAGE ON SCHEMA accounts TO ` + role,
		`ALTER TABLE accounts.ledger OWNER TO ` + role,
	} {
		if _, err := env.Pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	t.Cleanup(func() {
		for _, sql := range []string{`REASSIGN OWNED BY ` + role + ` TO CURRENT_USER`, `DROP OWNED BY ` + role, `DROP ROLE ` + role} {
			if _, err := env.Pool.Exec(ctx, sql); err != nil {
				t.Errorf("%s: %v", sql, err)
			}
		}
	})
	return role
}

// TestPriceOverridesByVariant: a client's override beats a configured price at every level, a
// variant "A:B" falls back to "A", then to the kind.
func TestPriceOverridesByVariant(t *testing.T) {
	p, err := billing.ParsePrices("VERIFICATION_STEP/SMS_OTP:GB=6,VERIFICATION_STEP/SMS_OTP=4")
	if err != nil {
		t.Fatal(err)
	}
	over := func(variant string, amount int64) domain.Price {
		return domain.Price{Kind: money.KindVerificationStep, Variant: variant, Amount: amount}
	}
	tests := []struct {
		name      string
		overrides []domain.Price
		variant   string
		want      int64
	}{
		{"configured, by country", nil, "SMS_OTP:GB", 6},
		{"client's kind beats configured", []domain.Price{over("", 1)}, "SMS_OTP:GB", 1},
		{"client's channel beats its kind", []domain.Price{over("", 1), over("SMS_OTP", 3)}, "SMS_OTP:GB", 3},
		{"client's country beats its channel", []domain.Price{over("SMS_OTP", 3), over("SMS_OTP:GB", 9)}, "SMS_OTP:GB", 9},
		{"another country's override does not apply", []domain.Price{over("SMS_OTP:AE", 9)}, "SMS_OTP:GB", 6},
		{"another kind's override does not apply", []domain.Price{{Kind: money.KindVerification, Amount: 7}}, "SMS_OTP:FR", 4},
	}
	for _, tt := range tests {
		if got := p.For(money.KindVerificationStep, tt.variant, tt.overrides); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestParsePrices(t *testing.T) {
	tests := []struct {
		spec    string
		kind    money.Kind
		variant string
		want    int64
		wantErr bool
	}{
		{spec: "", kind: money.KindVerification, want: 1},
		{spec: "", kind: money.KindStuckPlusReveal, want: 5},
		{spec: "VERIFICATION=2", kind: money.KindVerification, variant: "NETWORK_API", want: 2},
		{spec: "VERIFICATION=2,VERIFICATION/NETWORK_API=3", kind: money.KindVerification, variant: "NETWORK_API", want: 3},
		{spec: "STUCK_PLUS_REVEAL=0", kind: money.KindStuckPlusReveal, want: 0},
		{spec: "", kind: money.KindVerificationStep, variant: "SMS_OTP:GB", want: 2},
		{spec: "VERIFICATION_STEP/SMS_OTP=4", kind: money.KindVerificationStep, variant: "SMS_OTP:GB", want: 4},
		{spec: "VERIFICATION_STEP/SMS_OTP=4,VERIFICATION_STEP/SMS_OTP:GB=6", kind: money.KindVerificationStep, variant: "SMS_OTP:GB", want: 6},
		{spec: "VERIFICATION_STEP/SMS_OTP=4,VERIFICATION_STEP/SMS_OTP:GB=6", kind: money.KindVerificationStep, variant: "SMS_OTP:AE", want: 4},
		{spec: "VERIFICATION_STEP/SMS_OTP:GB=6", kind: money.KindVerificationStep, variant: "SMS_OTP", want: 2},
		{spec: "TOP_UP=1", wantErr: true},
		{spec: "VERIFICATION=-1", wantErr: true},
		{spec: "VERIFICATION", wantErr: true},
	}
	for _, tt := range tests {
		p, err := billing.ParsePrices(tt.spec)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParsePrices(%q) err = %v", tt.spec, err)
			continue
		}
		if err == nil {
			if got := p.For(tt.kind, tt.variant, nil); got != tt.want {
				t.Errorf("ParsePrices(%q).For(%s/%s) = %d, want %d", tt.spec, tt.kind, tt.variant, got, tt.want)
			}
		}
	}
}

// TestRetriedDebitIsTheChargeWhateverNow: a debit whose caller gave up before it committed is
// retried after the balance was spent, the client suspended or the balance expired. The retry
// is the charge that happened (replayed, the same entry), never a refusal: a refusal would make
// the caller release what it charged for and charge it again later.
func TestRetriedDebitIsTheChargeWhateverNow(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	tests := []struct {
		name        string
		after       func(t *testing.T, clientID string)
		wantBalance int64
		wantNewErr  error // what a new debit meets now
	}{
		{name: "balance spent since", wantBalance: 0, wantNewErr: money.ErrInsufficientBalance, after: func(t *testing.T, id string) {
			for _, ref := range []string{"spend-1", "spend-2"} {
				if _, err := env.Ledger.Debit(ctx, billing.DebitRequest{ClientID: id, Kind: money.KindVerification, Reference: ref}); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{name: "client suspended since", wantBalance: 2, wantNewErr: fault.ErrSuspended, after: func(t *testing.T, id string) {
			if _, err := env.Clients.SetStatus(ctx, id, principal.StatusSuspended); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "balance expired since", wantBalance: 2, wantNewErr: money.ErrBalanceExpired, after: func(t *testing.T, id string) {
			env.ExpireBalance(t, id)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := env.Client(t, 3).Client.ID
			lost := billing.DebitRequest{ClientID: id, Kind: money.KindVerification, Variant: "HEADER_ENRICHMENT", Reference: "verification:lost"}
			first := commitUnheard(t, env, lost)
			tt.after(t, id)

			again, err := env.Ledger.Debit(ctx, lost)
			if err != nil {
				t.Fatalf("retry of a debit that committed: %v, want the charge replayed", err)
			}
			if !again.Replayed || again.Entry.ID != first.ID || again.Charged != 1 || again.Entry.BalanceAfter != 2 {
				t.Fatalf("retry = %+v, want entry %s (charged 1, balance after 2) replayed", again, first.ID)
			}
			// Retries racing a new debit, likely in one batch: the retries replay, the new debit
			// is refused.
			refs := []string{"verification:lost", "verification:lost", "verification:new"}
			errs := make([]error, len(refs))
			var wg sync.WaitGroup
			for i, ref := range refs {
				wg.Go(func() {
					req := lost
					req.Reference = ref
					res, err := env.Ledger.Debit(ctx, req)
					if err == nil && (!res.Replayed || res.Entry.ID != first.ID) {
						err = fmt.Errorf("%s = %+v, want entry %s replayed", ref, res, first.ID)
					}
					errs[i] = err
				})
			}
			wg.Wait()
			if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], tt.wantNewErr) {
				t.Fatalf("concurrent debits: %v; want two replays and %v", errs, tt.wantNewErr)
			}
			if got := env.CheckLedger(t, id); got != tt.wantBalance {
				t.Fatalf("balance %d, want %d", got, tt.wantBalance)
			}
		})
	}
}

// commitUnheard makes req commit while its caller has given up: another transaction holds the
// client's balance row past the caller's deadline, then lets the batch through. It returns the
// ledger entry the batch wrote.
func commitUnheard(t *testing.T, env *accountstest.Env, req billing.DebitRequest) domain.LedgerEntry {
	t.Helper()
	ctx := accountstest.Deadline(t)
	holder, err := env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx) //nolint:errcheck // released below; this covers a failure
	if _, err := holder.Exec(ctx, `SELECT 1 FROM accounts.balances WHERE client_id = $1 FOR UPDATE`, req.ClientID); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := env.Ledger.Debit(short, req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("debit behind a held balance row: %v, want the caller's deadline", err)
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		e, err := store.New(env.Pool).LedgerByReference(ctx, req.ClientID, req.Reference)
		if err == nil {
			return e
		}
		if !errors.Is(err, fault.ErrNotFound) {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("the debit whose caller gave up never committed")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
