package camara_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mnvhq/mnv/tests/harness"
)

// The facade held to the OAuth 2.0 and OpenID Connect texts a standard client relies on: a
// certified relying party (openid-client, in Node.js) runs the whole flow, and each rule such a
// client does not exercise by itself (PKCE bound to its code, the challenge method, errors that
// are the client's, CORS, the scopes granted) has its own case.

// oidcClientDir is the relying party's folder, relative to the checkout.
const oidcClientDir = "tests/camara/oidcclient"

var (
	oidcDepsOnce sync.Once
	oidcDepsErr  error
)

// oidcClientDeps installs the relying party's pinned npm packages (make oidcclient-deps: npm ci
// from the committed lock file, only when it changed), once per process and under a file lock:
// two npm ci in one folder break it.
func oidcClientDeps() error {
	oidcDepsOnce.Do(func() {
		root, err := harness.RepoRoot()
		if err != nil {
			oidcDepsErr = err
			return
		}
		lock, err := os.OpenFile(filepath.Join(os.TempDir(), "mnv-oidcclient-deps.lock"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			oidcDepsErr = err
			return
		}
		defer lock.Close()
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
			oidcDepsErr = err
			return
		}
		defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
		cmd := exec.Command("make", "-C", root, "oidcclient-deps")
		// A make above us (make test) must not hand its job server or flags to this one.
		cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MAKELEVEL=")
		if out, err := cmd.CombinedOutput(); err != nil {
			oidcDepsErr = fmt.Errorf("make oidcclient-deps: %w\n%s", err, out)
		}
	})
	return oidcDepsErr
}

// rpResult is what the relying party printed: the flow's outcome, or the stage it stopped at
// and the library's error.
type rpResult struct {
	OK           bool           `json:"ok"`
	Claims       map[string]any `json:"claims"`
	AccessToken  string         `json:"accessToken"`
	Scope        string         `json:"scope"`
	TokenType    string         `json:"tokenType"`
	ExpiresIn    float64        `json:"expiresIn"`
	RefreshToken string         `json:"refreshToken"`
	Stage        string         `json:"stage"`
	Name         string         `json:"name"`
	Code         string         `json:"code"`
	Message      string         `json:"message"`
	Cause        string         `json:"cause"`
	OAuthError   string         `json:"oauthError"`
}

// runRelyingParty runs the certified client's flow for c, the device on the sandbox's line
// number.
func runRelyingParty(t *testing.T, c harness.Client, scope, number string) rpResult {
	t.Helper()
	if err := oidcClientDeps(); err != nil {
		t.Fatal(err)
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]string{
		"issuer": suite.GatewayURL, "clientId": c.ID, "clientSecret": c.Secret, "redirectUri": redirectURI,
		"scope": scope, "numberHeader": sandboxHeader, "number": number,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "client.mjs", string(args))
	cmd.Dir = filepath.Join(root, oidcClientDir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var r rpResult
	if jerr := json.Unmarshal(out, &r); jerr != nil {
		t.Fatalf("the relying party printed no result (%v): %s %s", err, out, stderr.String())
	}
	return r
}

// TestCertifiedRelyingParty: openid-client, a certified OpenID Connect relying party, runs
// discovery, the code flow with PKCE S256, state and nonce, and the code exchange with its
// client secret, validating the ID token as the standard has it; the access token it gets is
// good for the API call. The ID token's subject is the flow's session, never the number.
func TestCertifiedRelyingParty(t *testing.T) {
	c := newClient(t, 100, "VERIFY,SANDBOX")
	n := nextNumber()
	r := runRelyingParty(t, c, "openid "+scopeVerify, n)
	if !r.OK {
		t.Fatalf("openid-client refused the flow at %s: %s %s: %s (%s %s)", r.Stage, r.Name, r.Code, r.Message, r.Cause, r.OAuthError)
	}
	sub, _ := r.Claims["sub"].(string)
	if sub == "" {
		t.Fatalf("no sub in the ID token: %v", r.Claims)
	}
	digits := strings.TrimPrefix(n, "+")
	if strings.Contains(sub, digits[len(digits)-7:]) || strings.Contains(fmt.Sprint(r.Claims), digits[len(digits)-7:]) {
		t.Fatalf("the ID token carries the number: %v", r.Claims)
	}
	if r.Claims["iss"] != suite.GatewayURL || fmt.Sprint(r.Claims["aud"]) != fmt.Sprint([]any{c.ID}) && r.Claims["aud"] != c.ID {
		t.Fatalf("iss/aud %v", r.Claims)
	}
	if r.RefreshToken != "" || strings.Contains(r.Scope, "offline_access") {
		t.Fatalf("refresh token %q, scope %q", r.RefreshToken, r.Scope)
	}
	if a := verify(t, r.AccessToken, fmt.Sprintf(`{"phoneNumber":%q}`, n)); a.status != http.StatusOK || a.body["devicePhoneNumberVerified"] != true {
		t.Fatalf("the relying party's token on /verify: %d %s", a.status, a.raw)
	}
	// Another flow is another subject: the subject names the flow's session, not a person.
	r2 := runRelyingParty(t, c, "openid "+scopeVerify, n)
	if !r2.OK || r2.Claims["sub"] == "" || r2.Claims["sub"] == sub {
		t.Fatalf("second flow: %+v (first sub %s)", r2, sub)
	}
}

// authorizeAnswer runs the device's part with params added to (or replacing) the usual request
// and returns the query the provider sent the redirect URI (a code, or an error).
func authorizeAnswer(t *testing.T, c harness.Client, params url.Values, number string) url.Values {
	t.Helper()
	q := url.Values{
		"response_type": {"code"}, "client_id": {c.ID}, "redirect_uri": {redirectURI},
		"scope": {"openid " + scopeVerify}, "state": {"st-42"},
	}
	for k, v := range params {
		q[k] = v
	}
	next := suite.GatewayURL + "/oauth2/authorize?" + q.Encode()
	for range 4 {
		req, _ := http.NewRequest(http.MethodGet, next, nil)
		if number != "" {
			req.Header.Set(sandboxHeader, number)
		}
		resp, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound {
			t.Fatalf("authorize %s: %d %s", next, resp.StatusCode, body)
		}
		next = resp.Header.Get("Location")
		if strings.HasPrefix(next, redirectURI) {
			u, _ := url.Parse(next)
			if u.Query().Get("state") != "st-42" {
				t.Fatalf("redirect %s", next)
			}
			return u.Query()
		}
		if strings.HasPrefix(next, "/") {
			next = suite.GatewayURL + next
		}
	}
	t.Fatalf("authorization never reached the redirect URI (last %s)", next)
	return nil
}

// exchangeWith trades a code with extra form fields (a code_verifier).
func exchangeWith(t *testing.T, c harness.Client, code string, extra url.Values) tokenAnswer {
	t.Helper()
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}}
	for k, v := range extra {
		form[k] = v
	}
	req, _ := http.NewRequest(http.MethodPost, suite.GatewayURL+"/oauth2/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(c.ID), url.QueryEscape(c.Secret))
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out tokenAnswer
	out.status = resp.StatusCode
	_ = json.NewDecoder(resp.Body).Decode(&out.body)
	return out
}

func pkcePair() (verifier, challenge string) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	verifier = base64.RawURLEncoding.EncodeToString(b)
	s := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(s[:])
}

// TestPKCE: a code issued for an S256 challenge is exchanged only with its verifier (none, or
// another, is refused without spending the code); a verifier for a code issued without a
// challenge is refused (the downgrade); and a challenge of any method but S256, the one
// discovery offers, is refused at the authorization endpoint, to the client, with no code.
func TestPKCE(t *testing.T) {
	c := newClient(t, 100, "VERIFY,SANDBOX")
	verifier, challenge := pkcePair()
	other, _ := pkcePair()
	s256 := url.Values{"code_challenge": {challenge}, "code_challenge_method": {"S256"}}

	exchanges := []struct {
		name     string
		params   url.Values // of the authorization
		tries    []url.Values
		final    url.Values // the exchange that succeeds, or nil when none does
		refusals []string   // the error each try gets
	}{
		{"S256 challenge, no verifier, then the right one", s256,
			[]url.Values{{}}, url.Values{"code_verifier": {verifier}}, []string{"invalid_request", "invalid_grant"}},
		{"S256 challenge, another verifier, then the right one", s256,
			[]url.Values{{"code_verifier": {other}}}, url.Values{"code_verifier": {verifier}}, []string{"invalid_grant"}},
		{"S256 challenge, an empty verifier", s256,
			[]url.Values{{"code_verifier": {""}}}, url.Values{"code_verifier": {verifier}}, []string{"invalid_request", "invalid_grant"}},
		{"no challenge, a verifier (downgrade)", url.Values{},
			[]url.Values{{"code_verifier": {verifier}}}, url.Values{}, []string{"invalid_request", "invalid_grant"}},
	}
	for _, tc := range exchanges {
		t.Run(tc.name, func(t *testing.T) {
			q := authorizeAnswer(t, c, tc.params, nextNumber())
			code := q.Get("code")
			if code == "" {
				t.Fatalf("no code: %v", q)
			}
			for _, try := range tc.tries {
				a := exchangeWith(t, c, code, try)
				e, _ := a.body["error"].(string)
				if a.status != http.StatusBadRequest || !containsString(tc.refusals, e) || a.body["access_token"] != nil {
					t.Fatalf("exchange with %v: %d %v, want 400 %v", try, a.status, a.body, tc.refusals)
				}
			}
			a := exchangeWith(t, c, code, tc.final)
			if a.status != http.StatusOK || a.body["access_token"] == nil {
				t.Fatalf("the proper exchange after the refusals: %d %v", a.status, a.body)
			}
		})
	}

	for _, tc := range []struct {
		name   string
		params url.Values
	}{
		{"plain", url.Values{"code_challenge": {verifier}, "code_challenge_method": {"plain"}}},
		{"method absent (plain by default)", url.Values{"code_challenge": {verifier}}},
		{"s256 spelled otherwise", url.Values{"code_challenge": {challenge}, "code_challenge_method": {"s256"}}},
	} {
		t.Run("refused method: "+tc.name, func(t *testing.T) {
			q := authorizeAnswer(t, c, tc.params, nextNumber())
			if q.Get("code") != "" || q.Get("error") != "invalid_request" {
				t.Fatalf("answer %v, want error=invalid_request and no code", q)
			}
		})
	}
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// errorLines counts the lines of a process's log at level error (zap's JSON and the standard
// library's log/slog text alike).
func errorLines(name string) int {
	n := 0
	for _, l := range strings.Split(suite.Logs(name), "\n") {
		if strings.Contains(l, `"level":"error"`) || strings.Contains(l, " ERROR ") || strings.Contains(l, "level=ERROR") {
			n++
		}
	}
	return n
}

// TestAuthorizeClientErrors: an authorization request whose client id is malformed, unknown or
// missing, or whose redirect URI is not the client's, is the client's mistake: 400 with an OAuth
// error, no redirect to the URI it names (it is not known to be the client's), and nothing
// logged as an error, since anyone can send such a request.
func TestAuthorizeClientErrors(t *testing.T) {
	c := newClient(t, 100, "VERIFY,SANDBOX")
	for _, tc := range []struct{ name, clientID, redirect string }{
		{"a malformed client id", "x", redirectURI},
		{"a client id of another shape", "' OR 1=1 --", redirectURI},
		{"an unknown client id", "6f1c2a3e-8b4d-4e5f-9a0b-1c2d3e4f5a6b", redirectURI},
		{"no client id", "", redirectURI},
		{"a redirect URI off the client's origins", c.ID, "https://evil.example/cb"},
		{"no redirect URI", c.ID, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := map[string]int{"verification": errorLines("verification"), "gateway": errorLines("gateway")}
			q := url.Values{"response_type": {"code"}, "scope": {"openid " + scopeVerify}, "state": {"s"}}
			if tc.clientID != "" {
				q.Set("client_id", tc.clientID)
			}
			if tc.redirect != "" {
				q.Set("redirect_uri", tc.redirect)
			}
			resp, err := noRedirects.Get(suite.GatewayURL + "/oauth2/authorize?" + q.Encode())
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var e struct{ Error string }
			_ = json.Unmarshal(body, &e)
			if resp.StatusCode != http.StatusBadRequest || e.Error == "" || resp.Header.Get("Location") != "" {
				t.Errorf("%d %q %s, want 400 with an OAuth error and no redirect", resp.StatusCode, resp.Header.Get("Location"), body)
			}
			// The logs are written as the request is answered; give the writes a moment.
			time.Sleep(200 * time.Millisecond)
			for name, n := range before {
				if after := errorLines(name); after != n {
					t.Errorf("%s logged %d error lines for a client's mistake", name, after-n)
				}
			}
		})
	}
}

// TestCORS: no endpoint of the provider lets another web origin read it with the browser's
// credentials. The public documents (discovery, the ID tokens' keys) may be read by any page,
// without credentials; the authorization and token endpoints answer no CORS at all.
func TestCORS(t *testing.T) {
	const evil = "https://evil.example"
	for _, tc := range []struct {
		method, path string
		preflight    bool
		wantAny      bool // Access-Control-Allow-Origin: * (and nothing else) is expected
	}{
		{http.MethodGet, "/.well-known/openid-configuration", false, true},
		{http.MethodGet, "/oauth2/keys", false, true},
		{http.MethodPost, "/oauth2/token", false, false},
		{http.MethodPost, "/oauth2/token", true, false},
		{http.MethodGet, "/oauth2/authorize", false, false},
		{http.MethodPost, "/number-verification/v2/verify", true, false},
	} {
		name := tc.method + " " + tc.path
		if tc.preflight {
			name = "preflight " + name
		}
		t.Run(name, func(t *testing.T) {
			method := tc.method
			var body io.Reader
			if method == http.MethodPost && !tc.preflight {
				body = strings.NewReader("grant_type=authorization_code&code=x")
			}
			if tc.preflight {
				method = http.MethodOptions
			}
			req, _ := http.NewRequest(method, suite.GatewayURL+tc.path, body)
			req.Header.Set("Origin", evil)
			if tc.preflight {
				req.Header.Set("Access-Control-Request-Method", tc.method)
				req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
			} else if body != nil {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			resp, err := noRedirects.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if v := resp.Header.Get("Access-Control-Allow-Credentials"); v != "" {
				t.Errorf("Access-Control-Allow-Credentials: %s", v)
			}
			acao := resp.Header.Values("Access-Control-Allow-Origin")
			switch {
			case tc.wantAny && (len(acao) != 1 || acao[0] != "*"):
				t.Errorf("Access-Control-Allow-Origin %q, want *", acao)
			case !tc.wantAny && len(acao) != 0:
				t.Errorf("Access-Control-Allow-Origin %q, want none", acao)
			}
		})
	}
}

// TestScopesGranted: the token answer grants only what the facade serves: offline_access (no
// refresh token is ever issued) and the userinfo scopes (no claim of theirs is ever given) are
// not echoed back as granted.
func TestScopesGranted(t *testing.T) {
	c := newClient(t, 100, "VERIFY,SANDBOX")
	q := authorizeAnswer(t, c, url.Values{"scope": {"openid offline_access profile email phone address " + scopeVerify}}, nextNumber())
	if q.Get("code") == "" {
		t.Fatalf("no code: %v", q)
	}
	a := exchangeWith(t, c, q.Get("code"), nil)
	if a.status != http.StatusOK {
		t.Fatalf("%d %v", a.status, a.body)
	}
	if _, ok := a.body["refresh_token"]; ok {
		t.Fatalf("a refresh token: %v", a.body)
	}
	granted := strings.Fields(fmt.Sprint(a.body["scope"]))
	for _, s := range granted {
		if s != "openid" && s != scopeVerify {
			t.Errorf("granted %q (scope %q)", s, a.body["scope"])
		}
	}
	if !containsString(granted, scopeVerify) {
		t.Errorf("scope %q lacks %s", a.body["scope"], scopeVerify)
	}
}
