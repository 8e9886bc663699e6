package billing_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// The tests in this file hold the ledger's rules against an in-memory fake of its ports; the
// same rules are proven against PostgreSQL in billing_test.go.

// fakeStore is billing.Store and billing.Tx in memory. InTx works on a copy and keeps it only
// when fn returns nil, as a transaction would; AppendLedger refuses a reference already used
// and a balance below zero, as the schema does.
type fakeStore struct {
	now      time.Time
	balances map[string]domain.BalanceState
	prices   map[string][]domain.Price
	ledger   []domain.LedgerEntry
	appends  int // entries written, committed or not
	events   []events.Event
	emits    int // Emit calls, committed or not: each would be a round trip
}

func newFake() *fakeStore {
	return &fakeStore{
		now:      time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		balances: map[string]domain.BalanceState{},
		prices:   map[string][]domain.Price{},
	}
}

func (f *fakeStore) client(id string, balance int64) {
	f.balances[id] = domain.BalanceState{Balance: balance, Status: principal.StatusActive}
}

func (f *fakeStore) InTx(ctx context.Context, fn func(ctx context.Context, st billing.Store) error) error {
	saved := *f
	saved.balances = maps.Clone(f.balances)
	saved.prices = maps.Clone(f.prices)
	saved.ledger = slices.Clone(f.ledger)
	saved.events = slices.Clone(f.events)
	if err := fn(ctx, f); err != nil {
		appends := f.appends
		*f = saved
		f.appends = appends
		return err
	}
	return nil
}

func (f *fakeStore) Emit(_ context.Context, evs ...events.Event) error {
	f.emits++
	f.events = append(f.events, evs...)
	return nil
}

// The expiry job is proven against PostgreSQL alone (billing_test.go): its rule is the query.
func (f *fakeStore) ExpiriesDue(context.Context, time.Duration, string, int) ([]domain.ExpiryDue, string, error) {
	return nil, "", errors.New("fake: no expiries")
}

func (f *fakeStore) SetExpiryNotified(context.Context, []domain.ExpiryNotified) error {
	return errors.New("fake: no expiries")
}

func (f *fakeStore) state(id string) (domain.BalanceState, bool) {
	s, ok := f.balances[id]
	s.Now = f.now
	return s, ok
}

func (f *fakeStore) LockBalance(_ context.Context, clientID string) (domain.BalanceState, error) {
	s, ok := f.state(clientID)
	if !ok {
		return s, fault.ErrNotFound
	}
	return s, nil
}

func (f *fakeStore) LockForDebits(_ context.Context, clientIDs []string, lookup [][2]string) (domain.DebitSnapshot, error) {
	snap := domain.DebitSnapshot{Balances: map[string]domain.BalanceState{}, Overrides: map[string][]domain.Price{}, Existing: map[string]domain.LedgerEntry{}}
	for _, id := range clientIDs {
		if s, ok := f.state(id); ok {
			snap.Balances[id] = s
			snap.Overrides[id] = f.prices[id]
		}
	}
	if len(lookup) > 0 {
		snap.Existing, _ = f.LedgerByReferences(context.Background(), lookup)
	}
	return snap, nil
}

func (f *fakeStore) LedgerByReferences(_ context.Context, refs [][2]string) (map[string]domain.LedgerEntry, error) {
	out := map[string]domain.LedgerEntry{}
	for _, r := range refs {
		if e, err := f.LedgerByReference(context.Background(), r[0], r[1]); err == nil {
			out[domain.LedgerKey(r[0], r[1])] = e
		}
	}
	return out, nil
}

func (f *fakeStore) LedgerByReference(_ context.Context, clientID, reference string) (domain.LedgerEntry, error) {
	for _, e := range f.ledger {
		if e.ClientID == clientID && e.Reference == reference {
			return e, nil
		}
	}
	return domain.LedgerEntry{}, fault.ErrNotFound
}

func (f *fakeStore) AppendLedger(_ context.Context, entries []domain.LedgerEntry) ([]domain.LedgerEntry, error) {
	out := make([]domain.LedgerEntry, 0, len(entries))
	for _, e := range entries {
		if _, err := f.LedgerByReference(context.Background(), e.ClientID, e.Reference); err == nil {
			return nil, domain.ErrReferenceTaken
		}
		if e.BalanceAfter < 0 {
			return nil, fmt.Errorf("balance of %s below zero: %d", e.ClientID, e.BalanceAfter)
		}
		s := f.balances[e.ClientID]
		if s.Balance+e.Amount != e.BalanceAfter {
			return nil, fmt.Errorf("entry %s: balance %d + %d != balance_after %d", e.Reference, s.Balance, e.Amount, e.BalanceAfter)
		}
		s.Balance = e.BalanceAfter
		f.balances[e.ClientID] = s
		e.ID, e.CreatedAt = fmt.Sprintf("e%d", len(f.ledger)+1), f.now
		f.ledger = append(f.ledger, e)
		f.appends++
		out = append(out, e)
	}
	return out, nil
}

func (f *fakeStore) SetExpiry(_ context.Context, clientID string, expiresAt time.Time) error {
	s := f.balances[clientID]
	s.ExpiresAt = &expiresAt
	f.balances[clientID] = s
	return nil
}

func (f *fakeStore) ListLedger(_ context.Context, clientID string, limit, offset int64) ([]domain.LedgerEntry, int64, error) {
	return nil, 0, errors.New("not used")
}

func (f *fakeStore) PriceOverrides(_ context.Context, clientID string) ([]domain.Price, error) {
	return f.prices[clientID], nil
}

func (f *fakeStore) SetPriceOverride(_ context.Context, clientID string, kind money.Kind, variant string, amount *int64) error {
	if _, ok := f.balances[clientID]; !ok {
		return fault.ErrNotFound
	}
	p := slices.DeleteFunc(f.prices[clientID], func(p domain.Price) bool { return p.Kind == kind && p.Variant == variant })
	if amount != nil {
		p = append(p, domain.Price{Kind: kind, Variant: variant, Amount: *amount, Overridden: true})
	}
	f.prices[clientID] = p
	return nil
}

func newFakeLedger(f *fakeStore) *billing.Ledger {
	return billing.NewLedger(f, f, billing.DefaultPrices())
}

func TestDebitRules(t *testing.T) {
	const client = "c1"
	past := func(f *fakeStore) {
		at := f.now.Add(-time.Second)
		s := f.balances[client]
		s.ExpiresAt = &at
		f.balances[client] = s
	}
	override := func(kind money.Kind, variant string, amount int64) func(*fakeStore) {
		return func(f *fakeStore) {
			f.prices[client] = append(f.prices[client], domain.Price{Kind: kind, Variant: variant, Amount: amount, Overridden: true})
		}
	}
	tests := []struct {
		name        string
		balance     int64
		prepare     func(*fakeStore)
		req         billing.DebitRequest
		wantErr     error
		wantInvalid string
		wantCharged int64
	}{
		{name: "charges the default price", balance: 10, req: debit("v-1"), wantCharged: 1},
		{name: "takes the last unit", balance: 5, req: billing.DebitRequest{Kind: money.KindStuckPlusReveal, Reference: "r"}, wantCharged: 5},
		{name: "refused: balance too low", balance: 4, req: billing.DebitRequest{Kind: money.KindStuckPlusReveal, Reference: "r"}, wantErr: money.ErrInsufficientBalance},
		{name: "refused: empty balance", balance: 0, req: debit("v-1"), wantErr: money.ErrInsufficientBalance},
		{name: "refused: expired balance", balance: 10, prepare: past, req: debit("v-1"), wantErr: money.ErrBalanceExpired},
		{name: "refused: expiring right now", balance: 10, prepare: func(f *fakeStore) {
			s := f.balances[client]
			s.ExpiresAt = &f.now
			f.balances[client] = s
		}, req: debit("v-1"), wantErr: money.ErrBalanceExpired},
		{name: "refused: suspended client", balance: 10, prepare: func(f *fakeStore) {
			s := f.balances[client]
			s.Status = principal.StatusSuspended
			f.balances[client] = s
		}, req: debit("v-1"), wantErr: fault.ErrSuspended},
		{name: "refused: suspended even when free", balance: 10, prepare: func(f *fakeStore) {
			override(money.KindVerification, "", 0)(f)
			s := f.balances[client]
			s.Status = principal.StatusSuspended
			f.balances[client] = s
		}, req: debit("v-1"), wantErr: fault.ErrSuspended},
		{name: "unknown client", balance: -1, req: debit("v-1"), wantErr: fault.ErrNotFound},
		{name: "override of the variant", balance: 10, prepare: override(money.KindVerification, "HEADER_ENRICHMENT", 3), req: debit("v-1"), wantCharged: 3},
		{name: "override of the kind", balance: 10, prepare: override(money.KindVerification, "", 4), req: debit("v-1"), wantCharged: 4},
		{name: "override of the variant wins over the kind's", balance: 10, prepare: func(f *fakeStore) {
			override(money.KindVerification, "", 4)(f)
			override(money.KindVerification, "HEADER_ENRICHMENT", 2)(f)
		}, req: debit("v-1"), wantCharged: 2},
		{name: "another variant's override does not apply", balance: 10, prepare: override(money.KindVerification, "OTHER", 7), req: debit("v-1"), wantCharged: 1},
		{name: "override above the balance is refused", balance: 2, prepare: override(money.KindVerification, "", 3), req: debit("v-1"), wantErr: money.ErrInsufficientBalance},
		{name: "free operation needs no valid balance", balance: 0, prepare: func(f *fakeStore) {
			override(money.KindVerification, "", 0)(f)
			past(f)
		}, req: debit("v-1"), wantCharged: 0},
		{name: "invalid: not a chargeable kind", balance: 10, req: billing.DebitRequest{Kind: money.KindTopUp, Reference: "x"}, wantInvalid: "kind"},
		{name: "invalid: empty reference", balance: 10, req: debit(""), wantInvalid: "reference"},
		{name: "invalid: control character in reference", balance: 10, req: debit("a\nb"), wantInvalid: "reference"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			if tt.balance >= 0 {
				f.client(client, tt.balance)
			}
			if tt.prepare != nil {
				tt.prepare(f)
			}
			tt.req.ClientID = client
			res, err := newFakeLedger(f).Debit(context.Background(), tt.req)
			switch {
			case tt.wantInvalid != "":
				if e := fault.Find(err, fault.InvalidArgument); e == nil || e.Field != tt.wantInvalid {
					t.Fatalf("Debit = %v, want invalid %s", err, tt.wantInvalid)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Debit = %+v, %v; want %v", res, err, tt.wantErr)
				}
			case err != nil:
				t.Fatalf("Debit: %v", err)
			}
			if err != nil {
				if len(f.ledger) != 0 || f.balances[client].Balance != max(tt.balance, 0) {
					t.Errorf("a refused debit changed the books: ledger %v, balance %d", f.ledger, f.balances[client].Balance)
				}
				return
			}
			if res.Charged != tt.wantCharged || res.Replayed {
				t.Errorf("charged %d (replayed %v), want %d", res.Charged, res.Replayed, tt.wantCharged)
			}
			if got := f.balances[client].Balance; got != tt.balance-tt.wantCharged || res.Entry.BalanceAfter != got {
				t.Errorf("balance %d, entry's balance_after %d, want %d", got, res.Entry.BalanceAfter, tt.balance-tt.wantCharged)
			}
			if len(f.ledger) != 1 || f.ledger[0].Amount != -tt.wantCharged || f.ledger[0].Reference != tt.req.Reference {
				t.Errorf("ledger %+v, want one entry of %d", f.ledger, -tt.wantCharged)
			}
		})
	}
}

func TestDebitReplay(t *testing.T) {
	const client = "c1"
	ctx := context.Background()
	tests := []struct {
		name string
		// between runs after the first debit, before the repeat.
		between     func(*fakeStore)
		again       billing.DebitRequest
		wantErr     error
		wantBalance int64
	}{
		{name: "same reference replays the first entry", again: debit("v-1"), wantBalance: 9},
		{name: "replays after the balance was spent", between: func(f *fakeStore) {
			s := f.balances[client]
			s.Balance = 0
			f.balances[client] = s
		}, again: debit("v-1"), wantBalance: 0},
		{name: "replays after the client was suspended", between: func(f *fakeStore) {
			s := f.balances[client]
			s.Status = principal.StatusSuspended
			f.balances[client] = s
		}, again: debit("v-1"), wantBalance: 9},
		{name: "replays after the balance expired", between: func(f *fakeStore) {
			at := f.now.Add(-time.Hour)
			s := f.balances[client]
			s.ExpiresAt = &at
			f.balances[client] = s
		}, again: debit("v-1"), wantBalance: 9},
		{name: "same reference, another kind: conflict", again: billing.DebitRequest{Kind: money.KindStuckPlusReveal, Reference: "v-1"}, wantErr: domain.ErrReferenceConflict, wantBalance: 9},
		{name: "same reference, another variant: conflict", again: billing.DebitRequest{Kind: money.KindVerification, Variant: "OTHER", Reference: "v-1"}, wantErr: domain.ErrReferenceConflict, wantBalance: 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.client(client, 10)
			l := newFakeLedger(f)
			req := debit("v-1")
			req.ClientID = client
			first, err := l.Debit(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if tt.between != nil {
				tt.between(f)
			}
			tt.again.ClientID = client
			res, err := l.Debit(ctx, tt.again)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("repeat = %+v, %v; want %v", res, err, tt.wantErr)
				}
			} else {
				if err != nil {
					t.Fatalf("repeat: %v", err)
				}
				if !res.Replayed || res.Entry.ID != first.Entry.ID || res.Charged != first.Charged {
					t.Errorf("repeat = %+v, want a replay of %+v", res, first)
				}
			}
			if len(f.ledger) != 1 {
				t.Errorf("ledger has %d entries, want 1: charged once", len(f.ledger))
			}
			if got := f.balances[client].Balance; got != tt.wantBalance {
				t.Errorf("balance %d, want %d", got, tt.wantBalance)
			}
		})
	}
}

func TestRefundRules(t *testing.T) {
	const client = "c1"
	ctx := context.Background()
	tests := []struct {
		name    string
		prepare func(t *testing.T, l *billing.Ledger)
		ref     string
		times   int
		wantErr error
		// wantBalance is after the refunds; the client starts with 10 and prepare may spend.
		wantBalance int64
		wantEntries int
	}{
		{name: "unknown reference", ref: "nope", times: 1, wantErr: money.ErrNothingToRefund, wantBalance: 10},
		{name: "gives back a debit", prepare: spend("v-1"), ref: "v-1", times: 1, wantBalance: 10, wantEntries: 2},
		{name: "twice gives back once", prepare: spend("v-1"), ref: "v-1", times: 2, wantBalance: 10, wantEntries: 2},
		{name: "a top-up is not refundable", prepare: func(t *testing.T, l *billing.Ledger) {
			if _, err := l.TopUp(ctx, nil, billing.TopUpRequest{ClientID: client, Amount: 5, Reference: "inv-1"}); err != nil {
				t.Fatal(err)
			}
		}, ref: "inv-1", times: 1, wantErr: money.ErrNothingToRefund, wantBalance: 15, wantEntries: 1},
		{name: "a refund is not refundable", prepare: func(t *testing.T, l *billing.Ledger) {
			spend("v-1")(t, l)
			if _, err := l.Refund(ctx, client, "v-1", nil); err != nil {
				t.Fatal(err)
			}
		}, ref: "refund:v-1", times: 1, wantErr: money.ErrNothingToRefund, wantBalance: 10, wantEntries: 2},
		{name: "unknown client", ref: "v-1", times: 1, wantErr: fault.ErrNotFound, wantBalance: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.client(client, 10)
			l := newFakeLedger(f)
			if tt.prepare != nil {
				tt.prepare(t, l)
			}
			id := client
			if tt.name == "unknown client" {
				id = "c2"
			}
			var first billing.RefundResult
			for i := range tt.times {
				res, err := l.Refund(ctx, id, tt.ref, nil)
				if tt.wantErr != nil {
					if !errors.Is(err, tt.wantErr) {
						t.Fatalf("Refund = %+v, %v; want %v", res, err, tt.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatalf("Refund %d: %v", i+1, err)
				}
				if i == 0 {
					first = res
					if res.Replayed || res.Refunded != 1 || res.Entry.Kind != money.KindRefund {
						t.Errorf("first refund = %+v, want 1 back", res)
					}
				} else if !res.Replayed || res.Entry.ID != first.Entry.ID || res.Refunded != first.Refunded {
					t.Errorf("refund %d = %+v, want a replay of %+v", i+1, res, first)
				}
			}
			if got := f.balances[client].Balance; got != tt.wantBalance {
				t.Errorf("balance %d, want %d", got, tt.wantBalance)
			}
			if len(f.ledger) != tt.wantEntries {
				t.Errorf("ledger has %d entries, want %d", len(f.ledger), tt.wantEntries)
			}
		})
	}
}

// spend debits the client c1 one verification with reference ref.
func spend(ref string) func(t *testing.T, l *billing.Ledger) {
	return func(t *testing.T, l *billing.Ledger) {
		t.Helper()
		req := debit(ref)
		req.ClientID = "c1"
		if _, err := l.Debit(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBalanceLowCostsNothingWithoutACrossing: the debit path is hot, so a batch that crosses
// no threshold must not touch the outbox at all; the one that crosses writes one event.
func TestBalanceLowCostsNothingWithoutACrossing(t *testing.T) {
	tests := []struct {
		name      string
		balance   int64
		own       *int64
		debits    int
		wantEmits int
	}{
		{name: "above the threshold", balance: 20, debits: 5},
		{name: "below it already", balance: 4, debits: 3},
		{name: "no threshold", balance: 20, own: new(int64), debits: 19},
		{name: "the crossing", balance: 12, debits: 3, wantEmits: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.client("c1", tt.balance)
			if tt.own != nil {
				s := f.balances["c1"]
				s.LowThreshold = tt.own
				f.balances["c1"] = s
			}
			l := billing.NewLedger(f, f, billing.DefaultPrices())
			l.LowBalance = 10
			for i := range tt.debits {
				req := debit(fmt.Sprint("v-", i))
				req.ClientID = "c1"
				if _, err := l.Debit(context.Background(), req); err != nil {
					t.Fatal(err)
				}
			}
			if f.emits != tt.wantEmits || len(f.events) != tt.wantEmits {
				t.Fatalf("%d Emit calls with %d events, want %d", f.emits, len(f.events), tt.wantEmits)
			}
		})
	}
}

// countedTx is a Tx that counts the transactions it runs.
type countedTx struct {
	billing.Tx
	n int
}

func (c *countedTx) InTx(ctx context.Context, fn func(ctx context.Context, st billing.Store) error) error {
	c.n++
	return c.Tx.InTx(ctx, fn)
}

// TestDebitBatchStore: debits commit through the batch store (its own pool in the app), and
// nothing else does.
func TestDebitBatchStore(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	f.client("c1", 10)
	main, batch := &countedTx{Tx: f}, &countedTx{Tx: f}
	l := billing.NewLedger(f, main, billing.DefaultPrices()).WithBatchStore(batch)
	req := func(ref string) billing.DebitRequest {
		r := debit(ref)
		r.ClientID = "c1"
		return r
	}
	if _, err := l.Debit(ctx, req("v-1")); err != nil {
		t.Fatal(err)
	}
	_, errs := l.DebitMany(ctx, []billing.DebitRequest{req("v-2"), req("v-3")})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if batch.n == 0 || main.n != 0 {
		t.Errorf("debits ran %d transactions on the batch store and %d on the main one; want some and none", batch.n, main.n)
	}
}
