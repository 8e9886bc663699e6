package verify_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/testkit/sandboxcamara"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/network"
	"github.com/mnvhq/mnv/services/verification/internal/operatorapi"
	"github.com/mnvhq/mnv/services/verification/internal/sessions"
	"github.com/mnvhq/mnv/services/verification/internal/store"
	"github.com/mnvhq/mnv/services/verification/internal/verificationtest"
	"github.com/mnvhq/mnv/services/verification/internal/verify"
)

const callback = "https://mnv.example/v1/api/sdk/session/callback"

// toppedUpLedger stands in for accounts' debit: it refuses for want of balance until topUp,
// then charges each reference once.
type toppedUpLedger struct {
	mu      sync.Mutex
	funded  bool
	charged map[string]bool
}

func (l *toppedUpLedger) topUp() { l.mu.Lock(); l.funded = true; l.mu.Unlock() }

func (l *toppedUpLedger) Debit(_ context.Context, c money.Charge) (money.Charged, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.funded {
		return money.Charged{}, money.ErrInsufficientBalance
	}
	if l.charged == nil {
		l.charged = map[string]bool{}
	}
	replayed := l.charged[c.Reference]
	l.charged[c.Reference] = true
	return money.Charged{Amount: 1, BalanceAfter: 9, Replayed: replayed}, nil
}

func (l *toppedUpLedger) Refund(context.Context, money.Refund) (money.Refunded, error) {
	return money.Refunded{}, errors.New("not used")
}

func (l *toppedUpLedger) Balance(context.Context, string) (int64, error) { return 0, nil }

// networkEnv is a NETWORK_API operator (the fake CAMARA operator) in a registry, and the
// sessions and verify services over the real schema.
type networkEnv struct {
	fake     *sandboxcamara.Fake
	pool     *pgxpool.Pool
	sessions *sessions.Service
	verifier *verify.Service
	ledger   *toppedUpLedger
	client   principal.Principal
}

func newNetworkEnv(t *testing.T, sessionTTL time.Duration) *networkEnv {
	t.Helper()
	fake, err := sandboxcamara.Start("127.0.0.1:0", sandboxcamara.Options{Clients: []sandboxcamara.Client{{ID: "mnv", Secret: "s3cret", RedirectURIs: []string{callback}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	ops := verificationtest.OperatorsFile(t, fmt.Sprintf(`operators:
  - id: op
    name: CAMARA operator
    country: GB
    methods: [NETWORK_API]
    camara: {discoveryUrl: %q, apiRoot: %q, clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: secret.txt}
`, fake.DiscoveryURL(), fake.URL), "s3cret")
	clients, err := operatorapi.NewClients(ops.List(), callback, &http.Client{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	pool := verificationtest.Database(t, 4)
	q, err := jobs.New(pool, jobs.Options{Schema: "verification"})
	if err != nil {
		t.Fatal(err)
	}
	stores := pg.NewStores(pool, func(db pg.DB) verify.Store { return store.New(db).WithJobs(q) })

	log := zaptest.NewLogger(t)
	keys := verificationtest.NewKeys(t)
	e := &networkEnv{fake: fake, pool: pool, ledger: &toppedUpLedger{}, client: principal.Principal{
		ClientID: uuid.NewString(), Features: []string{domain.FeatureVerify},
		Operators: principal.Operators{Grants: []principal.OperatorGrant{{Operator: "op", Methods: []string{"NETWORK_API"}}}},
	}}
	e.sessions = sessions.New(store.New(pool), network.NewIdentifier(ops, log), keys.Sealer, sessionTTL).WithNetworkAPI(store.New(pool), clients, log)
	e.verifier = verify.New(verify.Config{}, verify.Deps{
		Store: stores.Pool(), Tx: stores, Operators: ops, Sealer: keys.Sealer, Vault: keys.Vault, Ledger: e.ledger, Log: log,
	}).
		WithNetworkAPI(store.New(pool), clients, 5*time.Second)
	return e
}

// blob runs a NETWORK_API session: opened, its authorization followed by a device on line, the
// operator's redirect brought back; it returns the sealed session.
func (e *networkEnv) blob(t *testing.T, line string) string {
	t.Helper()
	ctx := context.Background()
	op := "op"
	c, err := e.sessions.Create(ctx, e.client, sessions.Request{Platform: "ANDROID", OperatorID: &op}, network.Request{Addr: netip.MustParseAddr("203.0.113.9")})
	if err != nil || c.AuthorizationURL == "" {
		t.Fatalf("session: %+v %v", c, err)
	}
	req, _ := http.NewRequest(http.MethodGet, c.AuthorizationURL, nil)
	req.Header.Set(sandboxcamara.DefaultMSISDNHeader, line)
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	claim, err := e.sessions.ClaimAuthorization(ctx, sessions.Authorization{State: back.Query().Get("state"), Code: back.Query().Get("code")})
	if err != nil {
		t.Fatalf("callback: %v", err)
	}
	got, err := e.sessions.FinishAuthorization(ctx, store.New(e.pool), claim)
	if err != nil || got.Status != domain.Captured || got.Blob == "" {
		t.Fatalf("callback: %+v %v", got, err)
	}
	return got.Blob
}

func (e *networkEnv) verify(number, blob string) (verify.Result, error) {
	return e.verifier.Verify(context.Background(), e.client, verify.Request{MobileNumber: number, Blob: blob, OperatorID: "op", ServiceType: "NETWORK_API"})
}

// TestRefusedChargeKeepsTheOperatorsAnswer: a NETWORK_API verify whose charge is refused (402)
// has spent the operator's single-use token. The retry of the same session and number after a
// top-up gets the operator's answer, charged once, without calling the operator again; a retry
// with another number, or after the session ended, gets nothing from that answer.
func TestRefusedChargeKeepsTheOperatorsAnswer(t *testing.T) {
	const line, stranger = "+971501234567", "+971507654321"
	tests := []struct {
		name          string
		sessionTTL    time.Duration
		first, retry  string // the numbers verified: refused, then after the top-up
		outlive       bool   // the retry comes after the session's end
		wantOutcome   domain.Status
		wantReason    string
		wantCharged   int64
		wantCallsMore int // calls to the operator's /verify by the retry
	}{
		{"the line, retried: VERIFIED from the kept answer", time.Minute, line, line, false, domain.StatusVerified, domain.ReasonMatch, 1, 0},
		{"another number, retried: NOT_VERIFIED from the kept answer", time.Minute, stranger, stranger, false, domain.StatusNotVerified, domain.ReasonMismatch, 1, 0},
		{"a different number on retry: the operator is asked, the token is spent", time.Minute, line, stranger, false, domain.StatusExpired, domain.ReasonTokenExpired, 0, 1},
		{"the retry after the session ended: EXPIRED, no call", 2 * time.Second, line, line, true, domain.StatusExpired, domain.ReasonSessionExpired, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newNetworkEnv(t, tt.sessionTTL)
			blob := e.blob(t, line)
			calls := e.fake.APICalls()
			if _, err := e.verify(tt.first, blob); !errors.Is(err, money.ErrInsufficientBalance) {
				t.Fatalf("verify without balance: %v, want the 402", err)
			}
			if n := e.fake.APICalls() - calls; n != 1 {
				t.Fatalf("the operator was called %d times, want 1", n)
			}
			var rejected int
			if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM verification.verifications WHERE status = 'REJECTED'`).Scan(&rejected); err != nil || rejected != 1 {
				t.Fatalf("REJECTED rows %d %v", rejected, err)
			}
			e.ledger.topUp()
			if tt.outlive {
				time.Sleep(tt.sessionTTL)
			}
			calls = e.fake.APICalls()
			r, err := e.verify(tt.retry, blob)
			if err != nil {
				t.Fatalf("retry: %v", err)
			}
			v := r.Verification
			if v.Status != tt.wantOutcome || v.Reason != tt.wantReason || v.Charged != tt.wantCharged {
				t.Fatalf("retry: %s/%s charged %d, want %s/%s charged %d", v.Status, v.Reason, v.Charged, tt.wantOutcome, tt.wantReason, tt.wantCharged)
			}
			if n := e.fake.APICalls() - calls; n != tt.wantCallsMore {
				t.Fatalf("the retry called the operator %d times, want %d", n, tt.wantCallsMore)
			}
			// The session is used now: a third verify gets nothing more.
			if _, err := e.verify(tt.retry, blob); fault.Find(err, fault.AlreadyUsed) == nil {
				t.Fatalf("third verify: %v, want ALREADY_USED", err)
			}
			if len(e.ledger.charged) != int(tt.wantCharged) {
				t.Fatalf("%d charges, want %d", len(e.ledger.charged), tt.wantCharged)
			}
		})
	}
}
