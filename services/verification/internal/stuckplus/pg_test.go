package stuckplus_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/store"
	"github.com/mnvhq/mnv/services/verification/internal/stuckplus"
	"github.com/mnvhq/mnv/services/verification/internal/verificationtest"
)

// accounts stands in for accounts' ledger: 5 once per reference (a repeat is that charge,
// whatever the balance is by then), refused while spent, no answer while down; lost commits the
// next debit and loses its answer. gate, when set, holds each debit until it is closed.
type accounts struct {
	mu    sync.Mutex
	spent bool
	down  bool
	lost  bool
	gate  chan struct{}
	// during runs inside each debit, while accounts is answering.
	during  func(ref string)
	charged map[string]bool
	debits  []string
}

var errAway = money.Unknown("debit", errors.New("connection refused"), true)

func (a *accounts) Debit(_ context.Context, c money.Charge) (money.Charged, error) {
	a.mu.Lock()
	gate := a.gate
	a.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if a.during != nil {
		a.during(c.Reference)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.debits = append(a.debits, c.Reference)
	switch {
	case a.down:
		return money.Charged{}, errAway
	case a.charged[c.Reference]:
		return money.Charged{Amount: 5, BalanceAfter: 0, Replayed: true}, nil
	case a.spent:
		return money.Charged{}, money.ErrInsufficientBalance
	}
	a.charged[c.Reference] = true
	if a.lost {
		a.lost = false
		return money.Charged{}, errAway
	}
	return money.Charged{Amount: 5, BalanceAfter: 0}, nil
}

func (a *accounts) Refund(context.Context, money.Refund) (money.Refunded, error) {
	return money.Refunded{}, errors.New("not used")
}

func (a *accounts) Balance(context.Context, string) (int64, error) { return 0, nil }

type env struct {
	pool   *pgxpool.Pool
	svc    *stuckplus.Service
	ledger *accounts
	admin  principal.Principal
	sess   string
}

const number = "+971501234567"

// newEnv is a stuck-plus session kept on the real schema, and the service over the real store.
func newEnv(t *testing.T, chargeRepeats bool) env {
	t.Helper()
	ctx := context.Background()
	pool := verificationtest.Database(t, 8)
	vault := verificationtest.NewKeys(t).Vault
	ledger := &accounts{charged: map[string]bool{}}
	stores := pg.NewStores(pool, func(db pg.DB) stuckplus.Store { return store.New(db) })
	svc := stuckplus.New(stores.Pool(), stores, vault, ledger, chargeRepeats)
	admin := principal.Principal{ClientID: uuid.NewString(), KeyID: uuid.NewString(), Role: principal.RoleAdmin}
	st := store.New(pool)
	tr, err := st.InsertTransaction(ctx, domain.Transaction{ID: uuid.NewString(), ClientID: admin.ClientID, ServiceCode: "STUCK_PLUS", MetadataID: "m",
		Features: []string{"STUCK_PLUS"}, Operators: principal.DefaultOperators(), Status: domain.TransactionPending, ExpiresAt: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	// Written as a capture keeps it (Keep, whose event needs the capture's job queue).
	id := uuid.NewString()
	if _, err := pool.Exec(ctx, `INSERT INTO verification.stuck_plus_sessions (id, client_id, transaction_id, metadata_id, operator_id,
		number_sealed, number_hash, number_masked) VALUES ($1, $2, $3, 'm', 'alpha', $4, $5, $6)`,
		id, admin.ClientID, tr.ID, vault.Seal(number, "stuck_plus_sessions", id), vault.Hash(number), phone.Mask(number)); err != nil {
		t.Fatal(err)
	}
	return env{pool: pool, svc: svc, ledger: ledger, admin: admin, sess: id}
}

// reveals reads the session's reveals by status.
func (e env) reveals(t *testing.T) map[string]int {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT status, count(*) FROM verification.stuck_plus_reveals WHERE session_id = $1 GROUP BY status`, e.sess)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

func (e env) audited(t *testing.T) int64 {
	t.Helper()
	p, err := e.svc.ListReveals(context.Background(), e.admin.ClientID, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	return p.Total
}

func (e env) reconcile(t *testing.T) int {
	t.Helper()
	n, err := e.svc.Reconciler(-time.Second, zaptest.NewLogger(t)).Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

const reason = "support ticket 42"

// TestRevealCharge: a reveal's charge on the real schema, each way it can go. Every audited
// reveal is charged once, and nothing is audited without its charge.
func TestRevealCharge(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, e env) error // the last reveal's error
		// want: reveals by status, audited, references charged at accounts, debits asked.
		wantErr     error
		wantStatus  map[string]int
		wantAudited int64
		wantCharged int
		wantDebits  int
	}{
		{name: "charged and audited", run: func(t *testing.T, e env) error {
			r, err := e.svc.Reveal(context.Background(), e.admin, e.sess, reason)
			if err == nil && (r.MobileNumber != number || r.Reveal.Charged != 5) {
				t.Errorf("revealed %+v", r)
			}
			return err
		}, wantStatus: map[string]int{"SETTLED": 1}, wantAudited: 1, wantCharged: 1, wantDebits: 1},
		{name: "accounts away: PENDING, out of the audit", run: func(t *testing.T, e env) error {
			e.ledger.down = true
			_, err := e.svc.Reveal(context.Background(), e.admin, e.sess, reason)
			return err
		}, wantErr: fault.ErrUnavailable, wantStatus: map[string]int{"PENDING": 1}, wantDebits: 1},
		{name: "the same key's retry resumes it, charged once", run: func(t *testing.T, e env) error {
			e.ledger.lost = true
			if _, err := e.svc.Reveal(context.Background(), e.admin, e.sess, reason); !errors.Is(err, fault.ErrUnavailable) {
				t.Fatalf("first: %v", err)
			}
			e.ledger.spent = true // the balance is gone: the retry must hear the charge
			_, err := e.svc.Reveal(context.Background(), e.admin, e.sess, reason)
			return err
		}, wantStatus: map[string]int{"SETTLED": 1}, wantAudited: 1, wantCharged: 1, wantDebits: 2},
		{name: "another key meanwhile: nothing recorded", run: func(t *testing.T, e env) error {
			e.ledger.down = true
			if _, err := e.svc.Reveal(context.Background(), e.admin, e.sess, reason); !errors.Is(err, fault.ErrUnavailable) {
				t.Fatalf("first: %v", err)
			}
			e.ledger.down = false
			other := e.admin
			other.KeyID = uuid.NewString()
			_, err := e.svc.Reveal(context.Background(), other, e.sess, reason)
			return err
		}, wantErr: fault.ErrUnavailable, wantStatus: map[string]int{"PENDING": 1}, wantDebits: 1},
		{name: "refused: REJECTED, out of the audit; the next is the first again", run: func(t *testing.T, e env) error {
			e.ledger.spent = true
			if _, err := e.svc.Reveal(context.Background(), e.admin, e.sess, reason); !errors.Is(err, money.ErrInsufficientBalance) {
				t.Fatalf("refused: %v", err)
			}
			e.ledger.spent = false
			_, err := e.svc.Reveal(context.Background(), e.admin, e.sess, reason)
			if e.ledger.debits[0] != e.ledger.debits[1] {
				t.Errorf("debits %v, want the session's reference twice", e.ledger.debits)
			}
			return err
		}, wantStatus: map[string]int{"REJECTED": 1, "SETTLED": 1}, wantAudited: 1, wantCharged: 1, wantDebits: 2},
		{name: "crash between record and debit: the reconciler charges", run: func(t *testing.T, e env) error {
			e.ledger.down = true
			if _, err := e.svc.Reveal(context.Background(), e.admin, e.sess, reason); !errors.Is(err, fault.ErrUnavailable) {
				t.Fatalf("first: %v", err)
			}
			e.ledger.down = false
			if n := e.reconcile(t); n != 1 {
				t.Errorf("reconciled %d, want 1", n)
			}
			return nil
		}, wantStatus: map[string]int{"SETTLED": 1}, wantAudited: 1, wantCharged: 1, wantDebits: 2},
		{name: "charged, answer lost, balance spent: the reconciler settles it, the retry hears it", run: func(t *testing.T, e env) error {
			e.ledger.lost = true
			if _, err := e.svc.Reveal(context.Background(), e.admin, e.sess, reason); !errors.Is(err, fault.ErrUnavailable) {
				t.Fatalf("first: %v", err)
			}
			e.ledger.spent = true
			if n := e.reconcile(t); n != 1 {
				t.Errorf("reconciled %d, want 1", n)
			}
			// The same key's retry is answered with the reveal the reconciler settled.
			r, err := e.svc.Reveal(context.Background(), e.admin, e.sess, reason)
			if err == nil && (r.Reveal.Charged != 5 || r.MobileNumber != number) {
				t.Errorf("retry answered %+v, want the settled reveal, charged 5", r)
			}
			// Heard now: the next is a free repeat.
			if r, err := e.svc.Reveal(context.Background(), e.admin, e.sess, reason); err != nil || r.Reveal.Charged != 0 {
				t.Errorf("repeat: %+v, %v; want free", r.Reveal, err)
			}
			return err
		}, wantStatus: map[string]int{"SETTLED": 2}, wantAudited: 2, wantCharged: 1, wantDebits: 2},
		{name: "another key after an unheard reveal reveals on its own", run: func(t *testing.T, e env) error {
			e.ledger.down = true
			if _, err := e.svc.Reveal(context.Background(), e.admin, e.sess, reason); !errors.Is(err, fault.ErrUnavailable) {
				t.Fatalf("first: %v", err)
			}
			e.ledger.down = false
			if n := e.reconcile(t); n != 1 {
				t.Errorf("reconciled %d, want 1", n)
			}
			other := e.admin
			other.KeyID = uuid.NewString()
			r, err := e.svc.Reveal(context.Background(), other, e.sess, reason)
			if err == nil && r.Reveal.KeyID != other.KeyID {
				t.Errorf("answered with another key's reveal %+v", r.Reveal)
			}
			return err
		}, wantStatus: map[string]int{"SETTLED": 2}, wantAudited: 2, wantCharged: 1, wantDebits: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, false)
			if err := tt.run(t, e); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Reveal = %v, want %v", err, tt.wantErr)
			}
			if got := e.reveals(t); len(got) != len(tt.wantStatus) || !sameCounts(got, tt.wantStatus) {
				t.Errorf("reveals by status %v, want %v", got, tt.wantStatus)
			}
			if n := e.audited(t); n != tt.wantAudited {
				t.Errorf("%d audited, want %d", n, tt.wantAudited)
			}
			if len(e.ledger.charged) != tt.wantCharged || len(e.ledger.debits) != tt.wantDebits {
				t.Errorf("%d references charged by debits %v; want %d by %d", len(e.ledger.charged), e.ledger.debits, tt.wantCharged, tt.wantDebits)
			}
		})
	}
}

func sameCounts(a, b map[string]int) bool {
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

// TestReconcilersShareTheWork: a reconciler's claims (FOR UPDATE SKIP LOCKED) are skipped by
// another's running at once, so each PENDING reveal is debited by one of them.
func TestReconcilersShareTheWork(t *testing.T) {
	e := newEnv(t, true)
	ctx := context.Background()
	e.ledger.down = true
	if _, err := e.svc.Reveal(ctx, e.admin, e.sess, reason); !errors.Is(err, fault.ErrUnavailable) {
		t.Fatalf("first: %v", err)
	}
	e.ledger.mu.Lock()
	e.ledger.down, e.ledger.gate = false, make(chan struct{})
	gate := e.ledger.gate
	e.ledger.mu.Unlock()
	first := make(chan int)
	go func() { first <- e.reconcile(t) }()
	// The first holds its claim while its debit waits at the gate; the second finds nothing.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting bool
		if err := e.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
			WHERE c.relname = 'stuck_plus_reveals' AND l.mode = 'RowShareLock'
				AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first reconciler did not claim")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := e.reconcile(t); n != 0 {
		t.Errorf("the second reconciler settled %d while the first held the claim", n)
	}
	close(gate)
	if n := <-first; n != 1 {
		t.Errorf("the first reconciler settled %d, want 1", n)
	}
	if len(e.ledger.debits) != 2 || e.audited(t) != 1 {
		t.Errorf("debits %v, %d audited; want the request's and one reconciler's, 1 audited", e.ledger.debits, e.audited(t))
	}
}

// TestRevealHoldsNoLockWhileCharging: while accounts answers a reveal's debit, the session's
// row is free (another reveal, the retention job can take it) and the reveal's intent is
// committed, so a crash then leaves it PENDING for the reconciler, not rolled back.
func TestRevealHoldsNoLockWhileCharging(t *testing.T) {
	e := newEnv(t, false)
	ctx := context.Background()
	var checked bool
	e.ledger.during = func(ref string) {
		checked = true
		tx, err := e.pool.Begin(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, `SELECT 1 FROM verification.stuck_plus_sessions WHERE id = $1 FOR UPDATE NOWAIT`, e.sess); err != nil {
			t.Errorf("the session's row is locked while accounts answers: %v", err)
		}
		var recorded int
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM verification.stuck_plus_reveals WHERE session_id = $1`, e.sess).Scan(&recorded); err != nil || recorded != 1 {
			t.Errorf("%d reveals committed while accounts answers (%v), want the intent", recorded, err)
		}
	}
	if _, err := e.svc.Reveal(ctx, e.admin, e.sess, reason); err != nil {
		t.Fatal(err)
	}
	if !checked {
		t.Fatal("the reveal was not debited")
	}
}
