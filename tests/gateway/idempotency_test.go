package gateway_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/app/apptest"
)

// TestIdempotencyKeysArePerCredential replays, with another credential of the same client, the
// Idempotency-Key and body of a request that answered a shown-once secret or that claimed the
// key first. Each credential must get an answer of its own, never the first one's.
func TestIdempotencyKeysArePerCredential(t *testing.T) {
	f := startWith(t, apptest.Logger(t))
	c := f.accounts.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX,
		accountsv1.Feature_FEATURE_STUCK_PLUS)
	admin := meHeaders(c)
	newKey := func(role string) string {
		t.Helper()
		return f.data(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: admin, body: `{"name":"` + role + `","role":"` + role + `"}`})["apiKey"].(string)
	}
	with := func(h map[string]string, idemKey string) map[string]string {
		out := map[string]string{"Idempotency-Key": idemKey}
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	field := func(a answer, name string) string {
		t.Helper()
		var env struct {
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(a.body, &env); err != nil {
			t.Fatal(err)
		}
		s, _ := env.Data[name].(string)
		return s
	}

	t.Run("a MEMBER key replaying an ADMIN's rotation does not get the ADMIN's new key", func(t *testing.T) {
		member := newKey("MEMBER")
		// The ADMIN keeps its old key a while, as a client that retries rotations should.
		body := `{"secretKey":"` + c.Secret + `","oldKeyGraceSeconds":600}`
		first := f.do(t, call{method: "POST", path: "/v1/api/me/api-key/rotate", headers: with(admin, "rotate-1"), body: body})
		adminNew := field(first, "newApiKey")
		if first.status != http.StatusOK || adminNew == "" {
			t.Fatalf("ADMIN rotation: %d %s", first.status, first.body)
		}
		replay := f.do(t, call{method: "POST", path: "/v1/api/me/api-key/rotate", headers: with(map[string]string{"X-API-KEY": member}, "rotate-1"), body: body})
		if got := field(replay, "newApiKey"); got == adminNew || replay.headers.Get("Idempotent-Replayed") != "" {
			t.Fatalf("the MEMBER key got the ADMIN's answer: %d %s %v", replay.status, replay.body, replay.headers)
		}
		// It ran as the MEMBER key rotating itself: its new key is a MEMBER key.
		memberNew := field(replay, "newApiKey")
		if replay.status != http.StatusOK || memberNew == "" {
			t.Fatalf("MEMBER rotation: %d %s", replay.status, replay.body)
		}
		if a := f.do(t, call{method: "GET", path: "/v1/api/me/api-keys", headers: map[string]string{"X-API-KEY": memberNew}}); a.status != http.StatusForbidden {
			t.Errorf("the MEMBER's new key lists keys: %d %s", a.status, a.body)
		}
		// The ADMIN's own retry still replays its answer.
		again := f.do(t, call{method: "POST", path: "/v1/api/me/api-key/rotate", headers: with(admin, "rotate-1"), body: body})
		if field(again, "newApiKey") != adminNew || again.headers.Get("Idempotent-Replayed") != "true" {
			t.Errorf("the ADMIN's retry: %d %s %v", again.status, again.body, again.headers)
		}
		admin = map[string]string{"X-API-KEY": adminNew}
	})

	t.Run("a second ADMIN key replaying a key creation does not get the first key's secret", func(t *testing.T) {
		second := map[string]string{"X-API-KEY": newKey("ADMIN")}
		body := `{"name":"ci","role":"MEMBER"}`
		first := f.do(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: with(admin, "create-1"), body: body})
		secret := field(first, "apiKey")
		if first.status != http.StatusOK || secret == "" {
			t.Fatalf("first creation: %d %s", first.status, first.body)
		}
		replay := f.do(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: with(second, "create-1"), body: body})
		if got := field(replay, "apiKey"); got == secret || replay.headers.Get("Idempotent-Replayed") != "" {
			t.Fatalf("the second ADMIN key got the first one's answer: %d %s %v", replay.status, replay.body, replay.headers)
		}
		if replay.status != http.StatusOK || field(replay, "apiKey") == "" || field(replay, "id") == field(first, "id") {
			t.Errorf("the second ADMIN key's creation: %d %s, want a key of its own", replay.status, replay.body)
		}
	})

	t.Run("an SDK token's key does not block the backend's request with the same key", func(t *testing.T) {
		token := f.data(t, call{method: "POST", path: "/v1/api/me/sdk-tokens", headers: admin, body: `{"label":"app"}`})["sdkToken"].(string)
		app := map[string]string{"X-SDK-TOKEN": token, "X-CLIENT-ID": c.ID, "Idempotency-Key": "shared-1"}
		if a := f.do(t, call{method: "POST", path: "/v1/api/sdk/session", headers: app, body: `{"platform":"IOS"}`}); a.status != http.StatusOK {
			t.Fatalf("SDK session: %d %s", a.status, a.body)
		}
		backend := with(map[string]string{"X-API-KEY": admin["X-API-KEY"], "X-CLIENT-ID": c.ID}, "shared-1")
		a := f.do(t, call{method: "POST", path: "/v1/api/opportunity", headers: backend, body: `{"serviceCode":"STUCK_PLUS","metadataId":"lead-1"}`})
		if a.status != http.StatusOK || field(a, "transactionId") == "" {
			t.Fatalf("the backend's opportunity with the app's key: %d %s", a.status, a.body)
		}
	})
}

// TestIdempotencyKeyGrammarIsTheDocuments: the API reference the gateway serves describes the
// Idempotency-Key the services take: for each key, the header's schema in the document
// accepts it exactly when the server does.
func TestIdempotencyKeyGrammarIsTheDocuments(t *testing.T) {
	f := startWith(t, apptest.Logger(t))
	c := f.accounts.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX)

	var doc struct {
		Components struct {
			Parameters map[string]struct {
				Name        string `json:"name"`
				Description string `json:"description"`
				Schema      struct {
					Pattern   string `json:"pattern"`
					MinLength int    `json:"minLength"`
					MaxLength int    `json:"maxLength"`
				} `json:"schema"`
			} `json:"parameters"`
		} `json:"components"`
	}
	a := f.do(t, call{method: "GET", path: "/v1/api/openapi.json"})
	if err := json.Unmarshal(a.body, &doc); a.status != http.StatusOK || err != nil {
		t.Fatalf("reference: %d %v", a.status, err)
	}
	p, ok := doc.Components.Parameters["IdempotencyKey"]
	if !ok || p.Name != "Idempotency-Key" {
		t.Fatalf("no Idempotency-Key parameter in %v", doc.Components.Parameters)
	}
	if p.Schema.Pattern == "" {
		t.Fatalf("the reference gives the Idempotency-Key no pattern: %+v (%q)", p.Schema, p.Description)
	}
	pattern := regexp.MustCompile(p.Schema.Pattern)
	documented := func(k string) bool {
		n := utf8.RuneCountInString(k)
		return pattern.MatchString(k) && n >= p.Schema.MinLength && (p.Schema.MaxLength == 0 || n <= p.Schema.MaxLength)
	}

	for _, key := range []string{
		"k", "ios-token-1", `"quoted"`, "!#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", strings.Repeat("k", 255),
		strings.Repeat("k", 256), "has space", "tab\there", "ключ", "é",
	} {
		a := f.do(t, call{method: "POST", path: "/v1/api/me/sdk-tokens", headers: map[string]string{"X-API-KEY": c.APIKey, "Idempotency-Key": key},
			body: `{"label":"l"}`})
		var served bool
		switch a.status {
		case http.StatusOK:
			served = true
		case http.StatusBadRequest:
			if _, field, _ := fieldError(t, a); field != "Idempotency-Key" {
				t.Fatalf("key %q: 400 for %q", key, field)
			}
		default:
			t.Fatalf("key %q: %d %s", key, a.status, a.body)
		}
		if doc := documented(key); doc != served {
			t.Errorf("key %q: the reference accepts it: %v, the server: %v (%s)", shortKey(key), doc, served, a.body)
		}
	}
}

func shortKey(k string) string {
	if len(k) > 20 {
		return k[:20] + "…"
	}
	return k
}
