package charge_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/platform/charge"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/money"
)

// ledger stands in for accounts: it charges 5 once per reference (a repeat is that charge,
// Replayed), refuses with refuse, or does not answer (away) with down. A debit that commits
// while its answer is lost is lost.
type ledger struct {
	mu        sync.Mutex
	refuse    error
	down      bool
	lost      bool // the next debit commits, and its answer is lost
	refundErr error
	charged   map[string]int64
	refunded  map[string]bool
	debits    []string
}

var errAway = money.Unknown("debit", errors.New("connection refused"), true)

func (l *ledger) Debit(_ context.Context, c money.Charge) (money.Charged, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.debits = append(l.debits, c.Reference)
	if l.down {
		return money.Charged{}, errAway
	}
	if amount, ok := l.charged[c.Reference]; ok {
		return money.Charged{Amount: amount, BalanceAfter: 95, Replayed: true}, nil
	}
	if l.refuse != nil {
		return money.Charged{}, l.refuse
	}
	l.charged[c.Reference] = 5
	if l.lost {
		l.lost = false
		return money.Charged{}, errAway
	}
	return money.Charged{Amount: 5, BalanceAfter: 95}, nil
}

func (l *ledger) Refund(_ context.Context, r money.Refund) (money.Refunded, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refundErr != nil {
		return money.Refunded{}, l.refundErr
	}
	if _, ok := l.charged[r.Reference]; !ok {
		return money.Refunded{}, money.ErrNothingToRefund
	}
	l.refunded[r.Reference] = true
	return money.Refunded{Amount: 5}, nil
}

func (l *ledger) Balance(context.Context, string) (int64, error) { return 0, nil }

// record is an owner's record of a priced operation.
type record struct {
	id      string
	status  string // PENDING, SETTLED, REJECTED, VOID
	charged int64
	reason  string
	age     time.Duration
}

// books keeps records in memory; settleErr fails the next Settle (a crash between debit and
// settle), void makes Settle answer Void (what the record charged for is gone).
type books struct {
	mu        sync.Mutex
	recs      map[string]*record
	settleErr error
	void      bool
}

func (b *books) Settle(_ context.Context, id string, c money.Charged) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.settleErr; err != nil {
		b.settleErr = nil
		return err
	}
	if b.void {
		return charge.Void(fault.ErrNotFound, "gone")
	}
	if r := b.recs[id]; r.status == "PENDING" {
		r.status, r.charged = "SETTLED", c.Amount
	}
	return nil
}

func (b *books) Reject(_ context.Context, id string, refusal error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r := b.recs[id]; r.status == "PENDING" {
		r.status, r.reason = "REJECTED", charge.Refusal(refusal)
	}
	return nil
}

func (b *books) Void(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r := b.recs[id]; r.status == "PENDING" {
		r.status = "VOID"
	}
	return nil
}

// Claim hands the reconciler the PENDING records older than before, oldest first.
func (b *books) Claim(ctx context.Context, before time.Time, limit int,
	fn func(ctx context.Context, pending []charge.Intent[string], b charge.Books[string]) error) error {
	b.mu.Lock()
	var in []charge.Intent[string]
	for id, r := range b.recs {
		if r.status == "PENDING" && time.Now().Add(-r.age).Before(before) && len(in) < limit {
			in = append(in, intent(id))
		}
	}
	b.mu.Unlock()
	slices.SortFunc(in, func(a, c charge.Intent[string]) int { return cmp.Compare(b.recs[c.Record].age, b.recs[a.Record].age) })
	return fn(ctx, in, b)
}

func intent(id string) charge.Intent[string] {
	return charge.Intent[string]{Record: id, Charge: money.Charge{ClientID: "c", Kind: money.KindVerification, Reference: "op:" + id}}
}

// TestSaga: each way a charge can go, through the request's Complete and then, for what is left
// PENDING, the reconciler, over a record per case.
func TestSaga(t *testing.T) {
	tests := []struct {
		name string
		// before sets up the ledger and books for the request; skip: the request never got to
		// its debit (a crash between record and debit).
		before func(l *ledger, b *books)
		skip   bool
		// reconcile runs the reconciler after the request, with the ledger and books reset to
		// answer normally, unless after says otherwise.
		after func(l *ledger, b *books)

		wantOutcome charge.Outcome
		wantErr     error
		wantStatus  string // after everything
		wantReason  string
		wantCharged int64 // on the record
		wantLedger  int   // references charged at accounts
		wantRefunds int
		wantDebits  int
		wantFixed   int // the reconciler's count
	}{
		{name: "settled", wantOutcome: charge.Settled, wantStatus: "SETTLED", wantCharged: 5, wantLedger: 1, wantDebits: 1},
		{name: "refused", before: func(l *ledger, _ *books) { l.refuse = money.ErrInsufficientBalance },
			wantOutcome: charge.Rejected, wantErr: money.ErrInsufficientBalance, wantStatus: "REJECTED", wantReason: "INSUFFICIENT_BALANCE", wantDebits: 1},
		{name: "refused for a suspended client", before: func(l *ledger, _ *books) { l.refuse = fault.ErrSuspended },
			wantOutcome: charge.Rejected, wantErr: fault.ErrSuspended, wantStatus: "REJECTED", wantReason: "PERMISSION_DENIED", wantDebits: 1},
		{name: "unreachable, then the reconciler charges", before: func(l *ledger, _ *books) { l.down = true },
			wantOutcome: charge.Pending, wantErr: fault.ErrUnavailable, wantStatus: "SETTLED", wantCharged: 5, wantLedger: 1, wantDebits: 2, wantFixed: 1},
		{name: "unreachable, then refused", before: func(l *ledger, _ *books) { l.down = true },
			after:       func(l *ledger, _ *books) { l.refuse = money.ErrBalanceExpired },
			wantOutcome: charge.Pending, wantErr: fault.ErrUnavailable, wantStatus: "REJECTED", wantReason: "BALANCE_EXPIRED", wantDebits: 2, wantFixed: 1},
		{name: "still unreachable: stays PENDING", before: func(l *ledger, _ *books) { l.down = true },
			after:       func(l *ledger, _ *books) { l.down = true },
			wantOutcome: charge.Pending, wantErr: fault.ErrUnavailable, wantStatus: "PENDING", wantDebits: 2},
		{name: "charged, answer lost: the reconciler replays the charge", before: func(l *ledger, _ *books) { l.lost = true },
			after:       func(l *ledger, _ *books) { l.refuse = money.ErrInsufficientBalance }, // spent since: a replay is not refused
			wantOutcome: charge.Pending, wantErr: fault.ErrUnavailable, wantStatus: "SETTLED", wantCharged: 5, wantLedger: 1, wantDebits: 2, wantFixed: 1},
		{name: "crash between record and debit", skip: true,
			wantOutcome: charge.Pending, wantStatus: "SETTLED", wantCharged: 5, wantLedger: 1, wantDebits: 1, wantFixed: 1},
		{name: "crash between debit and settle", before: func(_ *ledger, b *books) { b.settleErr = errors.New("connection reset") },
			wantOutcome: charge.Pending, wantErr: errors.New("connection reset"), wantStatus: "SETTLED", wantCharged: 5, wantLedger: 1, wantDebits: 2, wantFixed: 1},
		{name: "gone before settle: refunded, void", before: func(_ *ledger, b *books) { b.void = true },
			after:       func(_ *ledger, b *books) { b.void = true },
			wantOutcome: charge.Voided, wantErr: fault.ErrNotFound, wantStatus: "VOID", wantLedger: 1, wantRefunds: 1, wantDebits: 1},
		{name: "gone, refund unknown: the reconciler refunds", before: func(l *ledger, b *books) { b.void, l.refundErr = true, errAway },
			after:       func(_ *ledger, b *books) { b.void = true },
			wantOutcome: charge.Pending, wantErr: fault.ErrUnavailable, wantStatus: "VOID", wantLedger: 1, wantRefunds: 1, wantDebits: 2, wantFixed: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			l := &ledger{charged: map[string]int64{}, refunded: map[string]bool{}}
			b := &books{recs: map[string]*record{"1": {id: "1", status: "PENDING"}}}
			if tt.before != nil {
				tt.before(l, b)
			}
			if !tt.skip {
				out, _, err := charge.Saga[string]{Ledger: l}.Complete(ctx, b, intent("1"))
				if out != tt.wantOutcome || !sameErr(err, tt.wantErr) {
					t.Fatalf("Complete = %v, %v; want %v, %v", out, err, tt.wantOutcome, tt.wantErr)
				}
			}
			// The request is over; what it left PENDING is the reconciler's, once it is old.
			l.down, l.refuse, l.refundErr, b.void, b.settleErr = false, nil, nil, false, nil
			if tt.after != nil {
				tt.after(l, b)
			}
			b.recs["1"].age = time.Minute
			r := &charge.Reconciler[string]{What: "ops", Ledger: l, Claims: b, After: 30 * time.Second, Log: zaptest.NewLogger(t)}
			n, err := r.Once(ctx)
			if err != nil || n != tt.wantFixed {
				t.Fatalf("Once = %d, %v; want %d", n, err, tt.wantFixed)
			}
			got := b.recs["1"]
			if got.status != tt.wantStatus || got.reason != tt.wantReason || got.charged != tt.wantCharged {
				t.Errorf("record %+v, want %s %q charged %d", *got, tt.wantStatus, tt.wantReason, tt.wantCharged)
			}
			if len(l.charged) != tt.wantLedger || len(l.refunded) != tt.wantRefunds || len(l.debits) != tt.wantDebits {
				t.Errorf("ledger: %d references charged, %d refunded, debits %v; want %d, %d, %d debits",
					len(l.charged), len(l.refunded), l.debits, tt.wantLedger, tt.wantRefunds, tt.wantDebits)
			}
			for _, ref := range l.debits {
				if ref != "op:1" {
					t.Errorf("debited %s, want every debit under the record's reference op:1", ref)
				}
			}
		})
	}
}

// sameErr: err is want (errors.Is), or has its message when want is no sentinel.
func sameErr(err, want error) bool {
	if want == nil || err == nil {
		return err == want
	}
	return errors.Is(err, want) || errors.Unwrap(want) == nil && err.Error() == want.Error()
}

// TestReconcilerRound: the reconciler takes only what is old enough, stops its round when
// accounts is away (the rest wait, not each its own timeout), and goes past a record that fails
// for a reason of its own.
func TestReconcilerRound(t *testing.T) {
	tests := []struct {
		name       string
		set        func(l *ledger, b *books)
		wantFixed  int
		wantDebits int
		wantStatus map[string]string
	}{
		{name: "old ones only", wantFixed: 2, wantDebits: 2,
			wantStatus: map[string]string{"a": "SETTLED", "b": "SETTLED", "young": "PENDING"}},
		{name: "accounts away: the round stops at the first", set: func(l *ledger, _ *books) { l.down = true },
			wantDebits: 1, wantStatus: map[string]string{"a": "PENDING", "b": "PENDING", "young": "PENDING"}},
		{name: "one fails on its own: the next is settled", set: func(_ *ledger, b *books) { b.settleErr = errors.New("bad row") },
			wantFixed: 1, wantDebits: 2, wantStatus: map[string]string{"a": "PENDING", "b": "SETTLED", "young": "PENDING"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &ledger{charged: map[string]int64{}, refunded: map[string]bool{}}
			b := &books{recs: map[string]*record{
				"a":     {status: "PENDING", age: 2 * time.Minute},
				"b":     {status: "PENDING", age: time.Minute},
				"young": {status: "PENDING", age: time.Second},
			}}
			if tt.set != nil {
				tt.set(l, b)
			}
			r := &charge.Reconciler[string]{What: "ops", Ledger: l, Claims: b, After: 30 * time.Second, Log: zaptest.NewLogger(t)}
			n, err := r.Once(context.Background())
			if err != nil || n != tt.wantFixed || len(l.debits) != tt.wantDebits {
				t.Fatalf("Once = %d, %v after debits %v; want %d after %d", n, err, l.debits, tt.wantFixed, tt.wantDebits)
			}
			for id, want := range tt.wantStatus {
				if got := b.recs[id].status; got != want {
					t.Errorf("%s is %s, want %s", id, got, want)
				}
			}
		})
	}
}

// TestClaimError: a claim that fails is the round's error.
func TestClaimError(t *testing.T) {
	r := &charge.Reconciler[string]{What: "ops", Ledger: &ledger{}, Claims: failing{}, Log: zaptest.NewLogger(t)}
	if _, err := r.Once(context.Background()); err == nil || !errors.Is(err, errDB) {
		t.Fatalf("Once = %v, want the claim's error", err)
	}
}

var errDB = fmt.Errorf("database down")

type failing struct{}

func (failing) Claim(context.Context, time.Time, int, func(context.Context, []charge.Intent[string], charge.Books[string]) error) error {
	return errDB
}
