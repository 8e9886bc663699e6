package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/seal"
	"github.com/mnvhq/mnv/services/verification/internal/verificationtest"
)

// The rules of a verification, over in-memory fakes of the store and the ledger. What the
// statements themselves guarantee (one verification per session, the event and Connect's job
// committed with their fact) is proven against PostgreSQL by the store's tests and the e2e suite.

// fakeStore keeps sessions and verifications the way the store's statements do.
type fakeStore struct {
	sessions map[string]string // id → client
	used     map[string]bool
	verifs   []*domain.Verification
	now      func() time.Time
	records  int // verifications given to RecordVerifications
	events   []events.Event
}

func (f *fakeStore) Emit(_ context.Context, evs ...events.Event) error {
	f.events = append(f.events, evs...)
	return nil
}

// completed decodes the verification.completed events written, by verification id; it fails
// the test on any other event or on a second event of one verification.
func (f *fakeStore) completed(t *testing.T) map[string]events.VerificationCompletedData {
	t.Helper()
	out := map[string]events.VerificationCompletedData{}
	for _, ev := range f.events {
		var d events.VerificationCompletedData
		if ev.Type != events.VerificationCompleted || json.Unmarshal(ev.Data, &d) != nil {
			t.Fatalf("event %+v, want verification.completed", ev)
		}
		if v := f.byID(d.VerificationID); v == nil || v.ClientID != ev.ClientID {
			t.Fatalf("event %+v of no verification of its client", ev)
		}
		if _, twice := out[d.VerificationID]; twice {
			t.Fatalf("verification %s has two events", d.VerificationID)
		}
		out[d.VerificationID] = d
	}
	return out
}

func newFakeStore(now func() time.Time) *fakeStore {
	return &fakeStore{sessions: map[string]string{}, used: map[string]bool{}, now: now}
}

func (f *fakeStore) InTx(ctx context.Context, fn func(ctx context.Context, st Store) error) error {
	return fn(ctx, f)
}

func (f *fakeStore) byID(id string) *domain.Verification {
	for _, v := range f.verifs {
		if v.ID == id {
			return v
		}
	}
	return nil
}

func (f *fakeStore) RecordVerifications(ctx context.Context, vs []domain.Verification, limit domain.NumberLimit, counted []bool) ([]domain.Recorded, error) {
	out := make([]domain.Recorded, len(vs))
	for i, v := range vs {
		f.records++
		if limit.Max > 0 && i < len(counted) && counted[i] {
			if n, oldest, _ := f.NumberAttempts(ctx, v.ClientID, v.NumberHash, limit.Since); n >= limit.Max {
				out[i] = domain.Recorded{Limited: true, Oldest: *oldest}
				continue
			}
		}
		if f.sessions[v.SessionID] != v.ClientID || f.used[v.SessionID] {
			continue
		}
		f.used[v.SessionID] = true
		v.CreatedAt = f.now()
		f.verifs = append(f.verifs, &v)
		out[i] = domain.Recorded{OK: true, CreatedAt: v.CreatedAt}
	}
	return out, nil
}

func (f *fakeStore) SessionVerification(_ context.Context, clientID, sessionID string) (*domain.Verification, error) {
	if f.sessions[sessionID] != clientID {
		return nil, fault.ErrNotFound
	}
	for _, v := range f.verifs {
		if v.SessionID == sessionID && v.Status != domain.StatusRejected {
			c := *v
			return &c, nil
		}
	}
	return nil, nil
}

func (f *fakeStore) SettleVerifications(_ context.Context, ss []domain.Settlement) ([]bool, error) {
	out := make([]bool, len(ss))
	for i, s := range ss {
		v := f.byID(s.ID)
		if v == nil || v.Status != domain.StatusPending {
			continue
		}
		after := s.BalanceAfter
		v.Status, v.Charged, v.BalanceAfter = v.Outcome, s.Charged, &after
		f.events = append(f.events, s.Completed)
		out[i] = true
	}
	return out, nil
}

func (f *fakeStore) RejectVerification(_ context.Context, clientID, id string) (bool, error) {
	v := f.byID(id)
	if v == nil || v.ClientID != clientID || v.Status != domain.StatusPending {
		return false, nil
	}
	v.Status = domain.StatusRejected
	f.used[v.SessionID] = false
	return true, nil
}

func (f *fakeStore) GetVerification(_ context.Context, clientID, id string) (domain.Verification, error) {
	if v := f.byID(id); v != nil && v.ClientID == clientID && domain.IsOutcome(v.Status) {
		return *v, nil
	}
	return domain.Verification{}, fault.ErrNotFound
}

func (f *fakeStore) ListVerifications(context.Context, string, domain.VerificationFilter, int64, int64) (domain.Page[domain.Verification], error) {
	return domain.Page[domain.Verification]{}, nil
}

func (f *fakeStore) NumberAttempts(_ context.Context, clientID string, hash []byte, since time.Time) (int, *time.Time, error) {
	n, oldest := 0, (*time.Time)(nil)
	for _, v := range f.verifs {
		if v.ClientID == clientID && string(v.NumberHash) == string(hash) && !v.CreatedAt.Before(since) {
			n++
			if oldest == nil || v.CreatedAt.Before(*oldest) {
				oldest = &v.CreatedAt
			}
		}
	}
	return n, oldest, nil
}

func (f *fakeStore) StalePending(_ context.Context, before time.Time, limit int) ([]domain.Verification, error) {
	var out []domain.Verification
	for _, v := range f.verifs {
		if v.Status == domain.StatusPending && v.CreatedAt.Before(before) && len(out) < limit {
			out = append(out, *v)
		}
	}
	return out, nil
}

// fakeLedger charges 5 from a balance of 100 once per reference, or fails with err.
type fakeLedger struct {
	err     error
	refs    []string // every debit asked, in order
	charged map[string]bool
}

func (l *fakeLedger) Debit(_ context.Context, c money.Charge) (money.Charged, error) {
	l.refs = append(l.refs, c.Reference)
	if l.err != nil {
		return money.Charged{}, l.err
	}
	if l.charged == nil {
		l.charged = map[string]bool{}
	}
	replayed := l.charged[c.Reference]
	l.charged[c.Reference] = true
	return money.Charged{Amount: 5, BalanceAfter: 95, Replayed: replayed}, nil
}

func (l *fakeLedger) Refund(context.Context, money.Refund) (money.Refunded, error) {
	return money.Refunded{}, errors.New("not used")
}

func (l *fakeLedger) Balance(context.Context, string) (int64, error) { return 100, nil }

// env is a Service over fakes, at a fixed time.
type env struct {
	t      *testing.T
	svc    *Service
	st     *fakeStore
	ledger *fakeLedger
	sealer *seal.Sealer
	now    time.Time
	client principal.Principal
}

func newEnv(t *testing.T) *env {
	t.Helper()
	keys, ops := verificationtest.NewKeys(t), verificationtest.Operators(t, verificationtest.Registry)
	e := &env{t: t, ledger: &fakeLedger{}, sealer: keys.Sealer, now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
		client: principal.Principal{ClientID: uuid.NewString(), KeyID: uuid.NewString(), Features: []string{domain.FeatureVerify},
			Operators: principal.LegacyOperators()}}
	e.st = newFakeStore(func() time.Time { return e.now })
	e.svc = New(Config{NumberAttemptsPerHour: 3, SettleAfter: 30 * time.Second}, Deps{
		Store: e.st, Tx: e.st, Operators: ops, Sealer: e.sealer, Vault: keys.Vault, Ledger: e.ledger, Log: zaptest.NewLogger(t),
	})
	e.svc.now = func() time.Time { return e.now }
	return e
}

// blob opens a session of clientID through operator with number (none: "") and seals it.
func (e *env) blob(clientID, operator, number string, ttl time.Duration) string {
	e.t.Helper()
	id := uuid.NewString()
	e.st.sessions[id] = clientID
	b, err := e.sealer.Seal(seal.Claims{Number: number, ClientID: clientID, SessionID: id, OperatorID: operator,
		IssuedAt: e.now, ExpiresAt: e.now.Add(ttl)})
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *env) request(blob, number string) Request {
	return Request{MobileNumber: number, Blob: blob, OperatorID: "alpha", ServiceType: "HEADER_ENRICHMENT"}
}

const (
	number = "+971501234567"
	other  = "+971507654321"
)

// TestVerifyEnablement: a verify names an operator the client may use and a method of it the
// operator supports and the client enabled; anything else is FEATURE_NOT_ENABLED on the field
// at fault, charges nothing and keeps nothing.
func TestVerifyEnablement(t *testing.T) {
	g := func(op string, m ...string) principal.OperatorGrant {
		return principal.OperatorGrant{Operator: op, Methods: m}
	}
	own := func(gs ...principal.OperatorGrant) principal.Operators { return principal.Operators{Grants: gs} }
	tests := []struct {
		name        string
		ops         principal.Operators
		operator    string
		serviceType string
		wantField   string // "" for a verification
	}{
		{"every operator with header enrichment", principal.LegacyOperators(), "alpha", "HEADER_ENRICHMENT", ""},
		{"the operator enabled", own(g("alpha", "HEADER_ENRICHMENT")), "alpha", "HEADER_ENRICHMENT", ""},
		{"the method enabled for every operator", own(g("*", "HEADER_ENRICHMENT"), g("gamma", "NETWORK_API")), "gamma", "HEADER_ENRICHMENT", ""},
		{"another operator enabled", own(g("beta", "HEADER_ENRICHMENT")), "alpha", "HEADER_ENRICHMENT", "operatorId"},
		{"a method the operator lacks is no enablement", own(g("alpha", "NETWORK_API")), "alpha", "HEADER_ENRICHMENT", "operatorId"},
		{"the default set has no real operator", principal.DefaultOperators(), "alpha", "HEADER_ENRICHMENT", "operatorId"},
		{"none", own(), "alpha", "HEADER_ENRICHMENT", "operatorId"},
		{"an operator not in the registry", own(g("*", "HEADER_ENRICHMENT")), "delta", "HEADER_ENRICHMENT", "operatorId"},
		{"a method not enabled", own(g("gamma", "NETWORK_API")), "gamma", "HEADER_ENRICHMENT", "serviceType"},
		{"a method enabled for another operator", own(g("gamma", "HEADER_ENRICHMENT"), g("beta", "NETWORK_API")), "gamma", "NETWORK_API", "serviceType"},
		{"a method the operator lacks", own(g("*", "HEADER_ENRICHMENT", "NETWORK_API")), "alpha", "NETWORK_API", "serviceType"},
		{"an unknown method", principal.LegacyOperators(), "alpha", "SMS", "serviceType"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.client.Operators = tt.ops
			req := Request{MobileNumber: number, Blob: e.blob(e.client.ClientID, tt.operator, number, time.Minute),
				OperatorID: tt.operator, ServiceType: tt.serviceType}
			r, err := e.svc.Verify(context.Background(), e.client, req)
			if tt.wantField == "" {
				if err != nil || r.Verification.Status != domain.StatusVerified {
					t.Fatalf("Verify = %+v, %v; want VERIFIED", r.Verification, err)
				}
				return
			}
			if f := fault.Find(err, fault.FeatureNotEnabled); f == nil || f.Field != tt.wantField {
				t.Fatalf("Verify = %v, want FEATURE_NOT_ENABLED on %s", err, tt.wantField)
			}
			if len(e.ledger.refs) != 0 || len(e.st.verifs) != 0 {
				t.Fatalf("refused, yet %d debits and %d verifications", len(e.ledger.refs), len(e.st.verifs))
			}
		})
	}
}

func TestVerify(t *testing.T) {
	tests := []struct {
		name       string
		req        func(e *env) Request
		ledgerErr  error
		wantReason fault.Reason  // of the error; "" for none
		wantErr    error         // errors.Is, when set
		wantStatus domain.Status // of the kept verification; "" when none is kept
		wantDebits int
		// wantEvent is the verification.completed written: "status reason charged balanceAfter
		// number"; "" for none.
		wantEvent string
	}{
		{"forged blob", func(e *env) Request { return e.request("bm90IGEgYmxvYg", number) },
			nil, fault.InvalidArgument, nil, "", 0, ""},
		{"another client's blob", func(e *env) Request {
			return e.request(e.blob(uuid.NewString(), "alpha", number, time.Minute), number)
		}, nil, fault.InvalidArgument, nil, "", 0, ""},
		{"operator of another session", func(e *env) Request {
			r := e.request(e.blob(e.client.ClientID, "beta", number, time.Minute), number)
			return r
		}, nil, fault.InvalidArgument, nil, "", 0, ""},
		{"numbers match", func(e *env) Request {
			return e.request(e.blob(e.client.ClientID, "alpha", number, time.Minute), number)
		},
			nil, "", nil, domain.StatusVerified, 1, "VERIFIED NUMBER_MATCH 5 95 +97150*****67"},
		{"numbers differ: NOT_VERIFIED, charged", func(e *env) Request {
			return e.request(e.blob(e.client.ClientID, "alpha", number, time.Minute), other)
		}, nil, "", nil, domain.StatusNotVerified, 1, "NOT_VERIFIED NUMBER_MISMATCH 5 95 +97150*****21"},
		{"no network number: UNDETERMINED, free", func(e *env) Request { return e.request(e.blob(e.client.ClientID, "", "", time.Minute), number) },
			nil, "", nil, domain.StatusUndetermined, 0, "UNDETERMINED NO_NETWORK_IDENTITY 0 <nil> +97150*****67"},
		{"expired session: EXPIRED, free", func(e *env) Request {
			b := e.blob(e.client.ClientID, "alpha", number, time.Minute)
			e.now = e.now.Add(time.Minute)
			return e.request(b, number)
		}, nil, "", nil, domain.StatusExpired, 0, "EXPIRED SESSION_EXPIRED 0 <nil> +97150*****67"},
		{"debit refused: REJECTED", func(e *env) Request {
			return e.request(e.blob(e.client.ClientID, "alpha", number, time.Minute), number)
		},
			money.ErrInsufficientBalance, fault.InsufficientBalance, money.ErrInsufficientBalance, domain.StatusRejected, 1,
			"REJECTED INSUFFICIENT_BALANCE 0 <nil> +97150*****67"},
		{"debit unknown: stays PENDING", func(e *env) Request {
			return e.request(e.blob(e.client.ClientID, "alpha", number, time.Minute), number)
		}, money.Unknown("debit", errors.New("accounts is away"), true), fault.Unavailable, fault.ErrUnavailable, domain.StatusPending, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.ledger.err = tt.ledgerErr
			r, err := e.svc.Verify(context.Background(), e.client, tt.req(e))
			switch {
			case tt.wantReason == "" && err != nil:
				t.Fatalf("Verify: %v", err)
			case tt.wantReason != "" && fault.Find(err, tt.wantReason) == nil:
				t.Fatalf("Verify = %v, want a %s error", err, tt.wantReason)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("Verify = %v, want %v", err, tt.wantErr)
			}
			if len(e.ledger.refs) != tt.wantDebits {
				t.Errorf("%d debits, want %d", len(e.ledger.refs), tt.wantDebits)
			}
			var got []string
			for id, d := range e.st.completed(t) {
				if d.SessionID != e.st.byID(id).SessionID || d.ServiceType != "HEADER_ENRICHMENT" {
					t.Errorf("event %+v does not name the verification's session and service type", d)
				}
				got = append(got, fmt.Sprintf("%s %s %d %s %s", d.Status, deref(d.Reason), d.Charged, derefInt(d.BalanceAfter), d.MobileNumber))
			}
			if want := []string{tt.wantEvent}; tt.wantEvent == "" && len(got) != 0 || tt.wantEvent != "" && !slices.Equal(got, want) {
				t.Errorf("events %q, want %q", got, tt.wantEvent)
			}
			if tt.wantStatus == "" {
				if e.st.records != 0 {
					t.Errorf("a refused verify went to the store %d times: its blob's session is not to be touched", e.st.records)
				}
				return
			}
			if len(e.st.verifs) != 1 {
				t.Fatalf("kept %d verifications, want 1", len(e.st.verifs))
			}
			v := e.st.verifs[0]
			if u, err := uuid.Parse(v.ID); err != nil || u.Version() != 7 {
				t.Errorf("verification id %q is not a UUIDv7 (rowid): ids must sort in the order they are minted", v.ID)
			}
			if v.Status != tt.wantStatus {
				t.Errorf("kept status %s, want %s", v.Status, tt.wantStatus)
			}
			if tt.wantDebits > 0 && e.ledger.refs[0] != "verification:"+v.ID {
				t.Errorf("debit reference %q, want verification:%s", e.ledger.refs[0], v.ID)
			}
			if err == nil && (r.Verification.Status != tt.wantStatus || r.MobileNumber == "") {
				t.Errorf("answered %+v, want status %s", r, tt.wantStatus)
			}
			if tt.wantStatus == domain.StatusRejected && e.st.used[v.SessionID] {
				t.Error("a refused charge kept its session used: the client could not retry after a top-up")
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func derefInt(n *int64) string {
	if n == nil {
		return "<nil>"
	}
	return fmt.Sprint(*n)
}

// TestVerifyAgain checks what a second verify of one blob hears, and that each verification
// it leaves final has its one event, whatever was replayed.
func TestVerifyAgain(t *testing.T) {
	tests := []struct {
		name       string
		firstErr   error // the ledger's answer to the first verify
		second     string
		wantReason fault.Reason // "" for a success
		wantStatus domain.Status
		wantDebits []int // debits after the first and second call
	}{
		{"a used blob is ALREADY_USED", nil, number, fault.AlreadyUsed, domain.StatusVerified, []int{1, 1}},
		{"another number on a used blob is ALREADY_USED", nil, other, fault.AlreadyUsed, domain.StatusVerified, []int{1, 1}},
		{"after a refusal, the released blob verifies", money.ErrInsufficientBalance, number, "", domain.StatusVerified, []int{1, 2}},
		{"a retry resumes a PENDING verification", money.Unknown("debit", errors.New("away"), true), number, "", domain.StatusVerified, []int{1, 2}},
		{"another number does not resume a PENDING one", money.Unknown("debit", errors.New("away"), true), other, fault.AlreadyUsed, domain.StatusPending, []int{1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			b := e.blob(e.client.ClientID, "alpha", number, time.Minute)
			e.ledger.err = tt.firstErr
			if _, err := e.svc.Verify(ctx, e.client, e.request(b, number)); (err != nil) != (tt.firstErr != nil) {
				t.Fatalf("first verify: %v", err)
			}
			if len(e.ledger.refs) != tt.wantDebits[0] {
				t.Fatalf("%d debits after the first verify, want %d", len(e.ledger.refs), tt.wantDebits[0])
			}
			e.ledger.err = nil
			_, err := e.svc.Verify(ctx, e.client, e.request(b, tt.second))
			if tt.wantReason == "" && err != nil || tt.wantReason != "" && fault.Find(err, tt.wantReason) == nil {
				t.Fatalf("second verify = %v, want reason %q", err, tt.wantReason)
			}
			if len(e.ledger.refs) != tt.wantDebits[1] {
				t.Errorf("%d debits after the second verify, want %d", len(e.ledger.refs), tt.wantDebits[1])
			}
			var kept []domain.Status
			for _, v := range e.st.verifs {
				if v.Status != domain.StatusRejected {
					kept = append(kept, v.Status)
				}
			}
			if !slices.Equal(kept, []domain.Status{tt.wantStatus}) {
				t.Errorf("kept %v, want [%s]", kept, tt.wantStatus)
			}
			final := 0
			for _, v := range e.st.verifs {
				if v.Status != domain.StatusPending {
					final++
				}
			}
			if n := len(e.st.completed(t)); n != final {
				t.Errorf("%d verification.completed events for %d final verifications", n, final)
			}
			if refs := slices.Compact(slices.Clone(e.ledger.refs)); tt.firstErr != nil && errors.Is(tt.firstErr, fault.ErrUnavailable) && len(refs) != 1 {
				t.Errorf("a resumed verification debited %v, want one reference", e.ledger.refs)
			}
		})
	}
}

// TestReconcile checks that verifications left PENDING are settled later, each under the
// reference of its first debit, once SettleAfter has passed; a round stops at the first debit
// that finds accounts away.
func TestReconcile(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.ledger.err = money.Unknown("debit", errors.New("accounts is away"), true)
	for _, n := range []string{number, other} {
		if _, err := e.svc.Verify(ctx, e.client, e.request(e.blob(e.client.ClientID, "alpha", number, time.Minute), n)); !errors.Is(err, fault.ErrUnavailable) {
			t.Fatalf("Verify = %v, want unavailable", err)
		}
	}
	steps := []struct {
		name       string
		after      time.Duration
		ledgerErr  error
		wantN      int
		wantStatus [2]domain.Status
		wantDebits int
	}{
		{"too young to settle", 10 * time.Second, nil, 0, [2]domain.Status{domain.StatusPending, domain.StatusPending}, 2},
		{"accounts still away: the round stops", 30 * time.Second, money.Unknown("debit", errors.New("away"), true), 0,
			[2]domain.Status{domain.StatusPending, domain.StatusPending}, 3},
		{"settled", 0, nil, 2, [2]domain.Status{domain.StatusVerified, domain.StatusNotVerified}, 5},
		{"nothing left", time.Minute, nil, 0, [2]domain.Status{domain.StatusVerified, domain.StatusNotVerified}, 5},
	}
	for _, s := range steps {
		e.now = e.now.Add(s.after)
		e.ledger.err = s.ledgerErr
		n, err := e.svc.ReconcileOnce(ctx)
		if err != nil || n != s.wantN {
			t.Fatalf("%s: ReconcileOnce = (%d, %v), want %d", s.name, n, err, s.wantN)
		}
		if got := [2]domain.Status{e.st.verifs[0].Status, e.st.verifs[1].Status}; got != s.wantStatus || len(e.ledger.refs) != s.wantDebits {
			t.Fatalf("%s: statuses %v after %d debits, want %v after %d", s.name, got, len(e.ledger.refs), s.wantStatus, s.wantDebits)
		}
		settled := e.st.completed(t)
		for _, v := range e.st.verifs {
			if d, ok := settled[v.ID]; ok != (v.Status != domain.StatusPending) || ok && (d.Status != string(v.Status) || d.Charged != 5 || d.MobileNumber == "") {
				t.Fatalf("%s: verification %s %s has event %+v (%v)", s.name, v.ID, v.Status, d, ok)
			}
		}
	}
	want := []string{"verification:" + e.st.verifs[0].ID, "verification:" + e.st.verifs[1].ID}
	if refs := slices.Compact(slices.Sorted(slices.Values(e.ledger.refs))); !slices.Equal(refs, slices.Sorted(slices.Values(want))) {
		t.Errorf("debit references %v, want only %v", e.ledger.refs, want)
	}
	if v := e.st.verifs[0]; v.Charged != 5 || v.BalanceAfter == nil || *v.BalanceAfter != 95 {
		t.Errorf("settled charge %d, balance %v; want 5, 95", v.Charged, v.BalanceAfter)
	}
}

// TestNumberLimit checks the per-client limit on verifications of one number.
func TestNumberLimit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i := range 3 {
		if _, err := e.svc.Verify(ctx, e.client, e.request(e.blob(e.client.ClientID, "", "", time.Minute), number)); err != nil {
			t.Fatalf("verify %d: %v", i, err)
		}
	}
	_, err := e.svc.Verify(ctx, e.client, e.request(e.blob(e.client.ClientID, "", "", time.Minute), number))
	if fault.Find(err, fault.RateLimited) == nil {
		t.Fatalf("4th verify of a number in an hour = %v, want RATE_LIMITED", err)
	}
	stranger := principal.Principal{ClientID: uuid.NewString(), Features: []string{domain.FeatureVerify}, Operators: principal.LegacyOperators()}
	if _, err := e.svc.Verify(ctx, stranger, e.request(e.blob(stranger.ClientID, "", "", time.Minute), number)); err != nil {
		t.Fatalf("another client's verify of the number: %v, want it counted apart", err)
	}
	e.now = e.now.Add(time.Hour + time.Second)
	if _, err := e.svc.Verify(ctx, e.client, e.request(e.blob(e.client.ClientID, "", "", time.Minute), number)); err != nil {
		t.Fatalf("verify over an hour later: %v", err)
	}
}

// batchStore is the fake store seen through WithBatchStore: it counts what reaches it.
type batchStore struct {
	*fakeStore
	records, settles, txs int
}

func (b *batchStore) RecordVerifications(ctx context.Context, vs []domain.Verification, limit domain.NumberLimit, counted []bool) ([]domain.Recorded, error) {
	b.records++
	return b.fakeStore.RecordVerifications(ctx, vs, limit, counted)
}

func (b *batchStore) SettleVerifications(ctx context.Context, ss []domain.Settlement) ([]bool, error) {
	b.settles++
	return b.fakeStore.SettleVerifications(ctx, ss)
}

func (b *batchStore) InTx(ctx context.Context, fn func(ctx context.Context, st Store) error) error {
	b.txs++
	return fn(ctx, b)
}

// TestBatchStore: the request path's record and settle batches run on the batch store (its own
// pool in the app), a charged outcome's and a free one's alike.
func TestBatchStore(t *testing.T) {
	for _, tt := range []struct {
		name                 string
		operator, network    string
		wantRecords, wantTxs int
		wantSettles          int
	}{
		{name: "charged: record, then settle", operator: "alpha", network: number, wantRecords: 1, wantSettles: 1},
		{name: "free: recorded final with its event, in a transaction", wantRecords: 1, wantTxs: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			batch := &batchStore{fakeStore: e.st}
			e.svc.WithBatchStore(batch, batch)
			if _, err := e.svc.Verify(context.Background(), e.client, e.request(e.blob(e.client.ClientID, tt.operator, tt.network, time.Minute), number)); err != nil {
				t.Fatal(err)
			}
			if batch.records != tt.wantRecords || batch.settles != tt.wantSettles || batch.txs != tt.wantTxs {
				t.Errorf("batch store saw %d records, %d settles, %d transactions; want %d, %d, %d",
					batch.records, batch.settles, batch.txs, tt.wantRecords, tt.wantSettles, tt.wantTxs)
			}
		})
	}
}
