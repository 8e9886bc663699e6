package profiles_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/connect/app"
	"github.com/mnvhq/mnv/services/connect/internal/connecttest"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/profiles"
	"github.com/mnvhq/mnv/services/connect/internal/store"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/idempotency"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// hookLedger is fakeLedger with during, run inside each debit while accounts answers.
type hookLedger struct {
	*fakeLedger
	during func()
}

func (l *hookLedger) Debit(ctx context.Context, c money.Charge) (money.Charged, error) {
	if l.during != nil {
		l.during()
	}
	return l.fakeLedger.Debit(ctx, c)
}

// pgEnv is the profiles service over connect's real store, with a profile of its client.
type pgEnv struct {
	pool   *pgxpool.Pool
	svc    *profiles.Service
	ledger *hookLedger
	p      principal.Principal
	prof   domain.Profile
}

func newPGEnv(t *testing.T) pgEnv {
	t.Helper()
	pool := connecttest.Pool(t, 8)
	vault, keyring := connecttest.Keys(t)
	q, box := connecttest.Queue(t, pool)
	idem := idempotency.New(pool, app.Schema, keyring, zaptest.NewLogger(t))
	stores := pg.NewStores(pool, func(db pg.DB) profiles.Store { return store.New(db).WithJobs(q).WithOutbox(box).WithAnswers(idem) })
	l := &hookLedger{fakeLedger: newFakeLedger()}
	svc := profiles.New(stores.Pool(), stores, vault, l, requests{})
	p := principal.Principal{ClientID: uuid.NewString(), KeyID: uuid.NewString()}
	prof, err := svc.Create(context.Background(), p, profiles.CreateRequest{MobileNumber: "+971501234567"})
	if err != nil {
		t.Fatal(err)
	}
	return pgEnv{pool: pool, svc: svc, ledger: l, p: p, prof: prof}
}

func (e pgEnv) records(t *testing.T) map[domain.EnrichmentStatus]int {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT status, count(*) FROM connect.enrichments WHERE profile_id = $1 GROUP BY status`, e.prof.ID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[domain.EnrichmentStatus]int{}
	for rows.Next() {
		var s domain.EnrichmentStatus
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

// TestEnrichChargesOutsideLocks: on the real schema, while accounts answers an enrichment's
// debit, neither the profile nor the record is locked (an erasure does not wait on accounts)
// and the PENDING record is committed; each way the charge ends leaves the record and the
// ledger agreeing.
func TestEnrichChargesOutsideLocks(t *testing.T) {
	tests := []struct {
		name string
		// during runs while accounts answers, after the lock checks.
		during      func(t *testing.T, e pgEnv)
		debitErr    error
		reconcile   bool
		wantErr     error
		wantStatus  domain.EnrichmentStatus
		wantCharged int // references charged at accounts in the end
		wantRefunds int
	}{
		{name: "settled", wantStatus: domain.EnrichmentSettled, wantCharged: 1},
		{name: "refused", debitErr: money.ErrInsufficientBalance, wantErr: money.ErrInsufficientBalance, wantStatus: domain.EnrichmentRejected},
		{name: "erased while accounts answers: refunded", wantErr: fault.ErrNotFound, wantStatus: domain.EnrichmentCancelled, wantRefunds: 1,
			during: func(t *testing.T, e pgEnv) {
				if _, err := e.svc.Delete(context.Background(), e.p.ClientID, e.prof.ID); err != nil {
					t.Errorf("erase while accounts answers: %v", err)
				}
			}},
		{name: "accounts away, then the reconciler", debitErr: errAway, reconcile: true, wantErr: fault.ErrUnavailable,
			wantStatus: domain.EnrichmentSettled, wantCharged: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newPGEnv(t)
			ctx := context.Background()
			e.ledger.debitErr = tt.debitErr
			debits := 0
			e.ledger.during = func() {
				debits++
				if debits > 1 {
					return // the reconciler's: it holds its claim by design
				}
				for _, lock := range []string{
					`SELECT 1 FROM connect.profiles WHERE id = $1 FOR UPDATE NOWAIT`,
					`SELECT 1 FROM connect.enrichments WHERE profile_id = $1 FOR UPDATE NOWAIT`,
				} {
					tx, err := e.pool.Begin(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := tx.Exec(ctx, lock, e.prof.ID); err != nil {
						t.Errorf("%s while accounts answers: %v", lock, err)
					}
					_ = tx.Rollback(ctx)
				}
				if got := e.records(t); got[domain.EnrichmentPending] != 1 {
					t.Errorf("records %v while accounts answers, want the PENDING intent committed", got)
				}
				if tt.during != nil {
					tt.during(t, e)
				}
			}
			_, err := e.svc.Enrich(ctx, e.p, e.prof.ID, reason)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Enrich = %v, want %v", err, tt.wantErr)
			}
			if tt.reconcile {
				e.ledger.debitErr = nil
				if n, err := e.svc.ReconcileEnrichmentsOnce(ctx, -time.Second, zaptest.NewLogger(t)); err != nil || n != 1 {
					t.Fatalf("ReconcileEnrichmentsOnce = %d, %v; want 1", n, err)
				}
			}
			if got := e.records(t); len(got) != 1 || got[tt.wantStatus] != 1 {
				t.Errorf("records %v, want one %s", got, tt.wantStatus)
			}
			if len(e.ledger.charged) != tt.wantCharged || len(e.ledger.refunds) != tt.wantRefunds {
				t.Errorf("%d references charged, refunds %+v; want %d, %d", len(e.ledger.charged), e.ledger.refunds, tt.wantCharged, tt.wantRefunds)
			}
		})
	}
}
