package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mnvhq/mnv/tests/harness"
)

type client struct {
	ID                     string   `json:"id"`
	ClientName             string   `json:"clientName"`
	ContactPhoneNumber     string   `json:"contactPhoneNumber"`
	ClientStatus           string   `json:"clientStatus"`
	Balance                int64    `json:"balance"`
	BalanceExpiryDate      *string  `json:"balanceExpiryDate"`
	BalanceValid           bool     `json:"balanceValid"`
	DaysUntilBalanceExpiry *int     `json:"daysUntilBalanceExpiry"`
	EnabledFeatures        []string `json:"enabledFeatures"`
}

// TestOperatorAndClient walks the first day of a client: the operator creates it with mnvctl,
// the client reads its details, the operator tops it up, suspends and re-activates it.
func TestOperatorAndClient(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, 100, "--expires-in", "30d", "--features", "VERIFY,SANDBOX")
	if !strings.HasPrefix(c.APIKey, "mnv_") || !strings.HasPrefix(c.Secret, "mnvsec_") {
		t.Fatalf("mnvctl create printed %+v", c)
	}
	var got client
	ok(t, "GET", "/v1/api/clients", keyOf(c), "").decode(t, &got)
	if got.ID != c.ID || got.Balance != 100 || !got.BalanceValid || got.DaysUntilBalanceExpiry == nil ||
		*got.DaysUntilBalanceExpiry != 29 || got.ContactPhoneNumber != "0099887766" || got.ClientStatus != "ACTIVE" ||
		strings.Join(got.EnabledFeatures, ",") != "SANDBOX,VERIFY" {
		t.Fatalf("client details %+v", got)
	}

	if _, err := suite.Mnvctl(ctx, "client", "top-up", c.ID, "--amount", "50", "--reference", "invoice-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := suite.Mnvctl(ctx, "client", "top-up", c.ID, "--amount", "50", "--reference", "invoice-1"); err != nil {
		t.Fatal(err)
	}
	ok(t, "GET", "/v1/api/clients", keyOf(c), "").decode(t, &got)
	if got.Balance != 150 {
		t.Fatalf("balance after a top-up sent twice: %d, want 150", got.Balance)
	}
	var ledger struct {
		Items []struct {
			Kind      string `json:"kind"`
			Amount    int64  `json:"amount"`
			Reference string `json:"reference"`
		} `json:"items"`
		TotalItems int64 `json:"totalItems"`
	}
	ok(t, "GET", "/v1/api/me/ledger", meOf(c), "").decode(t, &ledger)
	if ledger.TotalItems != 2 || ledger.Items[0].Reference != "invoice-1" || ledger.Items[0].Amount != 50 {
		t.Fatalf("ledger %+v", ledger)
	}

	if _, err := suite.Mnvctl(ctx, "client", "suspend", c.ID); err != nil {
		t.Fatal(err)
	}
	if r := call(t, "GET", "/v1/api/me/ledger", meOf(c), ""); r.status != http.StatusForbidden || r.code() != "PERMISSION_DENIED" {
		t.Fatalf("suspended client reads its ledger: %d %s", r.status, r.raw)
	}
	ok(t, "GET", "/v1/api/clients", keyOf(c), "").decode(t, &got)
	if got.ClientStatus != "SUSPENDED" || got.BalanceValid {
		t.Fatalf("suspended client details %+v", got)
	}
	if _, err := suite.Mnvctl(ctx, "client", "activate", c.ID); err != nil {
		t.Fatal(err)
	}
	ok(t, "GET", "/v1/api/me/ledger", meOf(c), "")

	if _, err := suite.Mnvctl(ctx, "client", "features", c.ID, "CONNECT"); err != nil {
		t.Fatal(err)
	}
	out, err := suite.Mnvctl(ctx, "client", "price", c.ID, "--kind", "VERIFICATION", "--amount", "3", "-o", "json")
	if err != nil || !strings.Contains(string(out), `"amount": 3`) {
		t.Fatalf("mnvctl price: %s %v", out, err)
	}
	out, err = suite.Mnvctl(ctx, "client", "show", c.ID, "-o", "json")
	if err != nil || !strings.Contains(string(out), `"enabledFeatures": [
      "CONNECT"
    ]`) {
		t.Fatalf("mnvctl show: %s %v", out, err)
	}
	if _, err := suite.Mnvctl(ctx, "client", "show", "00000000-0000-4000-8000-000000000000"); err == nil || !strings.Contains(err.Error(), `no client with id "00000000-0000-4000-8000-000000000000"`) {
		t.Fatalf("mnvctl show of an unknown client: %v", err)
	}
}

// TestBootstrapAndRotation: a client created without a key generates its first one with its
// secret, then rotates it through each of the three rotation paths.
func TestBootstrapAndRotation(t *testing.T) {
	c := newClient(t, 0, "--without-api-key")
	if c.APIKey != "" {
		t.Fatalf("a key was issued: %+v", c)
	}
	boot := headers{"X-Client-Id": c.ID}
	var gen struct {
		APIKey string `json:"apiKey"`
	}
	ok(t, "POST", "/v1/api/me/api-key/generate", boot, `{"secretKey":"`+c.Secret+`"}`).decode(t, &gen)
	if r := call(t, "POST", "/v1/api/me/api-key/generate", boot, `{"secretKey":"`+c.Secret+`"}`); r.status != http.StatusConflict {
		t.Fatalf("second generate: %d %s", r.status, r.raw)
	}
	key := gen.APIKey

	rotate := func(path string, h headers, grace string) string {
		t.Helper()
		body := `{"secretKey":"` + c.Secret + `"` + grace + `}`
		var out struct {
			NewAPIKey string `json:"newApiKey"`
		}
		ok(t, "POST", path, h, body).decode(t, &out)
		if !strings.HasPrefix(out.NewAPIKey, "mnv_") {
			t.Fatalf("%s: newApiKey %q", path, out.NewAPIKey)
		}
		return out.NewAPIKey
	}
	// 4.2, immediate.
	next := rotate("/v1/api/clients/rotate-key", headers{"X-Api-Key": key, "X-Client-Id": c.ID}, "")
	if r := call(t, "GET", "/v1/api/clients", headers{"X-Api-Key": key, "X-Client-Id": c.ID}, ""); r.status != http.StatusUnauthorized {
		t.Fatalf("old key after rotation: %d", r.status)
	}
	// 4.3 with grace: both keys work until the grace ends.
	key, next = next, rotate("/v1/api/clients/"+c.ID+"/rotate-key", headers{"X-Api-Key": next}, `,"oldKeyGraceSeconds":3600`)
	ok(t, "GET", "/v1/api/clients", headers{"X-Api-Key": key, "X-Client-Id": c.ID}, "")
	ok(t, "GET", "/v1/api/clients", headers{"X-Api-Key": next, "X-Client-Id": c.ID}, "")
	// 4.4.
	final := rotate("/v1/api/me/api-key/rotate", headers{"X-Api-Key": next}, "")
	ok(t, "GET", "/v1/api/clients", headers{"X-Api-Key": final, "X-Client-Id": c.ID}, "")
	if r := call(t, "POST", "/v1/api/me/api-key/rotate", headers{"X-Api-Key": final}, `{"secretKey":"mnvsec_wrong"}`); r.status != http.StatusUnauthorized {
		t.Fatalf("rotation with a wrong secret: %d", r.status)
	}
	ok(t, "GET", "/v1/api/clients", headers{"X-Api-Key": final, "X-Client-Id": c.ID}, "")
}

// TestSupersededKeyCannotRotate replays the sequence on each rotation route: a key
// rotated with a grace period, then rotated again while in grace, is 409 and changes nothing
// (it used to leave two ADMIN keys named "default" and end the grace at once).
func TestSupersededKeyCannotRotate(t *testing.T) {
	type key struct {
		ID        string  `json:"id"`
		Name      string  `json:"name"`
		ExpiresAt *string `json:"expiresAt"`
	}
	routes := []struct {
		name string
		path func(c harness.Client) string
		h    func(c harness.Client, key string) headers
	}{
		{"4.2", func(harness.Client) string { return "/v1/api/clients/rotate-key" },
			func(c harness.Client, key string) headers { return headers{"X-Api-Key": key, "X-Client-Id": c.ID} }},
		{"4.3", func(c harness.Client) string { return "/v1/api/clients/" + c.ID + "/rotate-key" },
			func(_ harness.Client, key string) headers { return headers{"X-Api-Key": key} }},
		{"4.4", func(harness.Client) string { return "/v1/api/me/api-key/rotate" },
			func(_ harness.Client, key string) headers { return headers{"X-Api-Key": key} }},
	}
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			c := newClient(t, 0)
			var next struct {
				NewAPIKey string `json:"newApiKey"`
			}
			ok(t, "POST", "/v1/api/clients/"+c.ID+"/rotate-key", meOf(c), `{"secretKey":"`+c.Secret+`","oldKeyGraceSeconds":3600}`).decode(t, &next)
			var before struct {
				Items []key `json:"items"`
			}
			ok(t, "GET", "/v1/api/me/api-keys", headers{"X-Api-Key": next.NewAPIKey}, "").decode(t, &before)

			for _, grace := range []string{"", `,"oldKeyGraceSeconds":60`} {
				r := call(t, "POST", rt.path(c), rt.h(c, c.APIKey), `{"secretKey":"`+c.Secret+`"`+grace+`}`)
				if r.status != http.StatusConflict || r.code() != "CONFLICT" || !strings.Contains(r.env.Messages[0].Message, "replaced") {
					t.Fatalf("rotating a key in its grace period: %d %s", r.status, r.raw)
				}
			}
			var after struct {
				Items []key `json:"items"`
			}
			ok(t, "GET", "/v1/api/me/api-keys", headers{"X-Api-Key": next.NewAPIKey}, "").decode(t, &after)
			b, _ := json.Marshal(before.Items)
			a, _ := json.Marshal(after.Items)
			if string(a) != string(b) || len(after.Items) != 2 {
				t.Fatalf("keys changed by a refused rotation:\n before %s\n after  %s", b, a)
			}
			ok(t, "GET", "/v1/api/clients", keyOf(c), "") // the grace goes on
		})
	}
}

// TestForeignIDsAreNotFound: ids of another client are 404, never a hint that they exist.
func TestForeignIDsAreNotFound(t *testing.T) {
	a, b := newClient(t, 0), newClient(t, 0)
	var keys struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	ok(t, "GET", "/v1/api/me/api-keys", meOf(b), "").decode(t, &keys)
	var token struct {
		ID string `json:"id"`
	}
	ok(t, "POST", "/v1/api/me/sdk-tokens", meOf(b), `{"label":"b's app"}`).decode(t, &token)

	for _, tc := range []struct{ method, path, body string }{
		{"DELETE", "/v1/api/me/api-keys/" + keys.Items[0].ID, ""},
		{"DELETE", "/v1/api/me/sdk-tokens/" + token.ID, ""},
		{"POST", "/v1/api/clients/" + b.ID + "/rotate-key", `{"secretKey":"` + a.Secret + `"}`},
		{"DELETE", "/v1/api/me/api-keys/not-a-uuid", ""},
	} {
		if r := call(t, tc.method, tc.path, meOf(a), tc.body); r.status != http.StatusNotFound || r.code() != "NOT_FOUND" {
			t.Errorf("%s %s as another client: %d %s", tc.method, tc.path, r.status, r.raw)
		}
	}
	ok(t, "GET", "/v1/api/clients", keyOf(b), "") // b's key was not touched
}

// TestKeyManagement: an ADMIN creates a MEMBER key, which may read but not manage keys.
func TestKeyManagement(t *testing.T) {
	c := newClient(t, 0)
	var member struct {
		ID     string `json:"id"`
		Role   string `json:"role"`
		APIKey string `json:"apiKey"`
		Hint   string `json:"hint"`
	}
	ok(t, "POST", "/v1/api/me/api-keys", meOf(c), `{"name":"reporting","role":"MEMBER"}`).decode(t, &member)
	if member.Role != "MEMBER" || !strings.HasSuffix(member.APIKey, member.Hint) {
		t.Fatalf("created %+v", member)
	}
	m := headers{"X-Api-Key": member.APIKey}
	ok(t, "GET", "/v1/api/me/ledger", m, "")
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/api/me/api-keys", ""},
		{"POST", "/v1/api/me/api-keys", `{"name":"x","role":"ADMIN"}`},
		{"POST", "/v1/api/me/sdk-tokens", `{"label":"x"}`},
	} {
		if r := call(t, tc.method, tc.path, m, tc.body); r.status != http.StatusForbidden {
			t.Errorf("MEMBER %s %s: %d", tc.method, tc.path, r.status)
		}
	}
	var list struct {
		Items []map[string]any `json:"items"`
	}
	ok(t, "GET", "/v1/api/me/api-keys", meOf(c), "").decode(t, &list)
	raw, _ := json.Marshal(list)
	if strings.Contains(string(raw), c.APIKey) || strings.Contains(string(raw), member.APIKey) {
		t.Fatal("the key list shows a key")
	}
	ok(t, "DELETE", "/v1/api/me/api-keys/"+member.ID, meOf(c), "")
	if r := call(t, "GET", "/v1/api/me/ledger", m, ""); r.status != http.StatusUnauthorized {
		t.Fatalf("revoked key: %d", r.status)
	}
}

// TestRequestID: the caller's request id is echoed; a bad one is replaced.
func TestRequestID(t *testing.T) {
	c := newClient(t, 0)
	h := keyOf(c)
	h["X-Request-Id"] = "trace-abc-123"
	if r := ok(t, "GET", "/v1/api/clients", h, ""); r.header.Get("X-Request-Id") != "trace-abc-123" {
		t.Fatalf("echoed %q", r.header.Get("X-Request-Id"))
	}
	h["X-Request-Id"] = strings.Repeat("x", 200)
	if r := ok(t, "GET", "/v1/api/clients", h, ""); len(r.header.Get("X-Request-Id")) != 32 {
		t.Fatalf("a 200-character id was echoed: %q", r.header.Get("X-Request-Id"))
	}

	// The id reaches the service behind the gateway, so its log line (a NotFound is logged at
	// info) can be found from the id a caller reports: the caller's own, or the gateway's.
	missing := "0b0f5a40-4c2f-4f8e-9d3c-1a2b3c4d5e6f"
	for _, tt := range []struct {
		service, method, path, sent string
	}{
		{"accounts", "DELETE", "/v1/api/me/api-keys/" + missing, "trace-accounts-" + c.ID[:8]},
		{"verification", "GET", "/v1/api/verifications/" + missing, "trace-verification-" + c.ID[:8]},
		{"verification", "GET", "/v1/api/verifications/" + missing, ""},
	} {
		h := keyOf(c)
		if tt.sent != "" {
			h["X-Request-Id"] = tt.sent
		}
		r := call(t, tt.method, tt.path, h, "")
		id := r.header.Get("X-Request-Id")
		if r.status != http.StatusNotFound || id == "" || tt.sent != "" && id != tt.sent {
			t.Fatalf("%s %s: %d, request id %q", tt.method, tt.path, r.status, id)
		}
		want := `"request_id":"` + id + `"`
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(suite.Logs(tt.service), want) {
			if time.Now().After(deadline) {
				t.Fatalf("%s logged no line with %s for %s %s", tt.service, want, tt.method, tt.path)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestLogsHoldNoSecrets greps the services' logs for every credential the tests used.
func TestLogsHoldNoSecrets(t *testing.T) {
	c := newClient(t, 0)
	call(t, "GET", "/v1/api/clients", headers{"X-Api-Key": c.APIKey + "x", "X-Client-Id": c.ID}, "")
	call(t, "POST", "/v1/api/clients/rotate-key", keyOf(c), `{"secretKey":"`+c.Secret+`x"}`)
	secrets := []string{c.APIKey, c.Secret, c.APIKey[4:20], "0099887766", "eve@example.com", suite.AdminToken}
	for _, token := range suite.Tokens {
		secrets = append(secrets, token)
	}
	for _, name := range []string{"accounts", "verification", "connect", "gateway"} {
		logs := suite.Logs(name)
		for _, secret := range secrets {
			if strings.Contains(logs, secret) {
				t.Errorf("%s log holds %s…", name, secret[:6])
			}
		}
	}
}
