package facade_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/testkit/sandboxcamara"
	"github.com/mnvhq/mnv/services/verification/internal/facade"
	"github.com/mnvhq/mnv/services/verification/internal/network"
	"github.com/mnvhq/mnv/services/verification/internal/operatorapi"
	"github.com/mnvhq/mnv/services/verification/internal/sessions"
	"github.com/mnvhq/mnv/services/verification/internal/store"
	"github.com/mnvhq/mnv/services/verification/internal/verificationtest"
	"github.com/mnvhq/mnv/services/verification/internal/verify"
)

// The facade identifying a line through an operator's own CAMARA API (NETWORK_API): the real
// facade, sessions, verify and store over PostgreSQL, mnv's real CAMARA client, and the fake
// CAMARA operator (an outside system). Accounts stands behind its two ports (Accounts, the
// ledger) as a small in-test double: its own behaviour is tested over gRPC in its module and,
// with the whole flow, in tests/camara.

const (
	redirectURI = "http://127.0.0.1:7788/cb"
	origin      = "http://127.0.0.1:7788"
	scopeVerify = "number-verification:verify"
	scopeShare  = "number-verification:device-phone-number:read"
	// gamma, delta and epsilon all offer header enrichment and NETWORK_API through the same
	// fake operator; gamma takes hashed numbers and shares, delta neither, and mnv asks epsilon
	// for the share scope alone, so epsilon refuses its /verify (403 PERMISSION_DENIED).
	gammaAddr, deltaAddr, epsilonAddr = "198.51.100.7", "203.0.113.7", "100.64.0.7"
	gammaHeader                       = "X-Gamma-Msisdn"
	addrHeader                        = "X-Test-Addr"
)

// accounts is accounts at the facade's port: clients with a secret, redirect URIs and access.
type accounts struct {
	mu      sync.Mutex
	clients map[string]account
	asked   int // ClientPrincipal calls
}

type account struct {
	secret string
	p      principal.Principal
	// redirects are the client's registered redirect URIs; nil registers redirectURI alone.
	redirects []string
}

func (a *accounts) AuthenticateClientSecret(_ context.Context, id, secret string) (principal.Principal, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.clients[id]
	if !ok || c.secret != secret {
		return principal.Principal{}, principal.ErrUnauthenticated
	}
	return c.p, nil
}

// AllowsRedirectURI is accounts' exact match over the client's registered URIs (the loopback
// port rule is accounts' own, tested there).
func (a *accounts) AllowsRedirectURI(_ context.Context, id, uri string) (allowed, registered bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.clients[id]
	if !ok {
		return false, false, nil
	}
	list := c.redirects
	if list == nil {
		list = []string{redirectURI}
	}
	return slices.Contains(list, uri), len(list) > 0, nil
}

func (a *accounts) ClientPrincipal(_ context.Context, id string) (principal.Principal, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked++
	c, ok := a.clients[id]
	if !ok {
		return principal.Principal{}, fault.ErrNotFound
	}
	return c.p, nil
}

// ledger is accounts' money port: it counts the debits by reference.
type ledger struct {
	mu     sync.Mutex
	debits map[string]money.Charge
}

func (l *ledger) Debit(_ context.Context, c money.Charge) (money.Charged, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, replayed := l.debits[c.Reference]
	l.debits[c.Reference] = c
	return money.Charged{EntryID: c.Reference, Amount: 1, BalanceAfter: 99, Replayed: replayed}, nil
}

func (l *ledger) Refund(context.Context, money.Refund) (money.Refunded, error) {
	return money.Refunded{}, fault.New(fault.InvalidArgument, "no refunds here")
}

func (l *ledger) Balance(context.Context, string) (int64, error) { return 100, nil }

// charged counts clientID's debits.
func (l *ledger) charged(clientID string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.debits {
		if c.ClientID == clientID {
			n++
		}
	}
	return n
}

type stack struct {
	issuer   string
	fake     *sandboxcamara.Fake
	fakeURL  string
	pool     *pgxpool.Pool
	accounts *accounts
	ledger   *ledger
	sessions *sessions.Service
	// failToken makes the operator's token endpoint answer 503.
	failToken atomic.Bool
}

// newStack serves the facade on loopback in front of a fresh database and a fake operator.
func newStack(t *testing.T) *stack {
	t.Helper()
	ctx := context.Background()
	log := zaptest.NewLogger(t)
	s := &stack{accounts: &accounts{clients: map[string]account{}}, ledger: &ledger{debits: map[string]money.Charge{}}}

	// The fake operator, behind a switch that can fail its token endpoint.
	var fake atomic.Pointer[sandboxcamara.Fake]
	opSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" && s.failToken.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		fake.Load().Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(opSrv.Close)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.issuer, s.fakeURL = "http://"+lis.Addr().String(), opSrv.URL
	s.fake = sandboxcamara.New(opSrv.URL, sandboxcamara.Options{Clients: []sandboxcamara.Client{{
		ID: "mnv", Secret: "op-secret", RedirectURIs: []string{s.issuer + facade.OperatorCallbackPath},
	}}})
	fake.Store(s.fake)

	registry := fmt.Sprintf(`operators:
  - id: gamma
    name: Gamma
    country: AE
    methods: [HEADER_ENRICHMENT, NETWORK_API]
    headerEnrichment: {trustedRanges: ["198.51.100.0/24"], numberHeader: %[1]s}
    camara:
      discoveryUrl: %[2]s
      apiRoot: %[3]s
      clientId: mnv
      clientAuth: client_secret_basic
      clientSecretFile: secret.txt
      scopes: [openid, %[4]q, %[5]q]
      hashedPhoneNumber: true
  - id: delta
    name: Delta
    country: AE
    methods: [HEADER_ENRICHMENT, NETWORK_API]
    headerEnrichment: {trustedRanges: ["203.0.113.0/24"], numberHeader: X-Delta-Msisdn}
    camara: {discoveryUrl: %[2]s, apiRoot: %[3]s, clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: secret.txt}
  - id: epsilon
    name: Epsilon
    country: AE
    methods: [HEADER_ENRICHMENT, NETWORK_API]
    headerEnrichment: {trustedRanges: ["100.64.0.0/24"], numberHeader: X-Epsilon-Msisdn}
    camara: {discoveryUrl: %[2]s, apiRoot: %[3]s, clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: secret.txt, scopes: [openid, %[5]q]}
  - id: zeta
    name: Zeta, whose authorization server is down
    country: AE
    methods: [HEADER_ENRICHMENT, NETWORK_API]
    headerEnrichment: {trustedRanges: ["100.64.1.0/24"], numberHeader: X-Zeta-Msisdn}
    camara: {discoveryUrl: "http://127.0.0.1:1/.well-known/openid-configuration", apiRoot: "http://127.0.0.1:1", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: secret.txt}
`, gammaHeader, s.fake.DiscoveryURL(), s.fake.URL, scopeVerify, scopeShare)
	ops := verificationtest.OperatorsFile(t, registry, "op-secret")

	pool := verificationtest.Database(t, 6)
	q, err := jobs.New(pool, jobs.Options{Schema: "verification"})
	if err != nil {
		t.Fatal(err)
	}
	s.pool = pool
	keys := verificationtest.NewKeys(t)
	sealer, vault := keys.Sealer, keys.Vault
	hc := &http.Client{Timeout: time.Second}
	clients, err := operatorapi.NewClients(ops.List(), s.issuer+facade.OperatorCallbackPath, hc)
	if err != nil {
		t.Fatal(err)
	}
	stores := pg.NewStores(pool, func(db pg.DB) verify.Store { return store.New(db).WithJobs(q) })
	verifier := verify.New(verify.Config{SettleAfter: time.Minute}, verify.Deps{
		Store: stores.Pool(), Tx: stores, Operators: ops, Sealer: sealer, Vault: vault, Ledger: s.ledger, Log: log,
	}).
		WithNetworkAPI(store.New(pool), clients, time.Second)
	s.sessions = sessions.New(store.New(pool), network.NewIdentifier(ops, log), sealer, 5*time.Minute).
		WithNetworkAPI(store.New(pool), clients, log)
	f, err := facade.New(ctx, facade.Config{Issuer: s.issuer, NetworkOf: testNetwork}, facade.Deps{
		Store: store.New(pool), Accounts: s.accounts, Principals: s.accounts, Sessions: s.sessions, Verifier: verifier, Keyring: keys.Keyring, Log: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: f, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// testNetwork is the gateway's part: the device's address and the number header its operator's
// proxy may have added.
func testNetwork(r *http.Request) network.Request {
	addr, _ := netip.ParseAddr(r.Header.Get(addrHeader))
	h := map[string]string{}
	if v := r.Header.Get(gammaHeader); v != "" {
		h[gammaHeader] = v
	}
	return network.Request{Addr: addr, Headers: h}
}

// client registers a client of the facade whose operators are grants (operator:METHOD).
func (s *stack) client(features []string, grants ...string) (id, secret string) {
	ops := principal.Operators{}
	for _, g := range grants {
		op, m, _ := strings.Cut(g, ":")
		ops.Grants = append(ops.Grants, principal.OperatorGrant{Operator: op, Methods: []string{m}})
	}
	id, secret = uuid.NewString(), "mnvsec_"+uuid.NewString()
	s.accounts.mu.Lock()
	defer s.accounts.mu.Unlock()
	s.accounts.clients[id] = account{secret: secret, p: principal.Principal{
		ClientID: id, Status: principal.StatusActive, Features: features, Operators: ops,
	}}
	return id, secret
}

var noRedirects = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// device is a phone at addr whose operator's proxy adds heNumber to plain requests ("" none)
// and whose line, as its operator's network API knows it, is line ("" off the mobile network).
type device struct{ addr, heNumber, line string }

// flow is what the device saw of an authorization: the URLs it went through and where it ended.
type flow struct {
	hops []string
	end  *url.URL // the client's redirect URI with its query, nil when it never got there
	last *http.Response
	body string
}

func (f flow) visited(prefix string) bool {
	return slices.ContainsFunc(f.hops, func(h string) bool { return strings.HasPrefix(h, prefix) })
}

// authorize has the device open the facade's authorization URL and follow the redirects, to
// the facade, to the operator, until the client's redirect URI or an answer that is not one.
func (s *stack) authorize(t *testing.T, clientID, scope string, d device) flow {
	t.Helper()
	q := url.Values{
		"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirectURI},
		"scope": {"openid " + scope}, "state": {"client-state"}, "prompt": {"none"},
	}
	return s.follow(t, s.issuer+"/oauth2/authorize?"+q.Encode(), d)
}

func (s *stack) follow(t *testing.T, next string, d device) flow {
	t.Helper()
	var f flow
	for range 6 {
		if strings.HasPrefix(next, redirectURI) {
			f.end, _ = url.Parse(next)
			return f
		}
		f.hops = append(f.hops, next)
		req, _ := http.NewRequest(http.MethodGet, next, nil)
		switch {
		case strings.HasPrefix(next, s.fakeURL) && d.line != "":
			req.Header.Set(sandboxcamara.DefaultMSISDNHeader, d.line)
		case strings.HasPrefix(next, s.issuer):
			req.Header.Set(addrHeader, d.addr)
			if d.heNumber != "" {
				req.Header.Set(gammaHeader, d.heNumber)
			}
		}
		resp, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		f.last, f.body = resp, string(b)
		if resp.StatusCode != http.StatusFound {
			return f
		}
		loc, _ := url.Parse(resp.Header.Get("Location"))
		next = req.URL.ResolveReference(loc).String()
	}
	t.Fatalf("too many redirects: %v", f.hops)
	return f
}

// code is the facade's code the flow ended with.
func (f flow) code(t *testing.T) string {
	t.Helper()
	if f.end == nil || f.end.Query().Get("code") == "" || f.end.Query().Get("state") != "client-state" {
		t.Fatalf("no code: ended at %v after %v (last %v %s)", f.end, f.hops, f.last.StatusCode, f.body)
	}
	return f.end.Query().Get("code")
}

func (s *stack) token(t *testing.T, clientID, secret, code string) (int, map[string]any) {
	t.Helper()
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}}
	req, _ := http.NewRequest(http.MethodPost, s.issuer+"/oauth2/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(secret))
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// accessToken runs the whole flow for a client and returns its access token, after checking
// the ID token beside it as a relying party would (go-oidc: signature, issuer, audience) and
// that its subject is there and is not the line.
func (s *stack) accessToken(t *testing.T, clientID, secret, scope string, d device) string {
	t.Helper()
	status, body := s.token(t, clientID, secret, s.authorize(t, clientID, scope, d).code(t))
	tok, _ := body["access_token"].(string)
	if status != http.StatusOK || tok == "" {
		t.Fatalf("token: %d %v", status, body)
	}
	raw, _ := body["id_token"].(string)
	p, err := gooidc.NewProvider(context.Background(), s.issuer)
	if err != nil {
		t.Fatal(err)
	}
	idt, err := p.Verifier(&gooidc.Config{ClientID: clientID}).Verify(context.Background(), raw)
	if err != nil {
		t.Fatalf("ID token: %v", err)
	}
	if idt.Subject == "" || (d.line != "" && strings.Contains(idt.Subject, strings.TrimPrefix(d.line, "+"))) {
		t.Fatalf("ID token subject %q (line %s)", idt.Subject, d.line)
	}
	return tok
}

type answer struct {
	status int
	body   map[string]any
	raw    string
}

func (s *stack) call(t *testing.T, method, path, bearer, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, s.issuer+"/number-verification/v2"+path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("x-correlator", "corr-"+path[1:])
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

func (a answer) is(status int, code string) bool { return a.status == status && a.body["code"] == code }

// verifications are the client's verifications as kept: status/reason/service type/operator.
func (s *stack) verifications(t *testing.T, clientID string) []string {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT status || '/' || reason || '/' || service_type || '/' || operator_id
		FROM verification.verifications WHERE client_id = $1 ORDER BY created_at`, clientID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

var lines atomic.Int64

func nextLine() string { return fmt.Sprintf("+97155%07d", 3000000+lines.Add(1)) }

// TestNetworkAPIRoute: at the authorization endpoint, the device goes to its operator's
// authorization (prompt=none, PKCE S256, the facade's callback) only when header enrichment the
// client may use did not identify the line and the client enabled the operator's NETWORK_API;
// the client's enablement is asked only when the operator has a network API at all.
func TestNetworkAPIRoute(t *testing.T) {
	s := newStack(t)
	tests := []struct {
		name         string
		grants       []string
		unknown      bool // a client accounts does not know (its redirect URIs are checked first: none)
		d            device
		wantOperator bool
		wantAsked    bool
	}{
		{"no number header, NETWORK_API enabled", []string{"gamma:NETWORK_API"}, false, device{gammaAddr, "", "+971550000001"}, true, true},
		{"a number header, but header enrichment not enabled", []string{"gamma:NETWORK_API"}, false, device{gammaAddr, "+971550000001", "+971550000001"}, true, true},
		{"a number header and both methods enabled: header enrichment", []string{"gamma:NETWORK_API", "gamma:HEADER_ENRICHMENT"}, false, device{gammaAddr, "+971550000001", ""}, false, true},
		{"no number header, header enrichment only", []string{"gamma:HEADER_ENRICHMENT"}, false, device{gammaAddr, "", ""}, false, true},
		{"NETWORK_API of another operator", []string{"delta:NETWORK_API"}, false, device{gammaAddr, "", "+971550000001"}, false, true},
		{"an address of no operator: nothing to ask", []string{"gamma:NETWORK_API"}, false, device{"192.0.2.1", "", "+971550000001"}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, _ := s.client([]string{"VERIFY"}, tt.grants...)
			s.accounts.mu.Lock()
			asked := s.accounts.asked
			s.accounts.mu.Unlock()
			f := s.authorize(t, id, scopeVerify, tt.d)
			f.code(t)
			if got := f.visited(s.fakeURL + "/authorize?"); got != tt.wantOperator {
				t.Fatalf("went to the operator: %v, want %v (hops %v)", got, tt.wantOperator, f.hops)
			}
			s.accounts.mu.Lock()
			gotAsked := s.accounts.asked > asked
			s.accounts.mu.Unlock()
			if gotAsked != tt.wantAsked {
				t.Errorf("asked accounts: %v, want %v", gotAsked, tt.wantAsked)
			}
			if !tt.wantOperator {
				return
			}
			op, _ := url.Parse(f.hops[1])
			if q := op.Query(); q.Get("prompt") != "none" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" ||
				q.Get("redirect_uri") != s.issuer+facade.OperatorCallbackPath || q.Get("state") == "" || q.Get("state") == "client-state" ||
				q.Get("client_id") != "mnv" {
				t.Errorf("operator authorization URL %s", op)
			}
		})
	}
}

// TestNetworkAPIFlow: the whole flow through the operator, the answers per CAMARA, one
// verification per token in the records, charged once, and the attacks.
func TestNetworkAPIFlow(t *testing.T) {
	s := newStack(t)
	share := []string{"VERIFY", "NUMBER_SHARE"}

	t.Run("verify: a match, then the token used twice", func(t *testing.T) {
		id, secret := s.client(share, "gamma:NETWORK_API")
		line, calls := nextLine(), s.fake.APICalls()
		tok := s.accessToken(t, id, secret, scopeVerify, device{gammaAddr, "", line})
		if a := s.call(t, http.MethodPost, "/verify", tok, fmt.Sprintf(`{"phoneNumber":%q}`, line)); a.status != http.StatusOK || a.body["devicePhoneNumberVerified"] != true {
			t.Fatalf("verify: %d %s", a.status, a.raw)
		}
		if a := s.call(t, http.MethodPost, "/verify", tok, fmt.Sprintf(`{"phoneNumber":%q}`, line)); !a.is(http.StatusUnauthorized, "UNAUTHENTICATED") {
			t.Fatalf("second use: %d %s", a.status, a.raw)
		}
		if n := s.fake.APICalls() - calls; n != 1 || s.fake.LastCorrelator() != "corr-verify" {
			t.Errorf("the operator was asked %d times, want 1, the last with x-correlator %q", n, s.fake.LastCorrelator())
		}
		if v := s.verifications(t, id); !slices.Equal(v, []string{"VERIFIED/NUMBER_MATCH/NETWORK_API/gamma"}) || s.ledger.charged(id) != 1 {
			t.Errorf("kept %v, charged %d times", v, s.ledger.charged(id))
		}
	})

	for _, tc := range []struct {
		name, scope, method, path string
		body                      func(line string) string
		check                     func(a answer, line string) bool
		kept                      string
		charged                   int
	}{
		{"verify: a mismatch", scopeVerify, http.MethodPost, "/verify", func(string) string { return fmt.Sprintf(`{"phoneNumber":%q}`, nextLine()) },
			func(a answer, _ string) bool {
				return a.status == http.StatusOK && a.body["devicePhoneNumberVerified"] == false
			},
			"NOT_VERIFIED/NUMBER_MISMATCH/NETWORK_API/gamma", 1},
		{"verify: a hashed number", scopeVerify, http.MethodPost, "/verify", func(l string) string { return fmt.Sprintf(`{"hashedPhoneNumber":%q}`, hashOf(l)) },
			func(a answer, _ string) bool {
				return a.status == http.StatusOK && a.body["devicePhoneNumberVerified"] == true
			},
			"VERIFIED/NUMBER_MATCH/NETWORK_API/gamma", 1},
		{"share: the operator's phoneNumberShare", scopeShare, http.MethodGet, "/device-phone-number", func(string) string { return "" },
			func(a answer, l string) bool {
				return a.status == http.StatusOK && a.body["devicePhoneNumber"] == l && len(a.body) == 1
			},
			"VERIFIED/NUMBER_SHARED/NETWORK_API/gamma", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, secret := s.client(share, "gamma:NETWORK_API")
			line := nextLine()
			a := s.call(t, tc.method, tc.path, s.accessToken(t, id, secret, tc.scope, device{gammaAddr, "", line}), tc.body(line))
			if !tc.check(a, line) {
				t.Fatalf("%d %s", a.status, a.raw)
			}
			if v := s.verifications(t, id); !slices.Equal(v, []string{tc.kept}) || s.ledger.charged(id) != tc.charged {
				t.Errorf("kept %v, charged %d times; want %s, %d", v, s.ledger.charged(id), tc.kept, tc.charged)
			}
		})
	}

	// What the operator or the device did wrong: answered per CAMARA, nothing charged.
	for _, tc := range []struct {
		name      string
		grants    []string
		scope     string
		line      string // the device's line at the operator, "" off its network
		behaviour *sandboxcamara.Behaviour
		method    string
		path      string
		body      string
		status    int
		code      string
		kept      []string
		asked     int // calls of the operator's API
	}{
		{"the device off the operator's network (login_required)", []string{"gamma:NETWORK_API"}, scopeVerify, "", nil,
			http.MethodPost, "/verify", `{"phoneNumber":"+971550000009"}`, http.StatusForbidden, "NUMBER_VERIFICATION.USER_NOT_AUTHENTICATED_BY_MOBILE_NETWORK",
			[]string{"UNDETERMINED/NO_NETWORK_IDENTITY/NETWORK_API/gamma"}, 0},
		{"the operator answers 403", []string{"gamma:NETWORK_API"}, scopeVerify, "+971559999001", &sandboxcamara.Behaviour{NotAuthenticatedByMobileNetwork: true},
			http.MethodPost, "/verify", `{"phoneNumber":"+971559999001"}`, http.StatusForbidden, "NUMBER_VERIFICATION.USER_NOT_AUTHENTICATED_BY_MOBILE_NETWORK",
			[]string{"UNDETERMINED/USER_NOT_AUTHENTICATED_BY_MOBILE_NETWORK/NETWORK_API/gamma"}, 1},
		{"the operator times out", []string{"gamma:NETWORK_API"}, scopeVerify, "+971559999002", &sandboxcamara.Behaviour{Delay: 3 * time.Second},
			http.MethodPost, "/verify", `{"phoneNumber":"+971559999002"}`, http.StatusServiceUnavailable, "UNAVAILABLE", nil, 1},
		{"the operator fails (5xx)", []string{"gamma:NETWORK_API"}, scopeVerify, "+971559999003", &sandboxcamara.Behaviour{Status5xx: 502},
			http.MethodPost, "/verify", `{"phoneNumber":"+971559999003"}`, http.StatusServiceUnavailable, "UNAVAILABLE", nil, 1},
		{"the operator refuses (403 PERMISSION_DENIED)", []string{"epsilon:NETWORK_API"}, scopeVerify, "+971559999006", nil,
			http.MethodPost, "/verify", `{"phoneNumber":"+971559999006"}`, http.StatusForbidden, "PERMISSION_DENIED",
			[]string{"UNDETERMINED/OPERATOR_REFUSED/NETWORK_API/epsilon"}, 1},
		{"a share through an operator whose phoneNumberShare mnv does not use", []string{"delta:NETWORK_API"}, scopeShare, "+971559999004", nil,
			http.MethodGet, "/device-phone-number", "", http.StatusForbidden, "PERMISSION_DENIED", nil, 0},
		{"a hashed number to an operator that takes only numbers", []string{"delta:NETWORK_API"}, scopeVerify, "+971559999005", nil,
			http.MethodPost, "/verify", fmt.Sprintf(`{"hashedPhoneNumber":%q}`, hashOf("+971559999005")), http.StatusForbidden, "PERMISSION_DENIED", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, secret := s.client(share, tc.grants...)
			if tc.behaviour != nil {
				s.fake.SetBehaviour(tc.line, *tc.behaviour)
			}
			op, _, _ := strings.Cut(tc.grants[0], ":")
			addr := map[string]string{"gamma": gammaAddr, "delta": deltaAddr, "epsilon": epsilonAddr}[op]
			tok := s.accessToken(t, id, secret, tc.scope, device{addr, "", tc.line})
			calls := s.fake.APICalls()
			if a := s.call(t, tc.method, tc.path, tok, tc.body); !a.is(tc.status, tc.code) {
				t.Fatalf("%d %s, want %d %s", a.status, a.raw, tc.status, tc.code)
			}
			if n := s.fake.APICalls() - calls; n != tc.asked {
				t.Errorf("the operator was asked %d times, want %d", n, tc.asked)
			}
			if v := s.verifications(t, id); !slices.Equal(v, tc.kept) || s.ledger.charged(id) != 0 {
				t.Errorf("kept %v, charged %d times; want %v and nothing", v, s.ledger.charged(id), tc.kept)
			}
		})
	}

	t.Run("the operator's token endpoint down: the client is told to try again", func(t *testing.T) {
		id, _ := s.client(share, "gamma:NETWORK_API")
		s.failToken.Store(true)
		defer s.failToken.Store(false)
		f := s.authorize(t, id, scopeVerify, device{gammaAddr, "", nextLine()})
		if f.end == nil || f.end.Query().Get("error") != "temporarily_unavailable" || f.end.Query().Get("code") != "" ||
			f.end.Query().Get("state") != "client-state" {
			t.Fatalf("ended at %v (last %d %s)", f.end, f.last.StatusCode, f.body)
		}
	})

	t.Run("the operator's authorization server down: the client is told to try again", func(t *testing.T) {
		id, _ := s.client(share, "zeta:NETWORK_API")
		f := s.authorize(t, id, scopeVerify, device{"100.64.1.7", "", nextLine()})
		if f.end == nil || f.end.Query().Get("error") != "temporarily_unavailable" || f.end.Query().Get("state") != "client-state" {
			t.Fatalf("ended at %v (last %d %s)", f.end, f.last.StatusCode, f.body)
		}
	})

	t.Run("a wrong state, and a state replayed", func(t *testing.T) {
		id, _ := s.client(share, "gamma:NETWORK_API")
		back := operatorRedirect(t, s, id, nextLine())
		u, _ := url.Parse(back)
		wrong := *u
		wq := wrong.Query()
		wq.Set("state", "not-the-state")
		wrong.RawQuery = wq.Encode()
		for name, target := range map[string]string{"wrong": wrong.String(), "none": s.issuer + facade.OperatorCallbackPath + "?code=x"} {
			r := s.follow(t, target, device{addr: gammaAddr})
			if r.end != nil || r.last.StatusCode != http.StatusBadRequest || !strings.Contains(r.body, "invalid_request") {
				t.Errorf("%s state: ended at %v, %d %s", name, r.end, r.last.StatusCode, r.body)
			}
		}
		// The real one completes the client's authorization, once.
		if r := s.follow(t, back, device{addr: gammaAddr}); r.end == nil || r.end.Query().Get("code") == "" {
			t.Fatalf("the real state: ended at %v, %d %s", r.end, r.last.StatusCode, r.body)
		}
		if r := s.follow(t, back, device{addr: gammaAddr}); r.end != nil || r.last.StatusCode != http.StatusBadRequest {
			t.Errorf("replayed: ended at %v, %d %s", r.end, r.last.StatusCode, r.body)
		}
	})

	t.Run("an SDK session's state is not the facade's", func(t *testing.T) {
		id, _ := s.client(share, "gamma:NETWORK_API")
		c, err := s.sessions.Create(context.Background(), principal.Principal{ClientID: id, Features: share, Operators: principal.Operators{
			Grants: []principal.OperatorGrant{{Operator: "gamma", Methods: []string{"NETWORK_API"}}},
		}}, sessions.Request{Platform: "ANDROID", OperatorID: ptr("gamma")}, network.Request{})
		if err != nil || c.AuthorizationURL == "" {
			t.Fatalf("SDK session: %+v %v", c, err)
		}
		r := s.follow(t, c.AuthorizationURL, device{addr: gammaAddr, line: nextLine()})
		if r.end != nil || r.last.StatusCode != http.StatusBadRequest || !r.visited(s.issuer+facade.OperatorCallbackPath) {
			t.Fatalf("ended at %v after %v, %d %s", r.end, r.hops, r.last.StatusCode, r.body)
		}
		// Left as it was: still waiting, its state unspent, for the SDK's own callback.
		var status string
		var pending bool
		if err := s.pool.QueryRow(context.Background(), `SELECT status, state_hash IS NOT NULL FROM verification.sessions WHERE id = $1`,
			c.SessionID).Scan(&status, &pending); err != nil || status != "AUTHORIZATION_PENDING" || !pending {
			t.Errorf("the SDK session is %s (state kept %v), %v", status, pending, err)
		}
	})

	t.Run("a code of another client", func(t *testing.T) {
		a, aSecret := s.client(share, "gamma:NETWORK_API")
		b, bSecret := s.client(share, "gamma:NETWORK_API")
		line := nextLine()
		code := s.authorize(t, a, scopeVerify, device{gammaAddr, "", line}).code(t)
		if status, body := s.token(t, b, bSecret, code); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
			t.Fatalf("another client's code: %d %v", status, body)
		}
		status, body := s.token(t, a, aSecret, code)
		tok, _ := body["access_token"].(string)
		if status != http.StatusOK || tok == "" {
			t.Fatalf("own code after the attempt: %d %v", status, body)
		}
		if a := s.call(t, http.MethodPost, "/verify", tok, fmt.Sprintf(`{"phoneNumber":%q}`, line)); a.body["devicePhoneNumberVerified"] != true {
			t.Fatalf("verify: %d %s", a.status, a.raw)
		}
		if v := s.verifications(t, b); len(v) != 0 || s.ledger.charged(b) != 0 {
			t.Errorf("the other client has %v, charged %d", v, s.ledger.charged(b))
		}
	})

	t.Run("NETWORK_API withdrawn before the call", func(t *testing.T) {
		id, secret := s.client(share, "gamma:NETWORK_API")
		line := nextLine()
		code := s.authorize(t, id, scopeVerify, device{gammaAddr, "", line}).code(t)
		s.accounts.mu.Lock()
		c := s.accounts.clients[id]
		c.p.Operators = principal.Operators{Grants: []principal.OperatorGrant{{Operator: "gamma", Methods: []string{"HEADER_ENRICHMENT"}}}}
		s.accounts.clients[id] = c
		s.accounts.mu.Unlock()
		_, body := s.token(t, id, secret, code)
		tok, _ := body["access_token"].(string)
		calls := s.fake.APICalls()
		if a := s.call(t, http.MethodPost, "/verify", tok, fmt.Sprintf(`{"phoneNumber":%q}`, line)); !a.is(http.StatusForbidden, "PERMISSION_DENIED") {
			t.Fatalf("%d %s", a.status, a.raw)
		}
		if s.fake.APICalls() != calls || len(s.verifications(t, id)) != 0 {
			t.Errorf("the operator was asked, or a verification kept")
		}
	})
}

// operatorRedirect has a device on line go through the facade and the operator, and returns
// the facade callback URL the operator sent it back to, unfollowed.
func operatorRedirect(t *testing.T, s *stack, clientID, line string) string {
	t.Helper()
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirectURI}, "scope": {"openid " + scopeVerify}, "state": {"client-state"}}
	req, _ := http.NewRequest(http.MethodGet, s.issuer+"/oauth2/authorize?"+q.Encode(), nil)
	req.Header.Set(addrHeader, gammaAddr)
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	req, _ = http.NewRequest(http.MethodGet, resp.Header.Get("Location"), nil)
	req.Header.Set(sandboxcamara.DefaultMSISDNHeader, line)
	resp, err = noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back := resp.Header.Get("Location")
	if !strings.HasPrefix(back, s.issuer+facade.OperatorCallbackPath+"?") {
		t.Fatalf("the operator sent the device to %q", back)
	}
	return back
}

func ptr(s string) *string { return &s }

func hashOf(n string) string {
	sum := sha256.Sum256([]byte(n))
	return hex.EncodeToString(sum[:])
}
