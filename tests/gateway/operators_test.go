package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mnvhq/mnv/gateway/app"
	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/app/apptest"
	"github.com/mnvhq/mnv/services/platform/auth/authtest"
	verificationapp "github.com/mnvhq/mnv/services/verification/app"
	verificationtest "github.com/mnvhq/mnv/services/verification/app/apptest"
)

// operatorsRegistry: acme's proxy speaks from loopback (where every request of this test comes
// from), beta's from elsewhere, and the sandbox from loopback too but after acme, so a request
// from loopback is acme's.
const operatorsRegistry = `operators:
  - id: acme
    name: Acme Mobile
    country: AE
    methods: [HEADER_ENRICHMENT]
    headerEnrichment: {trustedRanges: ["127.0.0.0/8", "::1/128"], numberHeader: X-Acme-Msisdn}
  - id: beta
    name: Beta Telecom
    country: AE
    methods: [HEADER_ENRICHMENT]
    headerEnrichment: {trustedRanges: ["192.0.2.0/24"], numberHeader: X-Beta-Msisdn}
  - id: sandbox
    name: mnv sandbox
    country: ZZ
    methods: [HEADER_ENRICHMENT]
    sandbox: true
    headerEnrichment: {trustedRanges: ["127.0.0.0/8"], numberHeader: X-Mnv-Sandbox-Msisdn}
`

// startWithRegistry is accounts, verification (with registry) and the gateway (passing
// numberHeaders) over real sockets.
func startWithRegistry(t *testing.T, registry string, numberHeaders ...string) *stack {
	t.Helper()
	file := filepath.Join(t.TempDir(), "operators.yaml")
	if err := os.WriteFile(file, []byte(registry), 0o600); err != nil {
		t.Fatal(err)
	}
	acc := apptest.Start(t)
	ver := verificationtest.Start(t, acc.Addr, authtest.VerificationToken, func(c *verificationapp.Config) { c.OperatorsFile = file })
	cfg := app.DefaultConfig()
	// No connect: these tests never reach it.
	cfg.AccountsAddr, cfg.VerificationAddr, cfg.ConnectAddr = acc.Addr, ver.Addr, refusingAddr(t)
	cfg.InternalToken = authtest.GatewayToken
	cfg.NumberHeaders = numberHeaders
	reg := prometheus.NewRegistry()
	g, err := app.New(context.Background(), cfg, apptest.Logger(t), reg, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	return &stack{accounts: acc, handler: g.Handler(), url: srv.URL}
}

// TestOperatorsArePerClient: through the gateway and the real services, each client sees and
// uses only the operators (and methods) the operator of the service enabled for it, and a
// change of its enablement applies to its next request.
func TestOperatorsArePerClient(t *testing.T) {
	s := startWithRegistry(t, operatorsRegistry, "X-Acme-Msisdn", "X-Beta-Msisdn", "X-Mnv-Sandbox-Msisdn")
	ctx := context.Background()
	he, api := accountsv1.OperatorMethod_OPERATOR_METHOD_HEADER_ENRICHMENT, accountsv1.OperatorMethod_OPERATOR_METHOD_NETWORK_API
	features := []accountsv1.Feature{accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX}
	enable := func(c apptest.Client, grants ...*accountsv1.OperatorGrant) {
		t.Helper()
		if _, err := s.accounts.Admin.SetClientOperators(ctx, &accountsv1.SetClientOperatorsRequest{
			ClientId: c.ID, Operators: &accountsv1.OperatorEnablement{Grants: grants},
		}); err != nil {
			t.Fatal(err)
		}
	}
	// A may use acme; B may use beta, and acme's network API, which acme does not offer.
	a := s.accounts.CreateClient(t, 10, features...)
	enable(a, &accountsv1.OperatorGrant{OperatorId: "acme", Methods: []accountsv1.OperatorMethod{he}})
	b := s.accounts.CreateClient(t, 10, features...)
	enable(b, &accountsv1.OperatorGrant{OperatorId: "beta", Methods: []accountsv1.OperatorMethod{he}},
		&accountsv1.OperatorGrant{OperatorId: "acme", Methods: []accountsv1.OperatorMethod{api}})
	// C has the default set: the sandbox alone.
	c := s.accounts.CreateClient(t, 10, features...)

	listed := func(cl apptest.Client) []string {
		t.Helper()
		var out []string
		for _, it := range s.data(t, call{method: "GET", path: "/v1/api/operators", headers: keyHeaders(cl)})["items"].([]any) {
			op := it.(map[string]any)
			var types []string
			for _, st := range op["serviceTypes"].([]any) {
				types = append(types, st.(string))
			}
			out = append(out, op["id"].(string)+":"+strings.Join(types, "+"))
		}
		return out
	}
	for _, tt := range []struct {
		name   string
		client apptest.Client
		want   []string
	}{
		{"A", a, []string{"acme:HEADER_ENRICHMENT"}},
		{"B", b, []string{"beta:HEADER_ENRICHMENT"}},
		{"C, the default set", c, []string{"sandbox:HEADER_ENRICHMENT"}},
	} {
		if got := listed(tt.client); !slices.Equal(got, tt.want) {
			t.Errorf("%s lists %v, want %v", tt.name, got, tt.want)
		}
	}

	const number = "+971501234567"
	session := func(cl apptest.Client, body string) answer {
		t.Helper()
		token := s.data(t, call{method: "POST", path: "/v1/api/me/sdk-tokens", headers: meHeaders(cl), body: `{"label":"app"}`})["sdkToken"].(string)
		return s.do(t, call{method: "POST", path: "/v1/api/sdk/session", body: body,
			headers: map[string]string{"X-SDK-TOKEN": token, "X-CLIENT-ID": cl.ID, "X-Acme-Msisdn": number, "X-Mnv-Sandbox-Msisdn": number}})
	}
	sessionData := func(a answer) map[string]any {
		t.Helper()
		var env struct{ Data map[string]any }
		if a.status != http.StatusOK || json.Unmarshal(a.body, &env) != nil {
			t.Fatalf("session: %d %s", a.status, a.body)
		}
		return env.Data
	}
	verify := func(cl apptest.Client, blob, operator, serviceType string) answer {
		return s.do(t, call{method: "POST", path: "/v1/api/verify", headers: keyHeaders(cl),
			body: `{"mobileNumber":"` + number + `","encryptedMobileNumber":"` + blob + `","operatorId":"` + operator + `","serviceType":"` + serviceType + `"}`})
	}
	notEnabled := func(t *testing.T, got answer, field string) {
		t.Helper()
		var env struct {
			Messages []struct{ Code, Field string }
		}
		if got.status != http.StatusBadRequest || json.Unmarshal(got.body, &env) != nil || len(env.Messages) != 1 ||
			env.Messages[0].Code != "FEATURE_NOT_ENABLED" || env.Messages[0].Field != field {
			t.Fatalf("%d %s, want 400 FEATURE_NOT_ENABLED on %s", got.status, got.body, field)
		}
	}

	// A's phone on acme's network: acme vouches for the number, and A verifies it.
	sa := sessionData(session(a, `{"platform":"IOS"}`))
	if sa["status"] != "CAPTURED" || sa["operatorId"] != "acme" {
		t.Fatalf("A's session %v, want CAPTURED through acme", sa)
	}
	blobA := sa["encryptedMobileNumber"].(string)
	t.Run("A may not use another operator or method", func(t *testing.T) {
		notEnabled(t, verify(a, blobA, "beta", "HEADER_ENRICHMENT"), "operatorId")
		notEnabled(t, verify(a, blobA, "sandbox", "HEADER_ENRICHMENT"), "operatorId")
		notEnabled(t, verify(a, blobA, "acme", "NETWORK_API"), "serviceType")
		notEnabled(t, session(a, `{"platform":"IOS","operatorId":"beta"}`), "operatorId")
	})
	if got := s.data(t, call{method: "POST", path: "/v1/api/verify", headers: keyHeaders(a),
		body: `{"mobileNumber":"` + number + `","encryptedMobileNumber":"` + blobA + `","operatorId":"acme","serviceType":"HEADER_ENRICHMENT"}`}); got["status"] != "VERIFIED" {
		t.Fatalf("A's verify: %v", got)
	}

	// The same phone for B: acme is not B's, so its network shows B nothing.
	sb := sessionData(session(b, `{"platform":"IOS"}`))
	if sb["status"] != "NO_NETWORK_IDENTITY" || sb["operatorId"] != nil {
		t.Fatalf("B's session %v, want NO_NETWORK_IDENTITY through no operator", sb)
	}
	t.Run("B may not use acme", func(t *testing.T) {
		notEnabled(t, session(b, `{"platform":"IOS","operatorId":"acme"}`), "operatorId")
		notEnabled(t, verify(b, sb["encryptedMobileNumber"].(string), "acme", "HEADER_ENRICHMENT"), "operatorId")
		notEnabled(t, verify(b, sb["encryptedMobileNumber"].(string), "acme", "NETWORK_API"), "operatorId")
	})

	// C, with the default set, captures through the sandbox only when it names it: acme comes
	// first for a loopback address, and acme is not C's.
	if sc := sessionData(session(c, `{"platform":"IOS"}`)); sc["status"] != "NO_NETWORK_IDENTITY" {
		t.Fatalf("C's session %v", sc)
	}
	if sc := sessionData(session(c, `{"platform":"IOS","operatorId":"sandbox"}`)); sc["status"] != "CAPTURED" || sc["operatorId"] != "sandbox" {
		t.Fatalf("C's sandbox session %v", sc)
	}

	// The browser flow: the same rule, from the enablement the client had when the flow started.
	capture := func(cl apptest.Client) map[string]any {
		t.Helper()
		s.data(t, call{method: "PUT", path: "/v1/api/me/web-origins", headers: meHeaders(cl), body: `{"origins":["https://shop.example"]}`})
		tr := s.data(t, call{method: "POST", path: "/v1/api/opportunity", headers: keyHeaders(cl),
			body: `{"serviceCode":"VERIFY","metadataId":"order-1"}`})["transactionId"].(string)
		return s.data(t, call{method: "POST", path: "/v1/api/web/transactions/" + tr + "/capture",
			headers: map[string]string{"Origin": "https://shop.example", "X-Acme-Msisdn": number}})
	}
	if got := capture(a); got["status"] != "CAPTURED" || got["operatorId"] != "acme" {
		t.Fatalf("A's browser capture %v, want CAPTURED through acme", got)
	}
	if got := capture(b); got["status"] != "NO_NETWORK_IDENTITY" || got["operatorId"] != nil {
		t.Fatalf("B's browser capture %v, want NO_NETWORK_IDENTITY", got)
	}

	// The operator of the service takes acme from A: within a second, the bound of the
	// principal caches' push (accounts' WatchPrincipals), A's requests no longer have it. The
	// change reaches the caches after SetClientOperators answers, so the very next request may
	// still see the old principal on a loaded machine.
	second := sessionData(session(a, `{"platform":"IOS"}`))["encryptedMobileNumber"].(string)
	enable(a)
	for deadline := time.Now().Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
		got := listed(a)
		if len(got) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A lists %v a second after losing every operator", got)
		}
	}
	notEnabled(t, verify(a, second, "acme", "HEADER_ENRICHMENT"), "operatorId")
	if got := listed(b); !slices.Equal(got, []string{"beta:HEADER_ENRICHMENT"}) {
		t.Fatalf("B lists %v after A's change", got)
	}
}
