package profiles_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/profiles"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/principal"
)

const reason = "support case 42"

// errAway is a debit or refund whose outcome is unknown: accounts did not answer.
var errAway = money.Unknown("debit", errors.New("connection refused"), true)

// enrichFixture is a fixture with a client that has one profile.
func enrichFixture(t *testing.T) (fixture, principal.Principal, domain.Profile) {
	t.Helper()
	f := newFixture(t)
	p := principal.Principal{ClientID: uuid.NewString(), KeyID: "k1"}
	prof, err := f.svc.Create(context.Background(), p, profiles.CreateRequest{MobileNumber: "+971501234567"})
	if err != nil {
		t.Fatal(err)
	}
	f.st.queued = nil
	return f, p, prof
}

func TestEnrich(t *testing.T) {
	tests := []struct {
		name       string
		debitErr   error
		id         func(prof domain.Profile) string // the profile asked for (default: the client's)
		reason     string
		wantErr    func(error) bool
		wantStatus domain.EnrichmentStatus // of the one record; "" when none may be made
		wantDebits int
	}{
		{name: "charged and written", wantStatus: domain.EnrichmentSettled, wantDebits: 1},
		{name: "refused for balance", debitErr: money.ErrInsufficientBalance, wantDebits: 1,
			wantErr: func(err error) bool { return errors.Is(err, money.ErrInsufficientBalance) }, wantStatus: domain.EnrichmentRejected},
		{name: "refused for a suspended client", debitErr: fault.ErrSuspended, wantDebits: 1,
			wantErr: func(err error) bool { return errors.Is(err, fault.ErrSuspended) }, wantStatus: domain.EnrichmentRejected},
		{name: "outcome unknown", debitErr: errAway, wantDebits: 1,
			wantErr: func(err error) bool { return errors.Is(err, fault.ErrUnavailable) }, wantStatus: domain.EnrichmentPending},
		{name: "another client's profile", id: func(domain.Profile) string { return uuid.NewString() },
			wantErr: func(err error) bool { return errors.Is(err, fault.ErrNotFound) }},
		{name: "not a uuid", id: func(domain.Profile) string { return "x" },
			wantErr: func(err error) bool { return errors.Is(err, fault.ErrNotFound) }},
		{name: "reason too short", reason: "ab",
			wantErr: func(err error) bool {
				f := fault.Find(err, fault.InvalidArgument)
				return f != nil && f.Field == "reason"
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, p, prof := enrichFixture(t)
			f.ledger.debitErr = tt.debitErr
			id, why := prof.ID, reason
			if tt.id != nil {
				id = tt.id(prof)
			}
			if tt.reason != "" {
				why = tt.reason
			}
			got, err := f.svc.Enrich(context.Background(), p, id, why)
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !tt.wantErr(err) {
				t.Fatalf("Enrich: %v", err)
			}
			if len(f.ledger.debits) != tt.wantDebits {
				t.Fatalf("%d debits, want %d", len(f.ledger.debits), tt.wantDebits)
			}
			recs := f.st.recordsOf(p.ClientID)
			if tt.wantStatus == "" {
				if len(recs) != 0 {
					t.Fatalf("records %+v, want none", recs)
				}
				return
			}
			if len(recs) != 1 || recs[0].Status != tt.wantStatus {
				t.Fatalf("records %+v, want one %s", recs, tt.wantStatus)
			}
			stored := f.st.profiles[prof.ID]
			enriched := f.st.triggered(domain.TriggerProfileEnriched)
			if tt.wantStatus != domain.EnrichmentSettled {
				if stored.Enrichment != nil || len(enriched) != 0 || recs[0].Charged != 0 {
					t.Errorf("not charged, yet written (%v), queued (%v) or counted (%d)", stored.Enrichment, enriched, recs[0].Charged)
				}
				return
			}
			d := f.ledger.debits[0]
			if d.Kind != money.KindConnectEnrichment || d.Reference != recs[0].Reference() || d.ClientID != p.ClientID {
				t.Errorf("debit %+v, want CONNECT_ENRICHMENT under %s", d, recs[0].Reference())
			}
			if got.Enrichment == nil || stored.Enrichment == nil || !got.Enrichment.Valid || got.Enrichment.CountryCode != "AE" {
				t.Errorf("enrichment %+v, stored %+v", got.Enrichment, stored.Enrichment)
			}
			if recs[0].Charged != f.ledger.price || !slices.Equal(enriched, []string{prof.ID}) {
				t.Errorf("charged %d, queued %v", recs[0].Charged, enriched)
			}
		})
	}
}

// TestEnrichRetry: a retry of a request (same credential, Idempotency-Key and profile) resumes
// its record under the same reference, so accounts charges it once.
func TestEnrichRetry(t *testing.T) {
	tests := []struct {
		name string
		// between runs after the first attempt, whose debit's outcome was unknown.
		between    func(t *testing.T, f fixture, p principal.Principal, prof domain.Profile)
		retryKey   string
		wantErr    error
		wantRecs   int
		wantDebits int
		wantCharge int // references charged in the end
		wantRefund int
		wantFirst  domain.EnrichmentStatus
	}{
		{name: "resumes the pending record", retryKey: "k", wantRecs: 1, wantDebits: 2, wantCharge: 1, wantFirst: domain.EnrichmentSettled},
		{name: "another key is another request", retryKey: "other", wantRecs: 2, wantDebits: 2, wantCharge: 1, wantFirst: domain.EnrichmentPending},
		{name: "hears the reconciler's settlement", retryKey: "k", wantRecs: 1, wantDebits: 2, wantCharge: 1, wantFirst: domain.EnrichmentSettled,
			between: func(t *testing.T, f fixture, _ principal.Principal, _ domain.Profile) {
				reconcile(t, f, 1)
			}},
		{name: "a key answered long ago is free again", retryKey: "k", wantRecs: 2, wantDebits: 3, wantCharge: 2, wantFirst: domain.EnrichmentSettled,
			between: func(t *testing.T, f fixture, _ principal.Principal, _ domain.Profile) {
				reconcile(t, f, 1)
				for id, r := range f.st.records {
					r.CreatedAt = r.CreatedAt.Add(-25 * time.Hour)
					f.st.records[id] = r
				}
			}},
		// An earlier attempt's debit may still be on its way: the reconciler refunds, later.
		{name: "profile erased meanwhile: no refund yet", retryKey: "k", wantErr: fault.ErrNotFound, wantRecs: 1, wantDebits: 1,
			wantFirst: domain.EnrichmentPending,
			between: func(t *testing.T, f fixture, p principal.Principal, prof domain.Profile) {
				if _, err := f.svc.Delete(context.Background(), p.ClientID, prof.ID); err != nil {
					t.Fatal(err)
				}
			}},
		// The retry's own debit answered: the charge is known to exist, so it is refunded at once.
		{name: "profile erased after the retry's debit: refunded", retryKey: "k", wantErr: fault.ErrNotFound,
			wantRecs: 1, wantDebits: 2, wantRefund: 1, wantFirst: domain.EnrichmentCancelled,
			between: func(t *testing.T, f fixture, _ principal.Principal, prof domain.Profile) {
				f.st.onLockEnrichment = func() { delete(f.st.profiles, prof.ID) }
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, p, prof := enrichFixture(t)
			ctx := withKey(context.Background(), "k")
			f.ledger.debitErr = errAway
			if _, err := f.svc.Enrich(ctx, p, prof.ID, reason); !errors.Is(err, fault.ErrUnavailable) {
				t.Fatalf("first attempt: %v", err)
			}
			first := f.st.recordsOf(p.ClientID)[0]
			f.ledger.debitErr = nil
			if tt.between != nil {
				tt.between(t, f, p, prof)
			}
			got, err := f.svc.Enrich(withKey(context.Background(), tt.retryKey), p, prof.ID, reason)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("retry: %v, want %v", err, tt.wantErr)
				}
			} else if err != nil || got.Enrichment == nil {
				t.Fatalf("retry: %v, enrichment %v", err, got.Enrichment)
			}
			if n := len(f.st.recordsOf(p.ClientID)); n != tt.wantRecs {
				t.Errorf("%d records, want %d", n, tt.wantRecs)
			}
			if len(f.ledger.debits) != tt.wantDebits || len(f.ledger.charged) != tt.wantCharge {
				t.Errorf("%d debits charging %d references, want %d charging %d", len(f.ledger.debits), len(f.ledger.charged), tt.wantDebits, tt.wantCharge)
			}
			if len(f.ledger.refunds) != tt.wantRefund {
				t.Errorf("refunds %+v, want %d", f.ledger.refunds, tt.wantRefund)
			}
			if got := f.st.records[first.ID].Status; got != tt.wantFirst {
				t.Errorf("the first attempt's record is %s, want %s", got, tt.wantFirst)
			}
			if tt.name == "resumes the pending record" && f.ledger.debits[0].Reference != f.ledger.debits[1].Reference {
				t.Errorf("the retry debits %s, the first attempt %s", f.ledger.debits[1].Reference, f.ledger.debits[0].Reference)
			}
		})
	}
}

// reconcile settles every pending record and checks it settled n.
func reconcile(t *testing.T, f fixture, n int) {
	t.Helper()
	got, err := f.svc.ReconcileEnrichmentsOnce(context.Background(), -time.Minute, zaptest.NewLogger(t))
	if err != nil || got != n {
		t.Fatalf("ReconcileEnrichmentsOnce = %d, %v; want %d", got, err, n)
	}
}

// TestReconcile: a record left PENDING is debited again under its reference and written, or,
// when its profile was erased, refunded and CANCELLED; when accounts cannot be reached it stays
// PENDING for the next round.
func TestReconcile(t *testing.T) {
	tests := []struct {
		name        string
		charged     bool // the first attempt's debit went through, its answer lost
		erase       bool
		refundErr   error
		debitErr    error
		wantSettled int
		wantStatus  domain.EnrichmentStatus
		wantCharged int // references charged in the end
	}{
		{name: "written, charged once", charged: true, wantSettled: 1, wantStatus: domain.EnrichmentSettled, wantCharged: 1},
		{name: "written, charged now", wantSettled: 1, wantStatus: domain.EnrichmentSettled, wantCharged: 1},
		{name: "erased: refunded", charged: true, erase: true, wantSettled: 1, wantStatus: domain.EnrichmentCancelled},
		{name: "erased, nothing charged", erase: true, wantSettled: 1, wantStatus: domain.EnrichmentCancelled},
		{name: "erased, refund unknown", charged: true, erase: true, refundErr: money.Unknown("refund", errors.New("down"), true),
			wantStatus: domain.EnrichmentPending, wantCharged: 1},
		{name: "accounts still away", debitErr: errAway, wantStatus: domain.EnrichmentPending},
		{name: "refused now", debitErr: money.ErrBalanceExpired, wantSettled: 1, wantStatus: domain.EnrichmentRejected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, p, prof := enrichFixture(t)
			ctx := withKey(context.Background(), "k")
			f.ledger.debitErr = errAway
			if _, err := f.svc.Enrich(ctx, p, prof.ID, reason); !errors.Is(err, fault.ErrUnavailable) {
				t.Fatalf("first attempt: %v", err)
			}
			rec := f.st.recordsOf(p.ClientID)[0]
			if tt.charged {
				f.ledger.charged[rec.Reference()] = f.ledger.price
			}
			if tt.erase {
				if _, err := f.svc.Delete(ctx, p.ClientID, prof.ID); err != nil {
					t.Fatal(err)
				}
			}
			f.ledger.debitErr, f.ledger.refundErr = tt.debitErr, tt.refundErr
			reconcile(t, f, tt.wantSettled)
			got := f.st.records[rec.ID]
			if got.Status != tt.wantStatus {
				t.Fatalf("record %s, want %s", got.Status, tt.wantStatus)
			}
			if len(f.ledger.charged) != tt.wantCharged {
				t.Errorf("%d references charged, want %d", len(f.ledger.charged), tt.wantCharged)
			}
			stored, exists := f.st.profiles[prof.ID]
			switch tt.wantStatus {
			case domain.EnrichmentSettled:
				if stored.Enrichment == nil || got.Charged != f.ledger.price {
					t.Errorf("settled without the enrichment (%v) or the amount (%d)", stored.Enrichment, got.Charged)
				}
				if keyOf(f, rec) == "" {
					t.Error("the reconciler dropped the request key: a retry would be charged again")
				}
			case domain.EnrichmentCancelled:
				if exists || len(f.ledger.refunds) != 1 || f.ledger.refunds[0].Reference != rec.Reference() {
					t.Errorf("refunds %+v, want one of %s", f.ledger.refunds, rec.Reference())
				}
			default:
				if exists && stored.Enrichment != nil {
					t.Error("written without a charge")
				}
			}
		})
	}
}

// keyOf returns the request key rec is held under ("": none).
func keyOf(f fixture, rec domain.EnrichmentRecord) string {
	for k, id := range f.st.keys {
		if id == rec.ID {
			return k
		}
	}
	return ""
}
