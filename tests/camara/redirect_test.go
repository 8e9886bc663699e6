package camara_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/tests/harness"
)

// authorizeTo opens the authorization endpoint of c for redirect, from the sandbox's network,
// and follows the provider's own redirects: it returns the last answer and where it pointed.
func authorizeTo(t *testing.T, c harness.Client, redirect string) (status int, location string, oauthErr map[string]string) {
	t.Helper()
	q := url.Values{
		"response_type": {"code"}, "client_id": {c.ID}, "redirect_uri": {redirect},
		"scope": {"openid " + scopeVerify}, "state": {"st-7"}, "prompt": {"none"},
	}
	next := suite.GatewayURL + "/oauth2/authorize?" + q.Encode()
	for range 4 {
		req, _ := http.NewRequest(http.MethodGet, next, nil)
		req.Header.Set(sandboxHeader, nextNumber())
		resp, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound {
			_ = json.Unmarshal(body, &oauthErr)
			return resp.StatusCode, resp.Header.Get("Location"), oauthErr
		}
		next = resp.Header.Get("Location")
		if strings.HasPrefix(next, "/") {
			next = suite.GatewayURL + next
		}
		if !strings.HasPrefix(next, suite.GatewayURL) {
			return resp.StatusCode, next, nil
		}
	}
	t.Fatalf("too many redirects (last %s)", next)
	return 0, "", nil
}

// TestRedirectURIIsExact: a code goes only to a redirect URI the client registered, the whole
// string; another page of the same origin, another query, a fragment or another client's URI
// is a 400 with an OAuth error and no redirect. A loopback IP literal over http may come on any
// port (native apps).
func TestRedirectURIIsExact(t *testing.T) {
	a := newClient(t, 100, "VERIFY,SANDBOX")
	b := newClient(t, 100, "VERIFY,SANDBOX")
	if out, err := suite.Mnvctl(t.Context(), "client", "redirect-uris", b.ID, "https://b.example/cb", "https://b.example/cb?x=1,2"); err != nil {
		t.Fatalf("redirect URIs: %v %s", err, out)
	}
	// The operator reads them back (a comma in a query is no separator), as client show does.
	for _, args := range [][]string{{"client", "redirect-uris", b.ID, "-o", "json"}, {"client", "show", b.ID, "-o", "json"}} {
		out, err := suite.Mnvctl(t.Context(), args...)
		if err != nil || !strings.Contains(string(out), `"redirectUris": [`) || !strings.Contains(string(out), `"https://b.example/cb?x=1,2"`) {
			t.Fatalf("mnvctl %s: %v %s", strings.Join(args, " "), err, out)
		}
	}
	none, err := suite.CreateClient(t.Context(), 100, "--features", "VERIFY,SANDBOX")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		c        harness.Client
		redirect string
		refused  string // a part of the error's description; "" is a code sent to redirect
	}{
		{"the registered URI", a, redirectURI, ""},
		{"the registered loopback URI on another port", a, "http://127.0.0.1:40123/camara/callback", ""},
		{"another page of the same origin", a, origin + "/elsewhere", "not one the client registered"},
		{"a longer path", a, redirectURI + "/x", "not one the client registered"},
		{"an added query", a, redirectURI + "?next=https://evil.example", "not one the client registered"},
		{"a fragment", a, redirectURI + "#x", "not one the client registered"},
		{"localhost for the loopback address", a, "http://localhost:7788/camara/callback", "not one the client registered"},
		{"another client's URI", a, "https://b.example/cb", "not one the client registered"},
		{"this URI for a client that registered another", b, redirectURI, "not one the client registered"},
		{"a client that registered none", none, redirectURI, "PUT /v1/api/me/redirect-uris"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, loc, e := authorizeTo(t, tc.c, tc.redirect)
			if tc.refused == "" {
				u, _ := url.Parse(loc)
				if status != http.StatusFound || !strings.HasPrefix(loc, tc.redirect+"?") || u.Query().Get("code") == "" {
					t.Fatalf("%d to %q, want a code sent to %s", status, loc, tc.redirect)
				}
				return
			}
			if status != http.StatusBadRequest || loc != "" || e["error"] != "invalid_request" || !strings.Contains(e["error_description"], tc.refused) {
				t.Fatalf("%d to %q %v, want 400 invalid_request saying %q and no redirect", status, loc, e, tc.refused)
			}
		})
	}
}

// TestRedirectURIsManagement: the client's ADMIN key registers its redirect URIs at
// /v1/api/me/redirect-uris, any of its keys reads them; a MEMBER key cannot change them, a key
// reaches only its own client's list, and what is not a redirect URI is refused with the reason.
func TestRedirectURIsManagement(t *testing.T) {
	a := newClient(t, 100, "VERIFY,SANDBOX")
	b := newClient(t, 100, "VERIFY,SANDBOX")
	member := me(t, http.MethodPost, "/api-keys", map[string]string{"X-API-KEY": a.APIKey}, `{"name":"reporting","role":"MEMBER"}`)
	memberKey, _ := member.data["apiKey"].(string)
	if member.status != http.StatusCreated && member.status != http.StatusOK || memberKey == "" {
		t.Fatalf("member key: %d %s", member.status, member.raw)
	}
	adminA := map[string]string{"X-API-KEY": a.APIKey}

	set := me(t, http.MethodPut, "/redirect-uris", adminA, `{"redirectUris":["https://shop.example/camara","https://shop.example/camara",`+
		`"`+redirectURI+`"]}`)
	if set.status != http.StatusOK || uris(set) != redirectURI+" https://shop.example/camara" {
		t.Fatalf("set: %d %s", set.status, set.raw)
	}
	if got := me(t, http.MethodGet, "/redirect-uris", map[string]string{"X-API-KEY": memberKey}, ""); got.status != http.StatusOK || uris(got) != uris(set) {
		t.Fatalf("member read: %d %s", got.status, got.raw)
	}
	// b's key reads and changes b's list, never a's.
	if got := me(t, http.MethodGet, "/redirect-uris", map[string]string{"X-API-KEY": b.APIKey}, ""); got.status != http.StatusOK || uris(got) != redirectURI {
		t.Fatalf("another client's read: %d %s", got.status, got.raw)
	}
	for _, tc := range []struct {
		name         string
		headers      map[string]string
		body         string
		status       int
		code, reason string
	}{
		{"a MEMBER key", map[string]string{"X-API-KEY": memberKey}, `{"redirectUris":["https://mallory.example/cb"]}`, http.StatusForbidden, "PERMISSION_DENIED", ""},
		{"no key", nil, `{"redirectUris":["https://mallory.example/cb"]}`, http.StatusUnauthorized, "UNAUTHENTICATED", ""},
		{"another client's key naming this client", map[string]string{"X-API-KEY": b.APIKey, "X-CLIENT-ID": a.ID}, `{"redirectUris":["https://mallory.example/cb"]}`, http.StatusUnauthorized, "UNAUTHENTICATED", ""},
		{"plain http", adminA, `{"redirectUris":["http://shop.example/cb"]}`, http.StatusBadRequest, "INVALID_ARGUMENT", "https"},
		{"a fragment", adminA, `{"redirectUris":["https://shop.example/cb#x"]}`, http.StatusBadRequest, "INVALID_ARGUMENT", "fragment"},
		{"a relative URI", adminA, `{"redirectUris":["/cb"]}`, http.StatusBadRequest, "INVALID_ARGUMENT", "absolute"},
		{"too long", adminA, `{"redirectUris":["https://shop.example/` + strings.Repeat("a", 600) + `"]}`, http.StatusBadRequest, "INVALID_ARGUMENT", "512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := me(t, http.MethodPut, "/redirect-uris", tc.headers, tc.body)
			if got.status != tc.status || got.errCode != tc.code || !strings.Contains(got.raw, tc.reason) {
				t.Fatalf("%d %s, want %d %s saying %q", got.status, got.raw, tc.status, tc.code, tc.reason)
			}
			if tc.code == "INVALID_ARGUMENT" && !strings.Contains(got.raw, "redirectUris") {
				t.Fatalf("the error does not name the field: %s", got.raw)
			}
		})
	}
	if got := me(t, http.MethodGet, "/redirect-uris", adminA, ""); uris(got) != uris(set) {
		t.Fatalf("after refusals: %s", got.raw)
	}
	if got := me(t, http.MethodGet, "/redirect-uris", map[string]string{"X-API-KEY": b.APIKey}, ""); uris(got) != redirectURI {
		t.Fatalf("b's list after the refusals: %s", got.raw)
	}
	// The list is read at each authorization: an URI removed is refused at once.
	if got := me(t, http.MethodPut, "/redirect-uris", adminA, `{"redirectUris":["https://shop.example/camara"]}`); got.status != http.StatusOK {
		t.Fatalf("replace: %d %s", got.status, got.raw)
	}
	if status, loc, _ := authorizeTo(t, a, redirectURI); status != http.StatusBadRequest || loc != "" {
		t.Fatalf("a removed redirect URI: %d to %q", status, loc)
	}
}

type meAnswer struct {
	status  int
	data    map[string]any
	errCode string
	raw     string
}

// me calls the client's own route /v1/api/me<path>.
func me(t *testing.T, method, path string, headers map[string]string, body string) meAnswer {
	t.Helper()
	req, _ := http.NewRequest(method, suite.GatewayURL+"/v1/api/me"+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env struct {
		Data     map[string]any `json:"data"`
		Messages []struct {
			Code string `json:"code"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(raw, &env)
	a := meAnswer{status: resp.StatusCode, data: env.Data, raw: string(raw)}
	if len(env.Messages) > 0 {
		a.errCode = env.Messages[0].Code
	}
	return a
}

// uris lists the answer's redirect URIs, space-separated, in its order.
func uris(a meAnswer) string {
	items, _ := a.data["items"].([]any)
	var out []string
	for _, it := range items {
		m, _ := it.(map[string]any)
		u, _ := m["uri"].(string)
		out = append(out, u)
	}
	return strings.Join(out, " ")
}
