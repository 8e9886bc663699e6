package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/gateway/app"
	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/app/apptest"
	connecttest "github.com/mnvhq/mnv/services/connect/app/apptest"
	"github.com/mnvhq/mnv/services/platform/auth/authtest"
	verificationapp "github.com/mnvhq/mnv/services/verification/app"
	verificationtest "github.com/mnvhq/mnv/services/verification/app/apptest"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// stack is a real accounts service and the gateway in front of it, over real sockets.
type stack struct {
	accounts *apptest.Server
	handler  http.Handler
	url      string
}

func start(t *testing.T) *stack { return startB(t) }

func startB(t testing.TB) *stack { return startWith(t, apptest.Logger(t)).stack }

// startWith starts every service and the gateway over real sockets, with log as the gateway's
// logger.
func startWith(t testing.TB, log *zap.Logger) *full { return startEditing(t, log, nil) }

// startEditing is startWith with verification's configuration edited (an operator registry).
func startEditing(t testing.TB, log *zap.Logger, edit func(*verificationapp.Config)) *full {
	t.Helper()
	acc := apptest.Start(t)
	ver := verificationtest.Start(t, acc.Addr, authtest.VerificationToken, edit)
	con := connecttest.Start(t, acc.Addr, authtest.ConnectToken, nil)
	cfg := app.DefaultConfig()
	cfg.AccountsAddr, cfg.VerificationAddr, cfg.ConnectAddr = acc.Addr, ver.Addr, con.Addr
	cfg.InternalToken = authtest.GatewayToken
	reg := prometheus.NewRegistry()
	g, err := app.New(context.Background(), cfg, log, reg, reg)
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
	return &full{stack: &stack{accounts: acc, handler: g.Handler(), url: srv.URL}, ver: ver, con: con, gateway: reg}
}

type call struct {
	method, path string
	headers      map[string]string
	body         string
}

type answer struct {
	status  int
	headers http.Header
	body    []byte
}

func (s *stack) do(t *testing.T, c call) answer {
	t.Helper()
	req, err := http.NewRequest(c.method, s.url+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, headers: resp.Header, body: body}
}

func (s *stack) data(t *testing.T, c call) map[string]any {
	t.Helper()
	a := s.do(t, c)
	if a.status != http.StatusOK {
		t.Fatalf("%s %s: %d %s", c.method, c.path, a.status, a.body)
	}
	var env struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(a.body, &env); err != nil {
		t.Fatal(err)
	}
	return env.Data
}

var (
	uuidRe      = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRe      = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$`)
	apiKeyRe    = regexp.MustCompile(`^mnv_[0-9A-Za-z]{40}$`)
	sdkTokenRe  = regexp.MustCompile(`^mnvsdk_[0-9A-Za-z]{40}$`)
	requestIDRe = regexp.MustCompile(`request id [0-9a-f]{32}`)
)

// normalise replaces the values that differ between runs (ids, times, credentials, hints) by
// placeholders, so whole bodies can be compared. A time that does not have exactly three
// fractional digits is left alone, and so fails the comparison.
func normalise(v any, key string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			x[k] = normalise(val, k)
		}
		return x
	case []any:
		for i, val := range x {
			x[i] = normalise(val, key)
		}
		return x
	case string:
		switch {
		case key == "hint" && len(x) == 4:
			return "<hint>"
		case key == "encryptedMobileNumber" && len(x) > 64:
			return "<sealed blob>"
		case timeRe.MatchString(x):
			return "<time>"
		case apiKeyRe.MatchString(x):
			return "<api-key>"
		case sdkTokenRe.MatchString(x):
			return "<sdk-token>"
		}
		x = uuidRe.ReplaceAllString(x, "<uuid>")
		return requestIDRe.ReplaceAllString(x, "request id <id>")
	}
	return v
}

// golden compares status, the headers that matter and the whole normalised body with
// testdata/golden/<name>.json.
func golden(t *testing.T, name string, a answer) {
	t.Helper()
	var body any
	if err := json.Unmarshal(a.body, &body); err != nil {
		t.Fatalf("%s: body is not JSON: %q", name, a.body)
	}
	if ct := a.headers.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q", name, ct)
	}
	if a.headers.Get("X-Request-Id") == "" {
		t.Errorf("%s: no X-Request-Id", name)
	}
	got := map[string]any{"status": a.status, "body": normalise(body, "")}
	var extra []string
	for _, h := range []string{"Idempotent-Replayed", "Www-Authenticate", "Retry-After"} {
		if v := a.headers.Get(h); v != "" {
			extra = append(extra, h+": "+v)
		}
	}
	sort.Strings(extra)
	got["headers"] = extra
	out, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, '\n')
	path := filepath.Join("testdata", "golden", name+".json")
	if *update {
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v (run go test -update to create it)", name, err)
	}
	if !bytes.Equal(out, want) {
		t.Errorf("%s: body differs from %s\n got: %s\nwant: %s", name, path, out, want)
	}
}

func keyHeaders(c apptest.Client) map[string]string {
	return map[string]string{"X-API-KEY": c.APIKey, "X-CLIENT-ID": c.ID}
}

func meHeaders(c apptest.Client) map[string]string {
	return map[string]string{"X-API-KEY": c.APIKey}
}

func TestGolden(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	c := s.accounts.CreateClient(t, 100, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX)

	golden(t, "get_client", s.do(t, call{method: "GET", path: "/v1/api/clients", headers: keyHeaders(c)}))
	// A client's Authorization header never reaches a service (it would sit beside the
	// gateway's own credential), nor do forwarding headers it could forge.
	spoof := keyHeaders(c)
	spoof["Authorization"] = "Bearer " + authtest.GatewayToken
	spoof["X-Forwarded-For"] = "10.0.0.1"
	if a := s.do(t, call{method: "GET", path: "/v1/api/clients", headers: spoof}); a.status != http.StatusOK {
		t.Fatalf("with untrusted headers: %d %s", a.status, a.body)
	}
	golden(t, "get_client_without_client_id", s.do(t, call{method: "GET", path: "/v1/api/clients", headers: meHeaders(c)}))
	golden(t, "unknown_route", s.do(t, call{method: "GET", path: "/v1/api/nothing-here", headers: keyHeaders(c)}))
	golden(t, "wrong_method", s.do(t, call{method: "PUT", path: "/v1/api/clients", headers: keyHeaders(c)}))
	golden(t, "ledger", s.do(t, call{method: "GET", path: "/v1/api/me/ledger", headers: meHeaders(c)}))
	golden(t, "ledger_bad_size", s.do(t, call{method: "GET", path: "/v1/api/me/ledger?size=500", headers: meHeaders(c)}))

	golden(t, "create_key", s.do(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: meHeaders(c), body: `{"name":"ci","role":"MEMBER"}`}))
	golden(t, "create_key_unknown_field", s.do(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: meHeaders(c), body: `{"name":"ci","role":"MEMBER","admin":true}`}))
	golden(t, "create_key_bad_role", s.do(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: meHeaders(c), body: `{"name":"ci","role":"OWNER"}`}))
	golden(t, "create_key_no_role", s.do(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: meHeaders(c), body: `{"name":"ci"}`}))
	golden(t, "create_key_malformed_json", s.do(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: meHeaders(c), body: `{"name":`}))
	// A body that says two things is refused, not read as the last of them (an ADMIN key).
	keysBefore := s.data(t, call{method: "GET", path: "/v1/api/me/api-keys", headers: meHeaders(c)})["totalItems"]
	golden(t, "create_key_duplicate_role", s.do(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: meHeaders(c), body: `{"name":"ci","role":"MEMBER","role":"ADMIN"}`}))
	if after := s.data(t, call{method: "GET", path: "/v1/api/me/api-keys", headers: meHeaders(c)})["totalItems"]; after != keysBefore {
		t.Fatalf("a body with the role twice changed the keys from %v to %v", keysBefore, after)
	}
	golden(t, "list_keys", s.do(t, call{method: "GET", path: "/v1/api/me/api-keys?page=0&size=1", headers: meHeaders(c)}))

	keys := s.data(t, call{method: "GET", path: "/v1/api/me/api-keys", headers: meHeaders(c)})["items"].([]any)
	var adminID string
	for _, k := range keys {
		if k.(map[string]any)["role"] == "ADMIN" {
			adminID = k.(map[string]any)["id"].(string)
		}
	}
	golden(t, "revoke_last_admin", s.do(t, call{method: "DELETE", path: "/v1/api/me/api-keys/" + adminID, headers: meHeaders(c)}))
	golden(t, "revoke_unknown_key", s.do(t, call{method: "DELETE", path: "/v1/api/me/api-keys/00000000-0000-4000-8000-000000000000", headers: meHeaders(c)}))

	golden(t, "create_sdk_token", s.do(t, call{method: "POST", path: "/v1/api/me/sdk-tokens", headers: meHeaders(c), body: `{"label":"iOS app","ttlSeconds":86400}`}))
	golden(t, "list_sdk_tokens", s.do(t, call{method: "GET", path: "/v1/api/me/sdk-tokens", headers: meHeaders(c)}))

	idem := meHeaders(c)
	idem["Idempotency-Key"] = "create-token-1"
	first := s.do(t, call{method: "POST", path: "/v1/api/me/sdk-tokens", headers: idem, body: `{"label":"once"}`})
	second := s.do(t, call{method: "POST", path: "/v1/api/me/sdk-tokens", headers: idem, body: `{"label":"once"}`})
	if first.status != 200 || !bytes.Equal(first.body, second.body) || second.headers.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("idempotent replay: %d %s / %d %s %v", first.status, first.body, second.status, second.body, second.headers)
	}
	golden(t, "idempotent_replay", second)
	golden(t, "idempotency_mismatch", s.do(t, call{method: "POST", path: "/v1/api/me/sdk-tokens", headers: idem, body: `{"label":"other"}`}))

	golden(t, "rotate_wrong_secret", s.do(t, call{method: "POST", path: "/v1/api/clients/rotate-key", headers: keyHeaders(c), body: `{"secretKey":"mnvsec_` + strings.Repeat("0", 40) + `"}`}))
	golden(t, "rotate_bad_grace", s.do(t, call{method: "POST", path: "/v1/api/clients/rotate-key", headers: keyHeaders(c), body: `{"secretKey":"` + c.Secret + `","oldKeyGraceSeconds":604801}`}))
	golden(t, "rotate_other_client", s.do(t, call{method: "POST", path: "/v1/api/clients/00000000-0000-4000-8000-000000000000/rotate-key", headers: meHeaders(c), body: `{"secretKey":"` + c.Secret + `"}`}))
	golden(t, "generate_when_key_exists", s.do(t, call{method: "POST", path: "/v1/api/me/api-key/generate", headers: map[string]string{"X-CLIENT-ID": c.ID}, body: `{"secretKey":"` + c.Secret + `"}`}))
	golden(t, "rotate", s.do(t, call{method: "POST", path: "/v1/api/clients/rotate-key", headers: keyHeaders(c), body: `{"secretKey":"` + c.Secret + `"}`}))
	golden(t, "rotated_away_key", s.do(t, call{method: "GET", path: "/v1/api/clients", headers: keyHeaders(c)}))

	big := `{"name":"` + strings.Repeat("a", 1<<20) + `"}`
	golden(t, "body_too_large", s.do(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: meHeaders(c), body: big}))

	// A client that is suspended may read its details and nothing else.
	sus := s.accounts.CreateClient(t, 5)
	if _, err := s.accounts.Admin.SetClientStatus(ctx, &accountsv1.SetClientStatusRequest{ClientId: sus.ID, Status: accountsv1.ClientStatus_CLIENT_STATUS_SUSPENDED}); err != nil {
		t.Fatal(err)
	}
	golden(t, "suspended_get_client", s.do(t, call{method: "GET", path: "/v1/api/clients", headers: keyHeaders(sus)}))
	golden(t, "suspended_ledger", s.do(t, call{method: "GET", path: "/v1/api/me/ledger", headers: meHeaders(sus)}))

	// A client created without a key bootstraps its first one.
	resp, err := s.accounts.Admin.CreateClient(ctx, &accountsv1.CreateClientRequest{
		ClientName: "Bootstrap", ContactPersonName: "B", ContactPersonEmail: "b@example.com", ContactPhoneNumber: "0000",
		WithoutApiKey: true, BalanceExpiresAt: nil,
	})
	if err != nil {
		t.Fatal(err)
	}
	boot := map[string]string{"X-CLIENT-ID": resp.GetClient().GetId()}
	golden(t, "generate_wrong_secret", s.do(t, call{method: "POST", path: "/v1/api/me/api-key/generate", headers: boot, body: `{"secretKey":"nope"}`}))
	golden(t, "generate", s.do(t, call{method: "POST", path: "/v1/api/me/api-key/generate", headers: boot, body: `{"secretKey":"` + resp.GetClientSecret() + `"}`}))

	golden(t, "healthz", s.do(t, call{method: "GET", path: "/healthz"}))
	golden(t, "readyz", s.do(t, call{method: "GET", path: "/readyz"}))
}

// TestGoldenVerification pins the verification bodies.
func TestGoldenVerification(t *testing.T) {
	s := start(t)
	c := s.accounts.CreateClient(t, 1, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX,
		accountsv1.Feature_FEATURE_STUCK_PLUS)
	golden(t, "operators", s.do(t, call{method: "GET", path: "/v1/api/operators", headers: keyHeaders(c)}))
	token := s.data(t, call{method: "POST", path: "/v1/api/me/sdk-tokens", headers: meHeaders(c), body: `{"label":"app"}`})["sdkToken"].(string)
	session := func(number string) (answer, string) {
		h := map[string]string{"X-SDK-TOKEN": token, "X-CLIENT-ID": c.ID}
		if number != "" {
			h["X-Mnv-Sandbox-Msisdn"] = number
		}
		a := s.do(t, call{method: "POST", path: "/v1/api/sdk/session", headers: h, body: `{"platform":"IOS"}`})
		var env struct {
			Data struct {
				Blob string `json:"encryptedMobileNumber"`
			} `json:"data"`
		}
		if err := json.Unmarshal(a.body, &env); err != nil {
			t.Fatal(err)
		}
		return a, env.Data.Blob
	}
	verify := func(number, blob string) answer {
		return s.do(t, call{method: "POST", path: "/v1/api/verify", headers: keyHeaders(c),
			body: `{"mobileNumber":"` + number + `","encryptedMobileNumber":"` + blob + `","operatorId":"sandbox","serviceType":"HEADER_ENRICHMENT"}`})
	}
	a, blob := session("+971501234567")
	golden(t, "sdk_session_captured", a)
	golden(t, "verify_verified", verify("+971501234567", blob))
	golden(t, "verify_reused", verify("+971501234567", blob))
	a, blob = session("")
	golden(t, "sdk_session_no_identity", a)
	golden(t, "verify_undetermined", verify("+971501234568", blob))
	_, blob = session("+971501234569")
	golden(t, "verify_insufficient_balance", verify("+971501234569", blob))
	golden(t, "verify_bad_number", verify("+97150", blob))
	golden(t, "verify_bad_blob", verify("+971501234569", "AAAA"))
	golden(t, "verifications", s.do(t, call{method: "GET", path: "/v1/api/verifications", headers: keyHeaders(c)}))
	golden(t, "opportunity", s.do(t, call{method: "POST", path: "/v1/api/opportunity", headers: keyHeaders(c), body: `{"serviceCode":"STUCK_PLUS","metadataId":"lead-1"}`}))
	golden(t, "reveal_unknown_session", s.do(t, call{method: "POST", path: "/v1/api/me/stuck-plus/sessions/00000000-0000-4000-8000-000000000000/reveal",
		headers: meHeaders(c), body: `{"reason":"ticket 42, customer asked"}`}))
}

// TestBalanceExpiry shows the derived balance fields of a client whose balance expires.
func TestBalanceExpiry(t *testing.T) {
	s := start(t)
	c := s.accounts.CreateClient(t, 10)
	expires := time.Now().Add(10*24*time.Hour + time.Hour)
	if _, err := s.accounts.Admin.TopUpBalance(context.Background(), &accountsv1.TopUpBalanceRequest{
		ClientId: c.ID, Amount: 5, BalanceExpiresAt: tsOf(expires),
	}); err != nil {
		t.Fatal(err)
	}
	d := s.data(t, call{method: "GET", path: "/v1/api/clients", headers: keyHeaders(c)})
	if d["balance"] != float64(15) || d["daysUntilBalanceExpiry"] != float64(10) || d["balanceValid"] != true {
		t.Fatalf("client %v", d)
	}
	if got := d["balanceExpiryDate"].(string); got != expires.UTC().Format("2006-01-02T15:04:05.000Z") {
		t.Fatalf("balanceExpiryDate %s, want %s", got, expires.UTC().Format("2006-01-02T15:04:05.000Z"))
	}
}

// TestOpenAPIIsPublic: the API description needs no credential and describes the envelope.
func TestOpenAPIIsPublic(t *testing.T) {
	s := start(t)
	a := s.do(t, call{method: "GET", path: "/v1/api/openapi.json"})
	var doc struct {
		OpenAPI string `json:"openapi"`
		Info    struct {
			Title string `json:"title"`
		} `json:"info"`
		Paths      map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if a.status != http.StatusOK || json.Unmarshal(a.body, &doc) != nil {
		t.Fatalf("%d %.200s", a.status, a.body)
	}
	if doc.OpenAPI != "3.1.0" || doc.Info.Title != "mnv API" || doc.Paths["/v1/api/clients"] == nil || doc.Components.Schemas["ErrorEnvelope"] == nil {
		t.Fatalf("document: openapi %q title %q, %d paths", doc.OpenAPI, doc.Info.Title, len(doc.Paths))
	}
}
