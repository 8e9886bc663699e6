package facade_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestRedirectURIIsMatchedExactly: an authorization sends its code only to a redirect URI the
// client registered, the whole string; anything else, even on the registered URI's own origin,
// is the request's fault (400 with an OAuth error, never a redirect), since a code sent to
// another page of the site is a code given to whoever controls that page.
func TestRedirectURIIsMatchedExactly(t *testing.T) {
	s := newStack(t)
	d := device{gammaAddr, "+971550000001", ""}
	owner, _ := s.client([]string{"VERIFY"}, "gamma:HEADER_ENRICHMENT")
	other, _ := s.client([]string{"VERIFY"}, "gamma:HEADER_ENRICHMENT")
	none, _ := s.client([]string{"VERIFY"}, "gamma:HEADER_ENRICHMENT")
	s.accounts.mu.Lock()
	c := s.accounts.clients[other]
	c.redirects = []string{"https://other.example/cb"}
	s.accounts.clients[other] = c
	c = s.accounts.clients[none]
	c.redirects = []string{}
	s.accounts.clients[none] = c
	s.accounts.mu.Unlock()

	tests := []struct {
		name, client, redirect string
		want                   string // the error description's part; "" is a code sent to redirect
	}{
		{"the registered URI", owner, redirectURI, ""},
		{"another path on the same origin", owner, origin + "/elsewhere", "not one the client registered"},
		{"a longer path", owner, redirectURI + "/more", "not one the client registered"},
		{"an added query", owner, redirectURI + "?next=https://evil.example", "not one the client registered"},
		{"an empty query", owner, redirectURI + "?", "not one the client registered"},
		{"a fragment", owner, redirectURI + "#x", "not one the client registered"},
		{"another client's URI", owner, "https://other.example/cb", "not one the client registered"},
		{"this URI for the client that registered another", other, redirectURI, "not one the client registered"},
		{"a client that registered none", none, redirectURI, "no redirect URI is registered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := url.Values{
				"response_type": {"code"}, "client_id": {tt.client}, "redirect_uri": {tt.redirect},
				"scope": {"openid " + scopeVerify}, "state": {"client-state"}, "prompt": {"none"},
			}
			next := s.issuer + "/oauth2/authorize?" + q.Encode()
			var last *http.Response
			var body []byte
			for range 4 {
				req, _ := http.NewRequest(http.MethodGet, next, nil)
				req.Header.Set(addrHeader, d.addr)
				req.Header.Set(gammaHeader, d.heNumber)
				resp, err := noRedirects.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				last = resp
				if resp.StatusCode != http.StatusFound {
					break
				}
				loc, _ := url.Parse(resp.Header.Get("Location"))
				next = req.URL.ResolveReference(loc).String()
				if !strings.HasPrefix(next, s.issuer) {
					break
				}
			}
			if tt.want == "" {
				u, _ := url.Parse(next)
				if last.StatusCode != http.StatusFound || !strings.HasPrefix(next, tt.redirect+"?") || u.Query().Get("code") == "" {
					t.Fatalf("%d, ended at %s; want a code sent to %s", last.StatusCode, next, tt.redirect)
				}
				return
			}
			if last.StatusCode != http.StatusBadRequest || last.Header.Get("Location") != "" {
				t.Fatalf("%d to %q (%s), want 400 and no redirect", last.StatusCode, last.Header.Get("Location"), body)
			}
			var e struct {
				Error       string `json:"error"`
				Description string `json:"error_description"`
			}
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("not an OAuth error body: %s", body)
			}
			if e.Error != "invalid_request" || !strings.Contains(e.Description, tt.want) {
				t.Fatalf("error %q %q, want invalid_request saying %q", e.Error, e.Description, tt.want)
			}
		})
	}
}
