package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"
	"github.com/oauth2-proxy/mockoidc"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mnvhq/mnv/gateway/app"
	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/app/apptest"
	connecttest "github.com/mnvhq/mnv/services/connect/app/apptest"
	"github.com/mnvhq/mnv/services/platform/auth/authtest"
	"github.com/mnvhq/mnv/services/platform/crypto"
	verificationtest "github.com/mnvhq/mnv/services/verification/app/apptest"
)

// idp is the client's own OpenID Connect provider, faked by mockoidc (an outside system). It
// remembers what each authorization request asked, so a test sees that a step-up asks the
// provider to authenticate the person again.
type idp struct {
	*mockoidc.MockOIDC
	mu   sync.Mutex
	asks []url.Values
	// relogin is when an authorization last asked for a new login (prompt=login or max_age=0):
	// the fake then authenticates the person again, as a provider does.
	relogin time.Time
}

func startIdP(t *testing.T) *idp {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &idp{MockOIDC: m}
	if err := m.AddMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, mockoidc.AuthorizationEndpoint) {
				q := r.URL.Query()
				p.mu.Lock()
				p.asks = append(p.asks, q)
				if q.Get("prompt") == "login" || q.Get("max_age") == "0" {
					p.relogin = time.Now()
				}
				p.mu.Unlock()
			}
			next.ServeHTTP(w, r)
		})
	}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return p
}

func (p *idp) lastAsk() url.Values {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.asks[len(p.asks)-1]
}

// idpUser is a person at the provider, with when the provider last authenticated them
// (auth_time; zero leaves the claim out, as a provider that ignores max_age would). With
// honour set, an authorization that asked for a new login authenticates them then.
type idpUser struct {
	mockoidc.MockUser
	authTime time.Time
	honour   *idp
}

type idpClaims struct {
	*mockoidc.IDTokenClaims
	Email    string   `json:"email,omitempty"`
	Groups   []string `json:"groups,omitempty"`
	AuthTime int64    `json:"auth_time,omitempty"`
}

func (u *idpUser) Claims(_ []string, base *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	c := &idpClaims{IDTokenClaims: base, Email: u.Email, Groups: u.Groups}
	at := u.authTime
	if u.honour != nil {
		u.honour.mu.Lock()
		if u.honour.relogin.After(at) {
			at = u.honour.relogin
		}
		u.honour.mu.Unlock()
	}
	if !at.IsZero() {
		c.AuthTime = at.Unix()
	}
	return c, nil
}

// browser is one browser's cookies for the gateway (the cookies are __Host-, Secure: a cookie
// jar would not send them over the test's plain http, so they are kept by hand).
type browser struct {
	t       *testing.T
	s       *stack
	cookies map[string]string
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (b *browser) do(method, target, body string) (*http.Response, []byte) {
	b.t.Helper()
	if strings.HasPrefix(target, "/") {
		target = b.s.url + target
	}
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if strings.HasPrefix(target, b.s.url) {
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		for k, v := range b.cookies {
			req.AddCookie(&http.Cookie{Name: k, Value: v})
		}
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(target, b.s.url) {
		for _, c := range resp.Cookies() {
			if c.MaxAge < 0 {
				delete(b.cookies, c.Name)
			} else {
				b.cookies[c.Name] = c.Value
			}
		}
	}
	return resp, out
}

// viaIdP sends the browser from an authorization URL through the provider and back to the
// gateway's callback, and answers where the gateway sent it then.
func (b *browser) viaIdP(authURL string) string {
	b.t.Helper()
	resp, _ := b.do("GET", authURL, "")
	if resp.StatusCode != http.StatusFound {
		b.t.Fatalf("the provider answered %d", resp.StatusCode)
	}
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		b.t.Fatal(err)
	}
	return b.callback(back.RequestURI())
}

func (b *browser) callback(path string) string {
	b.t.Helper()
	resp, body := b.do("GET", path, "")
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("the callback answered %d %s", resp.StatusCode, body)
	}
	return resp.Header.Get("Location")
}

func (b *browser) data(method, path, body string, want int) map[string]any {
	b.t.Helper()
	resp, out := b.do(method, path, body)
	if resp.StatusCode != want {
		b.t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, out, want)
	}
	var env struct {
		Data     map[string]any   `json:"data"`
		Messages []map[string]any `json:"messages"`
	}
	_ = json.Unmarshal(out, &env)
	if env.Data == nil && len(env.Messages) > 0 {
		return env.Messages[0] // an error: its code
	}
	return env.Data
}

// ssoClient is a client whose people sign in through p, with its secret sealed as accounts
// seals it (the operator's PUT /me/sso needs a stepped-up ADMIN, which is what is tested here).
func ssoClient(t *testing.T, f *full, p *idp) (string, *pgx.Conn) {
	t.Helper()
	c, db := ssoClientOf(t, f, p, 1000)
	return c.ID, db
}

// ssoClientOf is ssoClient with the client's balance and features, and its first API key.
func ssoClientOf(t *testing.T, f *full, p *idp, balance int64, features ...accountsv1.Feature) (apptest.Client, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	c := f.accounts.CreateClient(t, balance, features...)
	db, err := pgx.Connect(ctx, f.accounts.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	ring, err := crypto.ParseKeyring(apptest.DataKeys)
	if err != nil {
		t.Fatal(err)
	}
	cfg := p.Config()
	sealed := ring.Seal([]byte(cfg.ClientSecret), []byte("accounts.sso_providers:"+c.ID))
	if _, err := db.Exec(ctx, `INSERT INTO accounts.sso_providers
		(client_id, issuer, oidc_client_id, client_secret, role_claim, admin_values, member_values, scopes)
		VALUES ($1, $2, $3, $4, 'groups', '{mnv-admins}', '{engineering}', '{groups}')`,
		c.ID, cfg.Issuer, cfg.ClientID, sealed); err != nil {
		t.Fatal(err)
	}
	return c, db
}

// signIn signs a new browser in through the provider as u.
func signIn(t *testing.T, s *stack, p *idp, clientID string, u *idpUser) *browser {
	t.Helper()
	b := &browser{t: t, s: s, cookies: map[string]string{}}
	p.QueueUser(u)
	start := b.data("POST", "/v1/api/console/sso/start", fmt.Sprintf(`{"clientId":%q}`, clientID), http.StatusOK)
	if at := b.viaIdP(start["authorizationUrl"].(string)); at != "/console/" {
		t.Fatalf("signed in through the provider, the browser went to %s", at)
	}
	if b.cookies["__Host-mnv-session"] == "" {
		t.Fatal("no session cookie after single sign-on")
	}
	return b
}

// TestSSOStepUp: a person of a client's single sign-on, past the step-up window, steps up
// through the provider: it is asked to authenticate them again, and the session (the same one:
// no new cookie, no new person) may then do what can hurt. The same flow refuses, and leaves
// the session as it was, for another person's login at the provider, an auth_time that is
// stale, older than the flow or missing, a replayed state, a callback without the flow's
// cookie, and a session ended meanwhile.
func TestSSOStepUp(t *testing.T) {
	f := startWith(t, apptest.Logger(t))
	p := startIdP(t)
	clientID, db := ssoClient(t, f, p)
	ctx := context.Background()

	boss := &idpUser{MockUser: mockoidc.MockUser{Subject: "sso-boss", Email: "boss@example.com", EmailVerified: true, Groups: []string{"mnv-admins"}}, authTime: time.Now()}
	other := &idpUser{MockUser: mockoidc.MockUser{Subject: "sso-other", Email: "other@example.com", EmailVerified: true, Groups: []string{"mnv-admins"}}, authTime: time.Now()}
	b := signIn(t, f.stack, p, clientID, boss)
	signIn(t, f.stack, p, clientID, other) // another person of the same client and provider
	session := b.cookies["__Host-mnv-session"]
	if s := b.data("GET", "/v1/api/console/session", "", http.StatusOK); s["singleSignOn"] != true {
		t.Fatalf("the session of a person of single sign-on: %v", s)
	}

	// Past the window: what can hurt asks for a step-up.
	stale := func() {
		t.Helper()
		if _, err := db.Exec(ctx, `UPDATE accounts.console_sessions SET stepped_up_at = now() - interval '1 hour' WHERE client_id = $1`, clientID); err != nil {
			t.Fatal(err)
		}
	}
	createKey := `{"name":"after step-up","role":"MEMBER"}`
	refused := func(why string) {
		t.Helper()
		if e := b.data("POST", "/v1/api/me/api-keys", createKey, http.StatusForbidden); e["code"] != "STEP_UP_REQUIRED" {
			t.Fatalf("%s: creating a key answered %v", why, e)
		}
	}
	stale()
	refused("past the window")

	// start begins a step-up as u at the provider, back to /console/keys.
	start := func(u *idpUser) string {
		t.Helper()
		p.QueueUser(u)
		return b.data("POST", "/v1/api/console/step-up/sso", `{"returnTo":"/console/keys"}`, http.StatusOK)["authorizationUrl"].(string)
	}
	people := func() (n int) {
		t.Helper()
		if err := db.QueryRow(ctx, `SELECT count(*) FROM accounts.people WHERE sso_client = $1`, clientID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := people()
	const failed = "/console/keys?step-up=failed"

	// Attacks, each refused with the session left as it was.
	for _, tt := range []struct {
		name string
		as   *idpUser
	}{
		{"another person's login at the provider", other},
		{"a subject the client does not know", &idpUser{MockUser: mockoidc.MockUser{Subject: "sso-stranger", Email: "boss@example.com", Groups: []string{"mnv-admins"}}, authTime: time.Now()}},
		{"a stale auth_time", &idpUser{MockUser: boss.MockUser, authTime: time.Now().Add(-time.Hour)}},
		{"an auth_time older than the flow (no new login)", &idpUser{MockUser: boss.MockUser, authTime: time.Now().Add(-3 * time.Minute)}},
		{"no auth_time", &idpUser{MockUser: boss.MockUser}},
	} {
		if at := b.viaIdP(start(tt.as)); at != failed {
			t.Fatalf("%s: the browser went to %s", tt.name, at)
		}
		refused(tt.name)
	}
	if n := people(); n != before {
		t.Fatalf("refused step-ups made people: %d, then %d", before, n)
	}

	// A callback without the flow's cookie (another browser, or a link someone was sent).
	auth := start(boss)
	resp, _ := b.do("GET", auth, "")
	back, _ := url.Parse(resp.Header.Get("Location"))
	binding := b.cookies["__Host-mnv-sso"]
	delete(b.cookies, "__Host-mnv-sso")
	if at := b.callback(back.RequestURI()); at != failed {
		t.Fatalf("a callback without the flow's cookie went to %s", at)
	}
	b.cookies["__Host-mnv-sso"] = binding
	refused("a callback without the flow's cookie")

	// The step-up itself: the provider is asked to authenticate again, with PKCE and a nonce
	// (the person last logged in there an hour ago: only that new login makes auth_time fresh),
	// and the same session is stepped up.
	fresh := &idpUser{MockUser: boss.MockUser, authTime: time.Now().Add(-time.Hour), honour: p}
	auth = start(fresh)
	resp, _ = b.do("GET", auth, "")
	ask := p.lastAsk()
	if ask.Get("prompt") != "login" || ask.Get("max_age") != "0" || ask.Get("code_challenge_method") != "S256" || ask.Get("nonce") == "" {
		t.Fatalf("the step-up asked the provider %v", ask)
	}
	back, _ = url.Parse(resp.Header.Get("Location"))
	if at := b.callback(back.RequestURI()); at != "/console/keys" {
		t.Fatalf("after a step-up the browser went to %s", at)
	}
	if b.cookies["__Host-mnv-session"] != session {
		t.Fatal("a step-up changed the session cookie")
	}
	if _, ok := b.cookies["__Host-mnv-sso"]; ok {
		t.Fatal("the flow's cookie outlived its callback")
	}
	b.data("POST", "/v1/api/me/api-keys", createKey, http.StatusOK)
	if s := b.data("GET", "/v1/api/console/session", "", http.StatusOK); s["steppedUpUntil"] == nil {
		t.Fatalf("the session after a step-up: %v", s)
	}
	var audited int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM accounts.audit_events WHERE client_id = $1 AND action = 'SsoStepUp'`, clientID).Scan(&audited); err != nil || audited != 1 {
		t.Fatalf("SsoStepUp audited %d times, %v", audited, err)
	}
	if n := people(); n != before {
		t.Fatalf("a step-up made a person: %d, then %d", before, n)
	}

	// The same callback again (its state replayed, the cookie kept): refused.
	stale()
	b.cookies["__Host-mnv-sso"] = binding
	if at := b.callback(back.RequestURI()); at != "/console/sign-in?sso=failed" {
		t.Fatalf("a replayed state went to %s", at)
	}
	refused("a replayed state")

	// A session that ended between leaving and coming back is not stepped up.
	auth = start(&idpUser{MockUser: boss.MockUser, authTime: time.Now()})
	b.data("POST", "/v1/api/console/session/sign-out", `{}`, http.StatusOK)
	if at := b.viaIdP(auth); at != failed {
		t.Fatalf("a step-up of an ended session went to %s", at)
	}
	var steppedUp bool
	if err := db.QueryRow(ctx, `SELECT stepped_up_at > now() - interval '1 minute' FROM accounts.console_sessions WHERE client_id = $1 AND ended_at IS NOT NULL`, clientID).Scan(&steppedUp); err != nil || steppedUp {
		t.Fatalf("the ended session stepped up: %v, %v", steppedUp, err)
	}
}

// TestAuditSurvivesAccountsMoment: accounts cannot record audit events for a few seconds (its
// table locked, so the gateway's attempt times out); the person's request is answered, and the
// event lands afterwards, once, with the time of the action.
func TestAuditSurvivesAccountsMoment(t *testing.T) {
	f := startWith(t, apptest.Logger(t))
	p := startIdP(t)
	clientID, db := ssoClient(t, f, p)
	ctx := context.Background()
	b := signIn(t, f.stack, p, clientID, &idpUser{MockUser: mockoidc.MockUser{Subject: "sso-audited", Email: "a@example.com", Groups: []string{"mnv-admins"}}, authTime: time.Now()})

	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE accounts.audit_events IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	acted := time.Now()
	b.data("POST", "/v1/api/me/api-keys", `{"name":"while accounts cannot record","role":"MEMBER"}`, http.StatusOK)
	if n := metricSum(t, f, "mnv_gateway_audit_events_retried_total"); n != 1 {
		t.Fatalf("events queued for retry: %v", n)
	}
	time.Sleep(time.Second)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var (
			n  int
			at time.Time
		)
		err := db.QueryRow(ctx, `SELECT count(*), coalesce(min(at), 'epoch') FROM accounts.audit_events WHERE client_id = $1 AND action = 'CreateApiKey'`, clientID).Scan(&n, &at)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			if at.Before(acted.Add(-time.Second)) || at.After(acted.Add(2*time.Second)) {
				t.Fatalf("the retried event is dated %s, the action was at %s", at, acted)
			}
			break
		}
		if n > 1 || time.Now().After(deadline) {
			t.Fatalf("%d events after accounts came back", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if d := metricSum(t, f, "mnv_gateway_audit_events_dropped_total"); d != 0 {
		t.Fatalf("events dropped: %v", d)
	}
}

// metricSum is the sum of a metric's series in the gateway's registry.
func metricSum(t *testing.T, f *full, name string) float64 {
	t.Helper()
	mfs, err := f.gateway.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// TestAuditDropsAreCounted: what the queue cannot keep is counted by reason, never silently
// lost: with room for one event and accounts unable to record, a third event finds the queue
// full, and what is still waiting when the gateway stops is counted as dropped at shutdown.
func TestAuditDropsAreCounted(t *testing.T) {
	acc := apptest.Start(t)
	ver := verificationtest.Start(t, acc.Addr, authtest.VerificationToken, nil)
	con := connecttest.Start(t, acc.Addr, authtest.ConnectToken, nil)
	cfg := app.DefaultConfig()
	cfg.AccountsAddr, cfg.VerificationAddr, cfg.ConnectAddr = acc.Addr, ver.Addr, con.Addr
	cfg.InternalToken = authtest.GatewayToken
	cfg.AuditQueue.Size = 1
	cfg.AuditQueue.First, cfg.AuditQueue.MinBackoff, cfg.AuditQueue.MaxBackoff, cfg.AuditQueue.Drain =
		500*time.Millisecond, 50*time.Millisecond, 200*time.Millisecond, 300*time.Millisecond
	reg := prometheus.NewRegistry()
	g, err := app.New(context.Background(), cfg, apptest.Logger(t), reg, reg)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = g.Close()
		}
	})
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	f := &full{stack: &stack{accounts: acc, handler: g.Handler(), url: srv.URL}, gateway: reg}

	p := startIdP(t)
	clientID, db := ssoClient(t, f, p)
	ctx := context.Background()
	b := signIn(t, f.stack, p, clientID, &idpUser{MockUser: mockoidc.MockUser{Subject: "sso-dropped", Email: "d@example.com", Groups: []string{"mnv-admins"}}, authTime: time.Now()})
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE accounts.audit_events IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	// One is being retried, one waits, the third finds no room.
	for i := range 3 {
		b.data("POST", "/v1/api/me/api-keys", fmt.Sprintf(`{"name":"k%d","role":"MEMBER"}`, i), http.StatusOK)
	}
	dropped := func(reason string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "mnv_gateway_audit_events_dropped_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "reason" && l.GetValue() == reason {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		return 0
	}
	if n := metricSum(t, f, "mnv_gateway_audit_events_retried_total"); n != 2 {
		t.Fatalf("events queued for retry: %v, want 2", n)
	}
	if n := dropped("full"); n != 1 {
		t.Fatalf("events dropped for a full queue: %v, want 1", n)
	}
	closed = true
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if n := dropped("shutdown"); n != 2 {
		t.Fatalf("events dropped at shutdown: %v, want 2", n)
	}
}
