package edgelimit_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"

	"github.com/mnvhq/mnv/gateway/internal/clientip"
	"github.com/mnvhq/mnv/gateway/internal/edgelimit"
	"github.com/mnvhq/mnv/services/platform/ratelimit"
)

const capturePath = "/v1/api/web/transactions/3f1c0c1e-7d1a-4a53-9f39-0f6f1e7c8a11/capture"

// edge serves the middleware in front of next, behind clientip's resolver trusting loopback,
// so a test chooses the client address with X-Forwarded-For. Budgets: 3 requests per address
// on the routes without credentials, 2 failed authentications per address, neither refilling
// within a test.
func edge(t *testing.T, next http.Handler) *httptest.Server {
	t.Helper()
	store, err := ratelimit.Open(ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	perAddress := store.Limiter("address", ratelimit.Limit{Rate: 0.01, Burst: 3})
	failures := store.Limiter("auth_failure", ratelimit.Limit{Rate: 0.01, Burst: 2})
	resolver := clientip.NewResolver([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")})
	srv := httptest.NewServer(clientip.Middleware(resolver)(edgelimit.Middleware(perAddress, failures, zap.NewNop())(next)))
	t.Cleanup(srv.Close)
	return srv
}

type request struct {
	method, path, from string
	headers            map[string]string
}

func send(t *testing.T, srv *httptest.Server, r request) *http.Response {
	t.Helper()
	req, err := http.NewRequest(r.method, srv.URL+r.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Forwarded-For", r.from)
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// wantLimited checks a 429 in the envelope with a Retry-After of 100s (a token every 100s).
func wantLimited(t *testing.T, what string, resp *http.Response) {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	var env struct {
		Success  bool `json:"success"`
		Messages []struct {
			Code       string `json:"code"`
			HTTPStatus string `json:"httpStatus"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("%s: %d %q is not an envelope", what, resp.StatusCode, body)
	}
	if resp.StatusCode != http.StatusTooManyRequests || env.Success || len(env.Messages) != 1 ||
		env.Messages[0].Code != "RATE_LIMITED" || env.Messages[0].HTTPStatus != "TOO_MANY_REQUESTS" {
		t.Fatalf("%s: %d %s, want 429 RATE_LIMITED", what, resp.StatusCode, body)
	}
	if got := resp.Header.Get("Retry-After"); got != "100" {
		t.Fatalf("%s: Retry-After %q, want 100", what, got)
	}
}

// TestPerAddress: the routes without a credential have a budget per address and route group;
// other routes, other addresses and other groups are not affected.
func TestPerAddress(t *testing.T) {
	var reached atomic.Int64
	srv := edge(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { reached.Add(1) }))
	steps := []struct {
		name    string
		req     request
		limited bool
	}{
		{"capture 1", request{"POST", capturePath, "203.0.113.1", nil}, false},
		{"preflight 2 (same budget)", request{"OPTIONS", capturePath, "203.0.113.1", nil}, false},
		{"capture 3", request{"POST", capturePath, "203.0.113.1", nil}, false},
		{"capture 4: over the address's budget", request{"POST", capturePath, "203.0.113.1", nil}, true},
		{"preflight 5: over it too", request{"OPTIONS", capturePath, "203.0.113.1", nil}, true},
		{"another address", request{"POST", capturePath, "203.0.113.2", nil}, false},
		{"the bootstrap: its own budget", request{"POST", "/v1/api/me/api-key/generate", "203.0.113.1", map[string]string{"X-Client-Id": "c"}}, false},
		{"the API description: its own budget", request{"GET", "/v1/api/openapi.json", "203.0.113.1", nil}, false},
		{"its reference page: the same budget", request{"GET", "/v1/api/docs", "203.0.113.1", nil}, false},
		{"the page's script: the same budget", request{"GET", "/v1/api/docs/redoc.standalone.js", "203.0.113.1", nil}, false},
		{"the page again: over it", request{"GET", "/v1/api/docs", "203.0.113.1", nil}, true},
		{"a route with credentials: not per address", request{"GET", "/v1/api/operators", "203.0.113.1", nil}, false},
		{"another method of the capture path", request{"GET", capturePath, "203.0.113.1", nil}, false},
		{"bootstrap 2", request{"POST", "/v1/api/me/api-key/generate", "203.0.113.1", nil}, false},
		{"bootstrap 3", request{"POST", "/v1/api/me/api-key/generate", "203.0.113.1", nil}, false},
		{"bootstrap 4", request{"POST", "/v1/api/me/api-key/generate", "203.0.113.1", nil}, true},
		// One subscriber holds a whole IPv6 /64: its addresses share a budget.
		{"v6 1", request{"POST", capturePath, "2001:db8:1:2::1", nil}, false},
		{"v6 2", request{"POST", capturePath, "2001:db8:1:2::2", nil}, false},
		{"v6 3", request{"POST", capturePath, "2001:db8:1:2:ffff::3", nil}, false},
		{"v6 4: the same /64", request{"POST", capturePath, "2001:db8:1:2::4", nil}, true},
		{"v6 in another /64", request{"POST", capturePath, "2001:db8:1:3::1", nil}, false},
	}
	for _, s := range steps {
		before := reached.Load()
		resp := send(t, srv, s.req)
		if s.limited {
			wantLimited(t, s.name, resp)
			if reached.Load() != before {
				t.Fatalf("%s: a refused request reached the handler", s.name)
			}
			continue
		}
		if resp.StatusCode != http.StatusOK || reached.Load() != before+1 {
			t.Fatalf("%s: %d, want it through", s.name, resp.StatusCode)
		}
	}
}

// TestFailedAuthentications: each 401 spends a token of the address; once spent, requests that
// carry a credential are answered 429 without reaching the handler, while requests without
// one, answers other than 401 and other addresses are not held.
func TestFailedAuthentications(t *testing.T) {
	var reached atomic.Int64
	srv := edge(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		if r.Header.Get("X-Api-Key") == "good" {
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	bad := map[string]string{"X-Api-Key": "bad", "X-Client-Id": "c"}
	good := map[string]string{"X-Api-Key": "good", "X-Client-Id": "c"}
	steps := []struct {
		name string
		req  request
		want int
	}{
		{"a success spends nothing", request{"GET", "/v1/api/operators", "198.51.100.1", good}, http.StatusOK},
		{"bad key 1", request{"GET", "/v1/api/operators", "198.51.100.1", bad}, http.StatusUnauthorized},
		{"a success in between", request{"GET", "/v1/api/operators", "198.51.100.1", good}, http.StatusOK},
		{"bad key 2", request{"GET", "/v1/api/operators", "198.51.100.1", bad}, http.StatusUnauthorized},
		{"bad key 3: budget spent", request{"GET", "/v1/api/operators", "198.51.100.1", bad}, http.StatusTooManyRequests},
		{"a good key from the address: held too", request{"GET", "/v1/api/clients", "198.51.100.1", good}, http.StatusTooManyRequests},
		{"an SDK token from the address", request{"POST", "/v1/api/sdk/session", "198.51.100.1", map[string]string{"X-Sdk-Token": "t", "X-Client-Id": "c"}}, http.StatusTooManyRequests},
		{"the bootstrap (client id and secret)", request{"POST", "/v1/api/me/api-key/generate", "198.51.100.1", map[string]string{"X-Client-Id": "c"}}, http.StatusTooManyRequests},
		{"no credential: costs no lookup, not held", request{"GET", "/v1/api/operators", "198.51.100.1", nil}, http.StatusUnauthorized},
		{"another address", request{"GET", "/v1/api/operators", "198.51.100.2", bad}, http.StatusUnauthorized},
	}
	for _, s := range steps {
		before := reached.Load()
		resp := send(t, srv, s.req)
		if s.want == http.StatusTooManyRequests {
			wantLimited(t, s.name, resp)
			if reached.Load() != before {
				t.Fatalf("%s: a refused request reached the handler", s.name)
			}
			continue
		}
		if resp.StatusCode != s.want || reached.Load() != before+1 {
			t.Fatalf("%s: %d, want %d from the handler", s.name, resp.StatusCode, s.want)
		}
	}
}
