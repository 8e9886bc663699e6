package browser

import (
	"context"
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/network"
	"github.com/mnvhq/mnv/services/verification/internal/seal"
	"github.com/mnvhq/mnv/services/verification/internal/sessions"
	"github.com/mnvhq/mnv/services/verification/internal/stuckplus"
	"github.com/mnvhq/mnv/services/verification/internal/verificationtest"
)

// fakeStore keeps transactions, sessions and stuck-plus sessions in memory.
type fakeStore struct {
	txs       map[string]domain.Transaction
	sessions  []domain.Session
	stuckPlus []domain.StuckPlusSession
	locks     int // LockTransaction calls
	events    []events.Event
}

func (f *fakeStore) InTx(ctx context.Context, fn func(ctx context.Context, st Store) error) error {
	return fn(ctx, f)
}

func (f *fakeStore) InsertSession(_ context.Context, s domain.Session) error {
	f.sessions = append(f.sessions, s)
	return nil
}

func (f *fakeStore) InsertStuckPlusSession(_ context.Context, s domain.StuckPlusSession, _ []byte) error {
	f.stuckPlus = append(f.stuckPlus, s)
	return nil
}

func (f *fakeStore) Emit(_ context.Context, evs ...events.Event) error {
	f.events = append(f.events, evs...)
	return nil
}

func (f *fakeStore) InsertTransaction(_ context.Context, t domain.Transaction) (domain.Transaction, error) {
	f.txs[t.ID] = t
	return t, nil
}

func (f *fakeStore) GetTransaction(_ context.Context, clientID, id string) (domain.Transaction, error) {
	t, ok := f.txs[id]
	if !ok || t.ClientID != clientID {
		return domain.Transaction{}, fault.ErrNotFound
	}
	return t, nil
}

func (f *fakeStore) TransactionClient(_ context.Context, id string) (string, error) {
	t, ok := f.txs[id]
	if !ok {
		return "", fault.ErrNotFound
	}
	return t.ClientID, nil
}

func (f *fakeStore) LockTransaction(_ context.Context, clientID, id string) (domain.Transaction, error) {
	f.locks++
	t, ok := f.txs[id]
	if !ok || t.ClientID != clientID {
		return domain.Transaction{}, fault.ErrNotFound
	}
	return t, nil
}

func (f *fakeStore) CompleteCapture(_ context.Context, t domain.Transaction) error {
	f.txs[t.ID] = t
	return nil
}

func (f *fakeStore) LockSessionTransaction(_ context.Context, clientID, sessionID string) (domain.Transaction, error) {
	for _, t := range f.txs {
		if t.SessionID != nil && *t.SessionID == sessionID && t.ClientID == clientID {
			return t, nil
		}
	}
	return domain.Transaction{}, fault.ErrNotFound
}

// The NETWORK_API authorizations are TestNetworkAPICapture's, against the real store.
func (f *fakeStore) GetSession(context.Context, string, string) (domain.Session, error) {
	return domain.Session{}, fault.ErrNotFound
}

func (f *fakeStore) ClaimAuthorization(context.Context, []byte, []string) (domain.Session, error) {
	return domain.Session{}, fault.ErrNotFound
}

func (f *fakeStore) CompleteAuthorization(context.Context, string, string, domain.Status, []byte, *time.Time) error {
	return errors.New("no NETWORK_API session here")
}

// origins allows each client the origins listed.
type origins map[string][]string

func (o origins) AllowsWebOrigin(_ context.Context, clientID, origin string) (bool, error) {
	return slices.Contains(o[clientID], origin), nil
}

const registry = `operators:
  - id: alpha
    name: Alpha
    country: AE
    mccMnc: ["424-02"]
    methods: [HEADER_ENRICHMENT]
    headerEnrichment:
      trustedRanges: ["10.0.0.0/8"]
      numberHeader: X-Alpha-Msisdn
`

type env struct {
	svc    *Service
	st     *fakeStore
	sealer *seal.Sealer
	vault  *phone.Vault
	now    time.Time
	client principal.Principal
}

func newEnv(t *testing.T) *env {
	t.Helper()
	keys, ops := verificationtest.NewKeys(t), verificationtest.Operators(t, registry)
	e := &env{st: &fakeStore{txs: map[string]domain.Transaction{}}, sealer: keys.Sealer,
		vault: keys.Vault, now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
		client: principal.Principal{ClientID: uuid.NewString(), Features: []string{domain.FeatureVerify, domain.FeatureStuckPlus},
			Operators: principal.LegacyOperators()}}
	net := network.NewIdentifier(ops, zaptest.NewLogger(t))
	sess := sessions.New(e.st, net, e.sealer, 5*time.Minute)
	e.svc = New(e.st, e.st, net, sess, stuckplus.New(nil, nil, e.vault, nil, false),
		origins{e.client.ClientID: {"https://shop.example"}}, 10*time.Minute)
	e.svc.now = func() time.Time { return e.now }
	return e
}

// fromAlpha is a page on the client's origin, in a browser on alpha's network.
var fromAlpha = network.Request{Addr: netip.MustParseAddr("10.0.0.9"), Origin: "https://shop.example",
	Headers: map[string]string{"X-Alpha-Msisdn": "+971501234567"}}

func TestCreateTransaction(t *testing.T) {
	tests := []struct {
		name       string
		features   []string
		code, meta string
		wantReason fault.Reason
	}{
		{"VERIFY", []string{domain.FeatureVerify}, "VERIFY", "order-1", ""},
		{"STUCK_PLUS", []string{domain.FeatureStuckPlus}, "STUCK_PLUS", "lead-1", ""},
		{"VERIFY not enabled", []string{domain.FeatureStuckPlus}, "VERIFY", "order-1", fault.FeatureNotEnabled},
		{"STUCK_PLUS not enabled", []string{domain.FeatureVerify}, "STUCK_PLUS", "lead-1", fault.FeatureNotEnabled},
		{"unknown product", []string{domain.FeatureVerify}, "CONNECT", "x", fault.InvalidArgument},
		{"empty metadata id", []string{domain.FeatureVerify}, "VERIFY", "", fault.InvalidArgument},
		{"metadata id too long", []string{domain.FeatureVerify}, "VERIFY", strings.Repeat("m", 129), fault.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			p := e.client
			p.Features = tt.features
			tr, err := e.svc.CreateTransaction(context.Background(), p, tt.code, tt.meta)
			if tt.wantReason != "" {
				if fault.Find(err, tt.wantReason) == nil || len(e.st.txs) != 0 {
					t.Fatalf("CreateTransaction = %v, %d stored; want a %s error, none stored", err, len(e.st.txs), tt.wantReason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tr.Status != domain.TransactionPending || !tr.ExpiresAt.Equal(e.now.Add(10*time.Minute)) || !slices.Equal(tr.Features, tt.features) {
				t.Errorf("created %+v, want PENDING for the TTL, with the client's features", tr)
			}
		})
	}
}

func TestCaptureTransaction(t *testing.T) {
	tests := []struct {
		name    string
		code    string
		prepare func(e *env, id string) (string, network.Request) // the id to capture, from where
		wantErr error                                             // nil: captured
		want    domain.Status                                     // the transaction's status after
	}{
		{"VERIFY captured", "VERIFY", func(e *env, id string) (string, network.Request) { return id, fromAlpha }, nil, domain.Captured},
		{"STUCK_PLUS captured", "STUCK_PLUS", func(e *env, id string) (string, network.Request) { return id, fromAlpha }, nil, domain.Captured},
		{"no number: captured without identity", "VERIFY", func(e *env, id string) (string, network.Request) {
			n := fromAlpha
			n.Addr = netip.MustParseAddr("203.0.113.1")
			return id, n
		}, nil, domain.NoNetworkIdentity},
		{"expired", "VERIFY", func(e *env, id string) (string, network.Request) {
			e.now = e.now.Add(10 * time.Minute)
			return id, fromAlpha
		}, nil, domain.TransactionExpired},
		{"a foreign origin", "VERIFY", func(e *env, id string) (string, network.Request) {
			n := fromAlpha
			n.Origin = "https://evil.example"
			return id, n
		}, domain.ErrOriginNotAllowed, domain.TransactionPending},
		{"no origin", "VERIFY", func(e *env, id string) (string, network.Request) {
			n := fromAlpha
			n.Origin = ""
			return id, n
		}, domain.ErrOriginNotAllowed, domain.TransactionPending},
		{"captured twice", "VERIFY", func(e *env, id string) (string, network.Request) {
			if _, err := e.svc.CaptureTransaction(context.Background(), id, CaptureRequest{}, fromAlpha); err != nil {
				panic(err)
			}
			return id, fromAlpha
		}, domain.ErrAlreadyUsed, domain.Captured},
		{"unknown transaction", "VERIFY", func(e *env, id string) (string, network.Request) { return uuid.NewString(), fromAlpha },
			fault.ErrNotFound, domain.TransactionPending},
		{"not an id", "VERIFY", func(e *env, id string) (string, network.Request) { return "../" + id, fromAlpha },
			fault.ErrNotFound, domain.TransactionPending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			tr, err := e.svc.CreateTransaction(ctx, e.client, tt.code, "ref")
			if err != nil {
				t.Fatal(err)
			}
			id, n := tt.prepare(e, tr.ID)
			sessionsBefore, stuckBefore := len(e.st.sessions), len(e.st.stuckPlus)
			got, err := e.svc.CaptureTransaction(ctx, id, CaptureRequest{}, n)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("CaptureTransaction = %v, want %v", err, tt.wantErr)
				}
				if len(e.st.sessions) != sessionsBefore || len(e.st.stuckPlus) != stuckBefore || len(e.st.events) != 0 {
					t.Error("a refused capture opened a session, kept a number or wrote an event")
				}
				if errors.Is(tt.wantErr, domain.ErrOriginNotAllowed) && e.st.locks != 0 {
					t.Error("a refused origin locked the transaction")
				}
			} else if err != nil {
				t.Fatalf("CaptureTransaction: %v", err)
			} else if got.Status != tt.want {
				t.Errorf("answered %s, want %s", got.Status, tt.want)
			}
			if stored := e.st.txs[tr.ID]; stored.Status != tt.want && !(tt.want == domain.TransactionExpired && stored.Status == domain.TransactionPending) {
				t.Errorf("stored status %s, want %s", stored.Status, tt.want)
			}
			if tt.wantErr != nil || tt.want == domain.TransactionExpired {
				return
			}
			switch tt.code {
			case "VERIFY":
				if len(e.st.events) != 0 {
					t.Errorf("a VERIFY capture wrote events %+v", e.st.events)
				}
				if len(e.st.sessions) != 1 || got.Blob == nil || got.SessionID == nil || *got.SessionID != e.st.sessions[0].ID || e.st.sessions[0].Source != "WEB" {
					t.Fatalf("captured %+v with sessions %+v, want one WEB session and its blob", got, e.st.sessions)
				}
				claims, err := e.sealer.Open(*got.Blob)
				if err != nil || claims.ClientID != e.client.ClientID || (claims.Number != "") != (tt.want == domain.Captured) {
					t.Errorf("sealed %+v (%v)", claims, err)
				}
			case "STUCK_PLUS":
				if len(e.st.stuckPlus) != 1 || got.StuckPlusSessionID == nil || *got.StuckPlusSessionID != e.st.stuckPlus[0].ID || len(e.st.sessions) != 0 {
					t.Fatalf("captured %+v with %+v, want one stuck-plus session and no verify session", got, e.st.stuckPlus)
				}
				sp := e.st.stuckPlus[0]
				if n, err := e.vault.Open(sp.NumberSealed, "stuck_plus_sessions", sp.ID); err != nil || n != "+971501234567" || sp.OperatorID != "alpha" || sp.TransactionID != tr.ID {
					t.Errorf("kept %+v (%q, %v)", sp, n, err)
				}
				if len(e.st.events) != 1 || e.st.events[0].Type != events.StuckPlusCaptured || e.st.events[0].ClientID != e.client.ClientID ||
					!strings.Contains(string(e.st.events[0].Data), `"sessionId":"`+sp.ID+`"`) || strings.Contains(string(e.st.events[0].Data), "501234567") {
					t.Errorf("events %+v, want one stuck_plus.captured of the session, its number masked", e.st.events)
				}
			}
		})
	}
}

// TestCaptureUsesTheFlowsEnablement: a capture has no credential, so it takes the operators
// the client had enabled when the flow started: an operator it did not enable (or whose header
// enrichment it did not enable) shows nothing of the network.
func TestCaptureUsesTheFlowsEnablement(t *testing.T) {
	g := func(op string, m ...string) principal.OperatorGrant {
		return principal.OperatorGrant{Operator: op, Methods: m}
	}
	tests := []struct {
		name   string
		code   string
		ops    principal.Operators
		wantOp string // "" for none
		number bool
	}{
		{"VERIFY, alpha enabled", "VERIFY", principal.Operators{Grants: []principal.OperatorGrant{g("alpha", "HEADER_ENRICHMENT")}}, "alpha", true},
		{"VERIFY, another operator enabled", "VERIFY", principal.Operators{Grants: []principal.OperatorGrant{g("beta", "HEADER_ENRICHMENT")}}, "", false},
		{"VERIFY, the default set", "VERIFY", principal.DefaultOperators(), "", false},
		{"VERIFY, none", "VERIFY", principal.Operators{}, "", false},
		{"STUCK_PLUS, alpha enabled", "STUCK_PLUS", principal.Operators{Grants: []principal.OperatorGrant{g("*", "HEADER_ENRICHMENT")}}, "alpha", true},
		{"STUCK_PLUS, none", "STUCK_PLUS", principal.Operators{}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			e.client.Operators = tt.ops
			tr, err := e.svc.CreateTransaction(ctx, e.client, tt.code, "ref")
			if err != nil {
				t.Fatal(err)
			}
			if stored := e.st.txs[tr.ID]; !reflect.DeepEqual(stored.Operators, tt.ops) {
				t.Fatalf("stored operators %+v, want the client's %+v", stored.Operators, tt.ops)
			}
			// What the client enables later is not the flow's.
			e.client.Operators = principal.LegacyOperators()
			got, err := e.svc.CaptureTransaction(ctx, tr.ID, CaptureRequest{}, fromAlpha)
			if err != nil {
				t.Fatal(err)
			}
			wantStatus := domain.NoNetworkIdentity
			if tt.number {
				wantStatus = domain.Captured
			}
			if got.Status != wantStatus || deref(got.OperatorID) != tt.wantOp {
				t.Fatalf("captured %s through %q, want %s through %q", got.Status, deref(got.OperatorID), wantStatus, tt.wantOp)
			}
			if tt.code == "STUCK_PLUS" && (len(e.st.stuckPlus) == 1) != tt.number {
				t.Fatalf("kept %d stuck-plus numbers", len(e.st.stuckPlus))
			}
		})
	}
}

func TestGetAndOrigins(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tr, err := e.svc.CreateTransaction(ctx, e.client, "VERIFY", "ref")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id, origin string
		want       bool
	}{
		{tr.ID, "https://shop.example", true},
		{tr.ID, "https://evil.example", false},
		{tr.ID, "", false},
		{uuid.NewString(), "https://shop.example", false},
		{"nope", "https://shop.example", false},
	} {
		if ok, err := e.svc.OriginAllowed(ctx, c.id, c.origin); ok != c.want || err != nil {
			t.Errorf("OriginAllowed(%s, %q) = %v, %v; want %v", c.id, c.origin, ok, err, c.want)
		}
	}
	if _, err := e.svc.GetTransaction(ctx, uuid.NewString(), tr.ID); !errors.Is(err, fault.ErrNotFound) {
		t.Errorf("another client's transaction: %v, want not found", err)
	}
	e.now = e.now.Add(10 * time.Minute)
	if got, err := e.svc.GetTransaction(ctx, e.client.ClientID, tr.ID); err != nil || got.Status != domain.TransactionExpired {
		t.Errorf("a transaction past its TTL reads %s (%v), want EXPIRED", got.Status, err)
	}
}
