package e2e_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/services/platform/redistest"
	"github.com/mnvhq/mnv/tests/harness"
)

// limitsEnv: small budgets, and the per-address ones shared through Redis as in production.
// Loopback is a trusted proxy, so each test speaks from addresses of its own.
var limitsEnv = []string{
	"MNV_CLIENT_RATE=1", "MNV_CLIENT_BURST=5",
	"MNV_IP_RATE=0.1", "MNV_IP_BURST=3",
	"MNV_AUTH_FAILURE_RATE=0.1", "MNV_AUTH_FAILURE_BURST=4",
	"MNV_TRUSTED_PROXIES=127.0.0.1/32,::1/128",
}

// randomAddr is an address of the benchmarking range 198.18.0.0/15, new for every call: the
// budgets live in a Redis that outlives the suite, so addresses must not meet across runs.
func randomAddr() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("198.%d.%d.%d", 18+b[0]%2, b[1], 1+b[2]%254)
}

// untilLimited repeats a request until it is answered 429 (at most 30 times) and returns that
// answer; the budgets refill at one a second, so a loop, not a count, finds the end of one.
func untilLimited(t *testing.T, what string, do func() response) response {
	t.Helper()
	for range 30 {
		if r := do(); r.status == http.StatusTooManyRequests {
			return r
		} else if r.status >= 500 {
			t.Fatalf("%s: %d %s", what, r.status, r.raw)
		}
	}
	t.Fatalf("%s: 30 quick requests were never limited", what)
	return response{}
}

// wantRateLimited checks a 429 in the envelope, with Retry-After in whole seconds.
func wantRateLimited(t *testing.T, what string, r response, maxWait int) {
	t.Helper()
	if r.status != http.StatusTooManyRequests || r.code() != "RATE_LIMITED" {
		t.Fatalf("%s: %d %s, want 429 RATE_LIMITED", what, r.status, r.raw)
	}
	if n, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || n < 1 || n > maxWait {
		t.Fatalf("%s: Retry-After %q, want 1 to %d seconds", what, r.header.Get("Retry-After"), maxWait)
	}
}

// authenticateCalls reads accounts' count of Authenticate calls (the API-key check every other
// service asks accounts for) from its Prometheus endpoint.
func authenticateCalls(t *testing.T, metricsAddr string) int {
	t.Helper()
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	total := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "grpc_server_handled_total{") ||
			!strings.Contains(line, `grpc_service="mnv.accounts.v1.AccountsInternalService"`) ||
			!strings.Contains(line, `grpc_method="Authenticate"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		total += v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return int(total)
}

// TestLimits runs its own suite with small budgets shared through a real Redis (MNV_REDIS_URL),
// as the prod overlay does: per credential in every service, per address at the gateway.
func TestLimits(t *testing.T) {
	metricsAddr, err := harness.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	s, err := harness.Start(context.Background(), harness.Options{
		Env:        append(limitsEnv, "MNV_REDIS_URL="+redistest.URL(t)),
		ProcessEnv: map[string][]string{"accounts": {"MNV_METRICS_ADDR=" + metricsAddr}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	client := func(features string) harness.Client {
		c, err := s.CreateClient(context.Background(), 100, "--features", features)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	// The case: an SDK token used by many app installs spends its own budget, and the
	// client's backend API key keeps working.
	t.Run("an SDK token cannot spend the API key's budget", func(t *testing.T) {
		c := client("VERIFY,SANDBOX")
		token := sdkToken(t, s, c)
		r := untilLimited(t, "SDK sessions", func() response {
			return callSuite(t, s, "POST", "/v1/api/sdk/session", headers{"X-Sdk-Token": token, "X-Client-Id": c.ID}, `{"platform":"ANDROID"}`)
		})
		wantRateLimited(t, "SDK session over the token's budget", r, 1)
		if r := callSuite(t, s, "GET", "/v1/api/operators", keyOf(c), ""); r.status != http.StatusOK {
			t.Fatalf("the API key after the SDK token's budget ran out: %d %s", r.status, r.raw)
		}
	})

	t.Run("accounts limits each credential", func(t *testing.T) {
		c := client("VERIFY")
		r := callSuite(t, s, "POST", "/v1/api/me/api-keys", meOf(c), `{"name":"second","role":"MEMBER"}`)
		var second struct {
			APIKey string `json:"apiKey"`
		}
		r.decode(t, &second)
		r = untilLimited(t, "GET /clients", func() response { return callSuite(t, s, "GET", "/v1/api/clients", keyOf(c), "") })
		wantRateLimited(t, "accounts", r, 1)
		// Another key of the same client has its own budget.
		if r := callSuite(t, s, "GET", "/v1/api/clients", headers{"X-Api-Key": second.APIKey, "X-Client-Id": c.ID}, ""); r.status != http.StatusOK {
			t.Fatalf("the client's other key: %d %s", r.status, r.raw)
		}
	})

	t.Run("connect limits each credential, its upload stream too", func(t *testing.T) {
		c := client("CONNECT")
		r := untilLimited(t, "GET profiles", func() response {
			return callSuite(t, s, "GET", "/v1/api/me/connect/profiles", meOf(c), "")
		})
		wantRateLimited(t, "connect", r, 1)
		r = untilLimited(t, "upload", func() response {
			return postUpload(t, s, c, "one.csv", []byte("mobileNumber\n"+nextNumber()+"\n"))
		})
		wantRateLimited(t, "connect upload", r, 1)
	})

	t.Run("the browser capture is limited per address", func(t *testing.T) {
		from := randomAddr()
		capture := func() response {
			return callSuite(t, s, "POST", "/v1/api/web/transactions/3f1c0c1e-7d1a-4a53-9f39-0f6f1e7c8a11/capture",
				headers{"X-Forwarded-For": from, "Origin": "https://shop.example"}, "")
		}
		for i := range 3 {
			if r := capture(); r.status == http.StatusTooManyRequests || r.status >= 500 {
				t.Fatalf("capture %d within the burst: %d %s", i+1, r.status, r.raw)
			}
		}
		wantRateLimited(t, "4th capture from one address", capture(), 10)
		if r := callSuite(t, s, "POST", "/v1/api/web/transactions/3f1c0c1e-7d1a-4a53-9f39-0f6f1e7c8a11/capture",
			headers{"X-Forwarded-For": randomAddr()}, ""); r.status == http.StatusTooManyRequests {
			t.Fatalf("another address was limited: %s", r.raw)
		}
	})

	t.Run("the bootstrap is limited per address", func(t *testing.T) {
		c := client("VERIFY")
		from := randomAddr()
		bootstrap := func() response {
			return callSuite(t, s, "POST", "/v1/api/me/api-key/generate",
				headers{"X-Client-Id": c.ID, "X-Forwarded-For": from}, `{"secretKey":"mnvsec_wrong"}`)
		}
		for i := range 3 {
			if r := bootstrap(); r.status != http.StatusUnauthorized {
				t.Fatalf("bootstrap %d with a wrong secret: %d %s", i+1, r.status, r.raw)
			}
		}
		wantRateLimited(t, "4th bootstrap from one address", bootstrap(), 10)
	})

	// A key-guessing loop: the budget of failed authentications per address stops it at the
	// edge, so accounts is asked exactly the burst's worth of times.
	t.Run("failed authentications are limited per address", func(t *testing.T) {
		c := client("VERIFY")
		from := randomAddr()
		before := authenticateCalls(t, metricsAddr)
		unauthorized, limited := 0, 0
		for i := range 12 {
			guess := headers{"X-Api-Key": fmt.Sprintf("mnv_%040d", i), "X-Client-Id": c.ID, "X-Forwarded-For": from}
			switch r := callSuite(t, s, "GET", "/v1/api/operators", guess, ""); r.status {
			case http.StatusUnauthorized:
				unauthorized++
			case http.StatusTooManyRequests:
				wantRateLimited(t, "a guess over the budget", r, 10)
				limited++
			default:
				t.Fatalf("guess %d: %d %s", i+1, r.status, r.raw)
			}
		}
		calls := authenticateCalls(t, metricsAddr) - before
		if unauthorized != 4 || limited != 8 || calls != 4 {
			t.Fatalf("12 guesses: %d answered 401, %d answered 429, %d authentications in accounts; want 4, 8, 4", unauthorized, limited, calls)
		}
		// The client's real key from another address is not held.
		if r := callSuite(t, s, "GET", "/v1/api/operators", keyOf(c), ""); r.status != http.StatusOK {
			t.Fatalf("the real key from another address: %d %s", r.status, r.raw)
		}
	})
}
