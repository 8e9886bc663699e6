package browser

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/testkit/sandboxcamara"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/network"
	"github.com/mnvhq/mnv/services/verification/internal/operatorapi"
	"github.com/mnvhq/mnv/services/verification/internal/seal"
	"github.com/mnvhq/mnv/services/verification/internal/sessions"
	"github.com/mnvhq/mnv/services/verification/internal/store"
	"github.com/mnvhq/mnv/services/verification/internal/stuckplus"
	"github.com/mnvhq/mnv/services/verification/internal/verificationtest"
)

// callbackURL is mnv's redirect URI at the operator, as the device follows it.
const callbackURL = "https://mnv.example/v1/api/sdk/session/callback"

// Two web sites: the flow's client's, and another client's.
const (
	shopOrigin  = "https://shop.example"
	otherOrigin = "https://other.example"
)

// netEnv is the browser flow against a real database and a fake CAMARA operator (an outside
// system), gamma, which identifies the line through its network API only.
type netEnv struct {
	svc      *Service
	st       *store.Store
	pool     *pgxpool.Pool
	sealer   *seal.Sealer
	operator *sandboxcamara.Fake
	// tokenDown makes the operator's token endpoint answer 503.
	tokenDown atomic.Bool
	now       time.Time
	client    principal.Principal // shop.example's
	other     principal.Principal // other.example's
}

func newNetEnv(t *testing.T) *netEnv {
	t.Helper()
	pool := verificationtest.Database(t, 4)
	queue, err := jobs.New(pool, jobs.Options{Schema: "verification"})
	if err != nil {
		t.Fatal(err)
	}
	e := &netEnv{st: store.New(pool), pool: pool, now: time.Now()}

	// The operator, behind a switch that can take its token endpoint down.
	var handler http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" && e.tokenDown.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	const secret = "operator-secret-of-mnv"
	e.operator = sandboxcamara.New(srv.URL, sandboxcamara.Options{Clients: []sandboxcamara.Client{{ID: "mnv", Secret: secret, RedirectURIs: []string{callbackURL}}}})
	handler = e.operator.Handler()

	ops := verificationtest.OperatorsFile(t, fmt.Sprintf(`operators:
  - id: alpha
    name: Alpha
    country: AE
    methods: [HEADER_ENRICHMENT]
    headerEnrichment:
      trustedRanges: ["10.0.0.0/8"]
      numberHeader: X-Alpha-Msisdn
  - id: gamma
    name: Gamma
    country: AE
    methods: [NETWORK_API]
    camara: {discoveryUrl: %q, apiRoot: %q, clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: secret.txt}
`, e.operator.DiscoveryURL(), e.operator.URL), secret)
	clients, err := operatorapi.NewClients(ops.List(), callbackURL, &http.Client{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}

	grants := principal.Operators{Grants: []principal.OperatorGrant{
		{Operator: "alpha", Methods: []string{"HEADER_ENRICHMENT"}}, {Operator: "gamma", Methods: []string{"NETWORK_API"}},
	}}
	features := []string{domain.FeatureVerify, domain.FeatureStuckPlus}
	e.client = principal.Principal{ClientID: uuid.NewString(), Features: features, Operators: grants}
	e.other = principal.Principal{ClientID: uuid.NewString(), Features: features, Operators: grants}

	keys, log := verificationtest.NewKeys(t), zaptest.NewLogger(t)
	e.sealer = keys.Sealer
	net := network.NewIdentifier(ops, log)
	sess := sessions.New(e.st, net, keys.Sealer, 5*time.Minute).WithNetworkAPI(e.st, clients, log)
	stores := pg.NewStores(pool, func(db pg.DB) Store { return store.New(db).WithJobs(queue) })
	e.svc = New(stores.Pool(), stores, net, sess, stuckplus.New(nil, nil, keys.Vault, nil, false),
		origins{e.client.ClientID: {shopOrigin}, e.other.ClientID: {otherOrigin}}, 10*time.Minute)
	e.svc.now = func() time.Time { return e.now }
	return e
}

// page is a page of origin, in a browser on no operator's header-enrichment network.
func page(origin string) network.Request {
	return network.Request{Addr: netip.MustParseAddr("203.0.113.7"), Origin: origin, Headers: map[string]string{}}
}

func gamma() *string { s := "gamma"; return &s }

// pkce is a verifier a page keeps, and its S256 challenge.
type pkce struct{ verifier, challenge string }

func newPKCE() pkce {
	v := crypto.NewSecret()
	sum := sha256.Sum256([]byte(v))
	return pkce{verifier: v, challenge: base64.RawURLEncoding.EncodeToString(sum[:])}
}

// flow is a capture of the flow tx waiting for the operator, as its page holds it.
type flow struct {
	tx   string
	c    Capture
	keys pkce
}

// open starts a flow of p's and captures it through gamma from p's page.
func (e *netEnv) open(t *testing.T, p principal.Principal, origin, code string) flow {
	t.Helper()
	ctx := context.Background()
	tr, err := e.svc.CreateTransaction(ctx, p, code, "order-7")
	if err != nil {
		t.Fatal(err)
	}
	keys, back := newPKCE(), origin+"/checkout/step-2#top"
	c, err := e.svc.CaptureTransaction(ctx, tr.ID, CaptureRequest{OperatorID: gamma(), ReturnURL: &back, CodeChallenge: &keys.challenge}, page(origin))
	if err != nil {
		t.Fatalf("capture: %v", err)
	}
	return flow{tx: tr.ID, c: c, keys: keys}
}

// follow is the device on line msisdn ("" off the mobile network) following the authorization
// URL: it returns what the operator sent it back to mnv's callback with.
func (e *netEnv) follow(t *testing.T, authorizationURL, msisdn string) sessions.Authorization {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, authorizationURL, nil)
	if msisdn != "" {
		req.Header.Set(sandboxcamara.DefaultMSISDNHeader, msisdn)
	}
	device := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := device.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc.String(), callbackURL+"?") {
		t.Fatalf("the operator answered %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	q := loc.Query()
	return sessions.Authorization{State: q.Get("state"), Code: q.Get("code"), Error: q.Get("error")}
}

// wayBack splits where the callback sends the browser: the page, and the fragment's values.
func wayBack(t *testing.T, redirect string) (string, url.Values) {
	t.Helper()
	page, fragment, ok := strings.Cut(redirect, "#")
	v, err := url.ParseQuery(fragment)
	if !ok || err != nil {
		t.Fatalf("way back %q", redirect)
	}
	return page, v
}

// TestNetworkAPICapture: a VERIFY capture through an operator's network API waits for the
// operator's authorization, which the browser follows; the callback takes the state that the
// capture answered only, once, and sends the browser back to its page with a one-time code,
// which completes the flow together with the verifier the capturing page kept, once.
func TestNetworkAPICapture(t *testing.T) {
	ctx := context.Background()
	const line = "+971501234567"

	t.Run("captured: the way back and the page complete the flow", func(t *testing.T) {
		e := newNetEnv(t)
		f := e.open(t, e.client, shopOrigin, "VERIFY")
		u, err := url.Parse(f.c.AuthorizationURL)
		if err != nil || !strings.HasPrefix(f.c.AuthorizationURL, e.operator.URL+"/authorize?") {
			t.Fatalf("authorization URL %q", f.c.AuthorizationURL)
		}
		if q := u.Query(); q.Get("prompt") != "none" || q.Get("code_challenge_method") != "S256" || q.Get("state") == "" ||
			q.Get("redirect_uri") != callbackURL || q.Get("client_id") != "mnv" || q.Get("code_challenge") == f.keys.challenge {
			t.Errorf("authorization URL %q: want mnv's own state and PKCE, not the page's", f.c.AuthorizationURL)
		}
		if f.c.Status != domain.AuthorizationPending || f.c.Blob != nil || deref(f.c.OperatorID) != "gamma" {
			t.Errorf("capture answered %+v, want AUTHORIZATION_PENDING through gamma, no blob", f.c.Transaction)
		}
		// The capture is spent: a second one is refused.
		if _, err := e.svc.CaptureTransaction(ctx, f.tx, CaptureRequest{OperatorID: gamma(), CodeChallenge: &f.keys.challenge}, page(shopOrigin)); !errors.Is(err, domain.ErrAlreadyUsed) {
			t.Errorf("second capture: %v, want ALREADY_USED", err)
		}

		a := e.follow(t, f.c.AuthorizationURL, line)
		done, err := e.svc.CompleteAuthorization(ctx, a)
		if err != nil || done.Transaction == nil || done.Capture.Blob != "" {
			t.Fatalf("callback: %+v, %v; want the flow's way back, no blob", done, err)
		}
		back, v := wayBack(t, done.Redirect)
		if back != shopOrigin+"/checkout/step-2" || v.Get("mnv_transaction") != f.tx || len(v.Get("mnv_code")) != 43 || len(v) != 2 {
			t.Fatalf("way back %q", done.Redirect)
		}
		// Until the page completes it, the backend sees no outcome.
		if got, err := e.svc.GetTransaction(ctx, e.client.ClientID, f.tx); err != nil || got.Status != domain.AuthorizationPending || got.Blob != nil {
			t.Errorf("the backend resolves %+v (%v) before the page completed", got, err)
		}

		got, err := e.svc.CompleteTransaction(ctx, f.tx, v.Get("mnv_code"), f.keys.verifier, page(shopOrigin))
		if err != nil || got.Status != domain.Captured || got.Blob == nil || *got.SessionID != *f.c.SessionID {
			t.Fatalf("complete: %+v (%v), want CAPTURED with its blob", got, err)
		}
		claims, err := e.sealer.Open(*got.Blob)
		if err != nil || claims.ClientID != e.client.ClientID || claims.SessionID != *f.c.SessionID || claims.OperatorID != "gamma" || claims.Number != "" {
			t.Errorf("the blob seals %+v (%v), want the flow's session of the client, through gamma, without a number", claims, err)
		}
		sess, err := e.st.GetSession(ctx, e.client.ClientID, *f.c.SessionID)
		if err != nil || sess.Source != "WEB" || sess.Method != "NETWORK_API" || sess.Status != domain.Captured || sess.OAuthSealed == nil {
			t.Errorf("session %+v (%v), want a WEB NETWORK_API session CAPTURED with its token", sess, err)
		}
		if backend, err := e.svc.GetTransaction(ctx, e.client.ClientID, f.tx); err != nil || backend.Status != domain.Captured || *backend.Blob != *got.Blob {
			t.Errorf("the backend resolves %+v (%v)", backend, err)
		}

		// Replays change nothing: the callback (a reload, a stolen URL), and the completion.
		if _, err := e.svc.CompleteAuthorization(ctx, a); fault.Find(err, fault.InvalidArgument) == nil {
			t.Errorf("replayed callback: %v, want INVALID_ARGUMENT", err)
		}
		if _, err := e.svc.CompleteTransaction(ctx, f.tx, v.Get("mnv_code"), f.keys.verifier, page(shopOrigin)); !errors.Is(err, domain.ErrAlreadyUsed) {
			t.Errorf("replayed completion: %v, want ALREADY_USED", err)
		}
		if again, _ := e.svc.GetTransaction(ctx, e.client.ClientID, f.tx); again.Status != domain.Captured || *again.Blob != *got.Blob {
			t.Errorf("after the replays the flow is %+v", again)
		}
	})

	t.Run("an operator link lifted from someone's capture completes nothing on a victim's phone", func(t *testing.T) {
		e := newNetEnv(t)
		// Mallory captured the flow (her session's, on the client's site) and hands its
		// authorization URL to a victim, whose phone follows it on the victim's line.
		f := e.open(t, e.client, shopOrigin, "VERIFY")
		done, err := e.svc.CompleteAuthorization(ctx, e.follow(t, f.c.AuthorizationURL, "+971509876543"))
		if err != nil {
			t.Fatal(err)
		}
		_, v := wayBack(t, done.Redirect) // in the victim's browser
		victim := newPKCE()
		for _, tt := range []struct{ name, code, verifier string }{
			{"Mallory: her verifier, no code", "", f.keys.verifier},
			{"Mallory: her verifier, a guessed code", crypto.NewSecret(), f.keys.verifier},
			{"the victim's page: the code, its own verifier", v.Get("mnv_code"), victim.verifier},
			{"the victim's page: the code, no verifier", v.Get("mnv_code"), ""},
			{"the code as the verifier", v.Get("mnv_code"), v.Get("mnv_code")},
		} {
			if _, err := e.svc.CompleteTransaction(ctx, f.tx, tt.code, tt.verifier, page(shopOrigin)); fault.Find(err, fault.InvalidArgument) == nil {
				t.Errorf("%s: %v, want INVALID_ARGUMENT", tt.name, err)
			}
		}
		if got, _ := e.svc.GetTransaction(ctx, e.client.ClientID, f.tx); got.Status != domain.AuthorizationPending || got.Blob != nil {
			t.Fatalf("the flow is %+v, want AUTHORIZATION_PENDING without a blob", got)
		}
		// Both together (which only one page in one browser has) complete it.
		if got, err := e.svc.CompleteTransaction(ctx, f.tx, v.Get("mnv_code"), f.keys.verifier, page(shopOrigin)); err != nil || got.Status != domain.Captured {
			t.Fatalf("the code and the verifier: %+v, %v", got, err)
		}
	})

	t.Run("a capture through the network API needs a code challenge; nothing is kept without", func(t *testing.T) {
		e := newNetEnv(t)
		for _, challenge := range []*string{nil, ptr("short"), ptr(strings.Repeat("A", 44)), ptr(strings.Repeat("!", 43))} {
			tr, err := e.svc.CreateTransaction(ctx, e.client, "VERIFY", "no-challenge")
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.svc.CaptureTransaction(ctx, tr.ID, CaptureRequest{OperatorID: gamma(), CodeChallenge: challenge}, page(shopOrigin))
			if f := fault.Find(err, fault.InvalidArgument); f == nil || f.Field != "codeChallenge" {
				t.Errorf("challenge %v: %v, want INVALID_ARGUMENT on codeChallenge", challenge, err)
			}
			if got, _ := e.svc.GetTransaction(ctx, e.client.ClientID, tr.ID); got.Status != domain.TransactionPending {
				t.Errorf("challenge %v: the flow is %s, want PENDING", challenge, got.Status)
			}
		}
		var sessions int
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM verification.sessions`).Scan(&sessions); err != nil || sessions != 0 {
			t.Errorf("%d sessions kept (%v), want none", sessions, err)
		}
	})

	t.Run("a wrong state claims nothing; the right one still completes", func(t *testing.T) {
		e := newNetEnv(t)
		f := e.open(t, e.client, shopOrigin, "VERIFY")
		a := e.follow(t, f.c.AuthorizationURL, line)
		for _, state := range []string{"", "forged", a.State + "x", strings.Repeat("s", 600)} {
			if _, err := e.svc.CompleteAuthorization(ctx, sessions.Authorization{State: state, Code: a.Code}); fault.Find(err, fault.InvalidArgument) == nil {
				t.Errorf("state %.20q: %v, want INVALID_ARGUMENT", state, err)
			}
		}
		if got, _ := e.svc.GetTransaction(ctx, e.client.ClientID, f.tx); got.Status != domain.AuthorizationPending || got.CompletionHash != nil {
			t.Fatalf("after wrong states the flow is %+v, want AUTHORIZATION_PENDING with no way back yet", got)
		}
		done, err := e.svc.CompleteAuthorization(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		_, v := wayBack(t, done.Redirect)
		if got, err := e.svc.CompleteTransaction(ctx, f.tx, v.Get("mnv_code"), f.keys.verifier, page(shopOrigin)); err != nil || got.Status != domain.Captured {
			t.Fatalf("the right state: %+v, %v", got, err)
		}
	})

	t.Run("off the mobile network: no identity", func(t *testing.T) {
		e := newNetEnv(t)
		f := e.open(t, e.client, shopOrigin, "VERIFY")
		a := e.follow(t, f.c.AuthorizationURL, "")
		if a.Error != "login_required" {
			t.Fatalf("the operator answered %+v", a)
		}
		done, err := e.svc.CompleteAuthorization(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		_, v := wayBack(t, done.Redirect)
		got, err := e.svc.CompleteTransaction(ctx, f.tx, v.Get("mnv_code"), f.keys.verifier, page(shopOrigin))
		if claims, serr := e.sealer.Open(deref(got.Blob)); err != nil || got.Status != domain.NoNetworkIdentity || serr != nil || claims.SessionID != *f.c.SessionID {
			t.Errorf("the flow is %+v (%v), want NO_NETWORK_IDENTITY with its blob", got, err)
		}
	})

	t.Run("the operator's token endpoint is down: the flow can be captured again", func(t *testing.T) {
		e := newNetEnv(t)
		f := e.open(t, e.client, shopOrigin, "VERIFY")
		a := e.follow(t, f.c.AuthorizationURL, line)
		e.tokenDown.Store(true)
		done, err := e.svc.CompleteAuthorization(ctx, a)
		if err != nil || done.Redirect != shopOrigin+"/checkout/step-2#mnv_error=UNAVAILABLE&mnv_transaction="+f.tx {
			t.Fatalf("completion %+v, %v", done, err)
		}
		got, _ := e.svc.GetTransaction(ctx, e.client.ClientID, f.tx)
		if got.Status != domain.TransactionPending || got.SessionID != nil || got.Blob != nil || got.CodeChallenge != nil || got.CompletionHash != nil {
			t.Fatalf("the flow is %+v, want PENDING as before its capture", got)
		}
		// Its state is spent; a new capture starts over, and completes.
		if _, err := e.svc.CompleteAuthorization(ctx, a); fault.Find(err, fault.InvalidArgument) == nil {
			t.Errorf("the spent state: %v", err)
		}
		e.tokenDown.Store(false)
		keys, back := newPKCE(), shopOrigin+"/checkout"
		c2, err := e.svc.CaptureTransaction(ctx, f.tx, CaptureRequest{OperatorID: gamma(), ReturnURL: &back, CodeChallenge: &keys.challenge}, page(shopOrigin))
		if err != nil || c2.AuthorizationURL == "" || *c2.SessionID == *f.c.SessionID {
			t.Fatalf("capture again: %+v, %v", c2, err)
		}
		done, err = e.svc.CompleteAuthorization(ctx, e.follow(t, c2.AuthorizationURL, line))
		if err != nil {
			t.Fatal(err)
		}
		page2, v := wayBack(t, done.Redirect)
		if got, err := e.svc.CompleteTransaction(ctx, f.tx, v.Get("mnv_code"), keys.verifier, page(shopOrigin)); page2 != back || err != nil || got.Status != domain.Captured {
			t.Fatalf("second completion to %q: %+v, %v", page2, got, err)
		}
	})

	t.Run("the flow expired while the browser was away", func(t *testing.T) {
		e := newNetEnv(t)
		f := e.open(t, e.client, shopOrigin, "VERIFY")
		a := e.follow(t, f.c.AuthorizationURL, line)
		e.now = e.now.Add(10 * time.Minute)
		done, err := e.svc.CompleteAuthorization(ctx, a)
		if err != nil || !strings.HasSuffix(done.Redirect, "#mnv_status=EXPIRED&mnv_transaction="+f.tx) {
			t.Fatalf("completion %+v, %v", done, err)
		}
		if got, err := e.svc.CompleteTransaction(ctx, f.tx, "any", f.keys.verifier, page(shopOrigin)); err != nil || got.Status != domain.TransactionExpired || got.Blob != nil {
			t.Errorf("complete: %+v (%v), want EXPIRED without a blob", got, err)
		}
		if got, _ := e.svc.GetTransaction(ctx, e.client.ClientID, f.tx); got.Status != domain.TransactionExpired || got.Blob != nil {
			t.Errorf("the flow is %+v, want EXPIRED without a blob", got)
		}
	})

	t.Run("another client's flow: neither captured nor completed from this client's page", func(t *testing.T) {
		e := newNetEnv(t)
		theirs := e.open(t, e.other, otherOrigin, "VERIFY")
		done, err := e.svc.CompleteAuthorization(ctx, e.follow(t, theirs.c.AuthorizationURL, line))
		if err != nil {
			t.Fatal(err)
		}
		_, v := wayBack(t, done.Redirect)
		// Even with their code and verifier, a page that is not theirs completes nothing.
		for _, origin := range []string{shopOrigin, "", "https://evil.example"} {
			if _, err := e.svc.CompleteTransaction(ctx, theirs.tx, v.Get("mnv_code"), theirs.keys.verifier, page(origin)); !errors.Is(err, domain.ErrOriginNotAllowed) {
				t.Errorf("complete from %q: %v, want the origin refused", origin, err)
			}
		}
		fresh, err := e.svc.CreateTransaction(ctx, e.other, "VERIFY", "theirs")
		if err != nil {
			t.Fatal(err)
		}
		keys := newPKCE()
		if _, err := e.svc.CaptureTransaction(ctx, fresh.ID, CaptureRequest{OperatorID: gamma(), CodeChallenge: &keys.challenge}, page(shopOrigin)); !errors.Is(err, domain.ErrOriginNotAllowed) {
			t.Errorf("capture from shop.example: %v, want the origin refused", err)
		}
		if _, err := e.svc.CompleteTransaction(ctx, uuid.NewString(), v.Get("mnv_code"), theirs.keys.verifier, page(otherOrigin)); !errors.Is(err, fault.ErrNotFound) {
			t.Errorf("an unknown flow: %v, want not found", err)
		}
		// The way back is the page's own origin only: another client's, or anyone's, is
		// refused before anything is captured.
		for _, back := range []string{otherOrigin + "/checkout", "https://shop.example.evil.example/", "//evil.example/", "javascript:alert(1)",
			"https://user@shop.example/", shopOrigin + "/" + strings.Repeat("x", 4096),
			// An open redirect of the client's own would pass the way back's code on.
			shopOrigin + "/go?next=https://evil.example/", shopOrigin + "/go?"} {
			mine, err := e.svc.CreateTransaction(ctx, e.client, "VERIFY", "mine")
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.svc.CaptureTransaction(ctx, mine.ID, CaptureRequest{OperatorID: gamma(), ReturnURL: &back, CodeChallenge: &keys.challenge}, page(shopOrigin))
			if f := fault.Find(err, fault.InvalidArgument); f == nil || f.Field != "returnUrl" {
				t.Errorf("return URL %.40q: %v, want INVALID_ARGUMENT on returnUrl", back, err)
			}
			if got, _ := e.svc.GetTransaction(ctx, e.client.ClientID, mine.ID); got.Status != domain.TransactionPending {
				t.Errorf("return URL %.40q: the flow is %s, want PENDING", back, got.Status)
			}
		}
		for _, id := range []string{theirs.tx, fresh.ID} {
			if got, _ := e.svc.GetTransaction(ctx, e.other.ClientID, id); got.Blob != nil {
				t.Errorf("their flow %s is %+v, want no blob", id, got)
			}
		}
	})

	t.Run("without a return URL the browser goes back to the origin's root", func(t *testing.T) {
		e := newNetEnv(t)
		tr, err := e.svc.CreateTransaction(ctx, e.client, "VERIFY", "root")
		if err != nil {
			t.Fatal(err)
		}
		keys := newPKCE()
		c, err := e.svc.CaptureTransaction(ctx, tr.ID, CaptureRequest{OperatorID: gamma(), CodeChallenge: &keys.challenge}, page(shopOrigin))
		if err != nil {
			t.Fatal(err)
		}
		done, err := e.svc.CompleteAuthorization(ctx, e.follow(t, c.AuthorizationURL, line))
		if err != nil || !strings.HasPrefix(done.Redirect, shopOrigin+"/#") {
			t.Fatalf("completion %+v, %v", done, err)
		}
	})

	t.Run("STUCK_PLUS never waits for an authorization: the network API shows no number", func(t *testing.T) {
		e := newNetEnv(t)
		f := e.open(t, e.client, shopOrigin, "STUCK_PLUS")
		if f.c.AuthorizationURL != "" || f.c.Status != domain.NoNetworkIdentity || f.c.StuckPlusSessionID != nil {
			t.Errorf("captured %+v (%q), want NO_NETWORK_IDENTITY at once", f.c.Transaction, f.c.AuthorizationURL)
		}
	})

	t.Run("an SDK session's callback still answers its sealed session", func(t *testing.T) {
		e := newNetEnv(t)
		sdk, err := e.svc.sessions.Create(ctx, e.client, sessions.Request{Platform: "ANDROID", OperatorID: gamma()}, page(""))
		if err != nil || sdk.AuthorizationURL == "" {
			t.Fatalf("SDK session %+v, %v", sdk, err)
		}
		done, err := e.svc.CompleteAuthorization(ctx, e.follow(t, sdk.AuthorizationURL, line))
		if err != nil || done.Transaction != nil || done.Redirect != "" || done.Capture.SessionID != sdk.SessionID || done.Capture.Status != domain.Captured {
			t.Fatalf("completion %+v, %v", done, err)
		}
		if claims, err := e.sealer.Open(done.Capture.Blob); err != nil || claims.SessionID != sdk.SessionID {
			t.Errorf("sealed %+v (%v)", claims, err)
		}
	})
}

func ptr(s string) *string { return &s }
