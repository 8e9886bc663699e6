package e2e_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/tests/harness"
)

// route is one path of the accounts API with a body that is valid for it.
type route struct {
	method, path, body string
	// probe, when set, is a body that passes authentication and then fails validation: it shows
	// that a credential was accepted without rotating the key that is being tested.
	probe string
	// me: X-CLIENT-ID is optional (docs/api-decisions.md#credentials).
	me bool
}

func (r route) probeBody() string {
	if r.probe != "" {
		return r.probe
	}
	return r.body
}

func accountRoutes(c harness.Client) []route {
	secret := `{"secretKey":"` + c.Secret + `"}`
	probe := `{"secretKey":"` + c.Secret + `","oldKeyGraceSeconds":-1}`
	return []route{
		{method: "GET", path: "/v1/api/clients"},
		{method: "POST", path: "/v1/api/clients/rotate-key", body: secret, probe: probe},
		{method: "POST", path: "/v1/api/clients/" + c.ID + "/rotate-key", body: secret, probe: probe, me: true},
		{method: "POST", path: "/v1/api/me/api-key/rotate", body: secret, probe: probe, me: true},
		{method: "GET", path: "/v1/api/me/api-keys", me: true},
		{method: "POST", path: "/v1/api/me/api-keys", body: `{"name":"matrix","role":"MEMBER"}`, me: true},
		{method: "DELETE", path: "/v1/api/me/api-keys/00000000-0000-4000-8000-000000000001", me: true},
		{method: "GET", path: "/v1/api/me/ledger", me: true},
		{method: "GET", path: "/v1/api/me/sdk-tokens", me: true},
		{method: "POST", path: "/v1/api/me/sdk-tokens", body: `{"label":"matrix"}`, me: true},
		{method: "DELETE", path: "/v1/api/me/sdk-tokens/00000000-0000-4000-8000-000000000001", me: true},
	}
}

// TestCredentialMatrix sends every kind of bad credential to every accounts path: each is 401
// in the envelope and changes nothing; a key within its rotation grace still works everywhere.
func TestCredentialMatrix(t *testing.T) {
	c := newClient(t, 10)
	other := newClient(t, 10)

	// A revoked ADMIN key, a key rotated away, and a key within its grace period, all of c.
	var revoked struct {
		ID     string `json:"id"`
		APIKey string `json:"apiKey"`
	}
	ok(t, "POST", "/v1/api/me/api-keys", meOf(c), `{"name":"to revoke","role":"ADMIN"}`).decode(t, &revoked)
	ok(t, "DELETE", "/v1/api/me/api-keys/"+revoked.ID, meOf(c), "")

	var spare struct {
		APIKey string `json:"apiKey"`
	}
	ok(t, "POST", "/v1/api/me/api-keys", meOf(c), `{"name":"rotated away","role":"ADMIN"}`).decode(t, &spare)
	rotatedAway := spare.APIKey
	ok(t, "POST", "/v1/api/me/api-key/rotate", headers{"X-Api-Key": rotatedAway}, `{"secretKey":"`+c.Secret+`"}`)

	ok(t, "POST", "/v1/api/me/api-keys", meOf(c), `{"name":"in grace","role":"ADMIN"}`).decode(t, &spare)
	inGrace := spare.APIKey
	ok(t, "POST", "/v1/api/me/api-key/rotate", headers{"X-Api-Key": inGrace}, `{"secretKey":"`+c.Secret+`","oldKeyGraceSeconds":3600}`)

	var sdk struct {
		SDKToken string `json:"sdkToken"`
	}
	ok(t, "POST", "/v1/api/me/sdk-tokens", meOf(c), `{"label":"app"}`).decode(t, &sdk)

	bad := []struct {
		name string
		h    headers
	}{
		{"no credentials", headers{}},
		{"client id only", headers{"X-Client-Id": c.ID}},
		{"malformed key", headers{"X-Api-Key": "mnv_short", "X-Client-Id": c.ID}},
		{"unknown key", headers{"X-Api-Key": "mnv_" + strings.Repeat("Z", 40), "X-Client-Id": c.ID}},
		{"quoted key", headers{"X-Api-Key": `"` + c.APIKey + `"`, "X-Client-Id": c.ID}},
		{"single-quoted key", headers{"X-Api-Key": "'" + c.APIKey + "'", "X-Client-Id": c.ID}},
		{"key with inner space", headers{"X-Api-Key": c.APIKey[:12] + " " + c.APIKey[12:], "X-Client-Id": c.ID}},
		{"quoted client id", headers{"X-Api-Key": c.APIKey, "X-Client-Id": `"` + c.ID + `"`}},
		{"malformed client id", headers{"X-Api-Key": c.APIKey, "X-Client-Id": "client-1"}},
		{"key of another client", headers{"X-Api-Key": other.APIKey, "X-Client-Id": c.ID}},
		{"client secret as key", headers{"X-Api-Key": c.Secret, "X-Client-Id": c.ID}},
		{"revoked key", headers{"X-Api-Key": revoked.APIKey, "X-Client-Id": c.ID}},
		{"rotated-away key", headers{"X-Api-Key": rotatedAway, "X-Client-Id": c.ID}},
		{"SDK token on a key path", headers{"X-Sdk-Token": sdk.SDKToken, "X-Client-Id": c.ID}},
	}
	for _, rt := range accountRoutes(c) {
		for _, b := range bad {
			r := call(t, rt.method, rt.path, b.h, rt.body)
			if r.status != http.StatusUnauthorized || r.code() != "UNAUTHENTICATED" || r.env.Messages[0].HTTPStatus != "UNAUTHORIZED" {
				t.Errorf("%s %s with %s: %d %s", rt.method, rt.path, b.name, r.status, r.raw)
			}
		}
		// X-CLIENT-ID is required off the /me paths only.
		r := call(t, rt.method, rt.path, headers{"X-Api-Key": inGrace}, rt.probeBody())
		if rt.me == (r.status == http.StatusUnauthorized) {
			t.Errorf("%s %s without X-CLIENT-ID: %d", rt.method, rt.path, r.status)
		}
	}

	// Nothing above may have changed c: its balance, and its key, are as they were.
	var got client
	ok(t, "GET", "/v1/api/clients", keyOf(c), "").decode(t, &got)
	if got.Balance != 10 {
		t.Fatalf("balance %d after refused calls", got.Balance)
	}

	// Within grace, the old key still works on every path (a path may then fail for its own
	// reasons, never 401).
	for _, rt := range accountRoutes(c) {
		r := call(t, rt.method, rt.path, headers{"X-Api-Key": inGrace, "X-Client-Id": c.ID}, rt.probeBody())
		if r.status == http.StatusUnauthorized || r.status >= 500 {
			t.Errorf("%s %s with a key in grace: %d %s", rt.method, rt.path, r.status, r.raw)
		}
	}
}

// TestGenerateCredentials is the matrix of the bootstrap path, whose credential is X-CLIENT-ID
// with the client secret.
func TestGenerateCredentials(t *testing.T) {
	c := newClient(t, 0, "--without-api-key")
	other := newClient(t, 0, "--without-api-key")
	body := `{"secretKey":"` + c.Secret + `"}`
	for _, tc := range []struct {
		name string
		h    headers
		body string
	}{
		{"no client id", headers{}, body},
		{"malformed client id", headers{"X-Client-Id": "acme"}, body},
		{"quoted client id", headers{"X-Client-Id": `"` + c.ID + `"`}, body},
		{"secret of another client", headers{"X-Client-Id": other.ID}, body},
		{"no secret", headers{"X-Client-Id": c.ID}, `{}`},
		{"API key as secret", headers{"X-Client-Id": c.ID}, `{"secretKey":"mnv_` + strings.Repeat("a", 40) + `"}`},
	} {
		if r := call(t, "POST", "/v1/api/me/api-key/generate", tc.h, tc.body); r.status != http.StatusUnauthorized {
			t.Errorf("%s: %d %s", tc.name, r.status, r.raw)
		}
	}
	ok(t, "POST", "/v1/api/me/api-key/generate", headers{"X-Client-Id": c.ID}, body)
}

// TestRotateApiKeyByIdAttacks: the console's rotation of a key by its id
// (POST /v1/api/me/api-keys/{keyId}/rotate) refuses a MEMBER key, an SDK token (ignored off
// the SDK's route: it adds nothing to a key) and another client's key id, leaving the key working, and a replayed Idempotency-Key gets the first
// answer again without a second rotation. (A MEMBER's session and a session without a step-up
// are refused in tests/browser, where a passkey opens a real session.)
func TestRotateApiKeyByIdAttacks(t *testing.T) {
	c, other := newClient(t, 0), newClient(t, 0)
	type created struct {
		ID     string `json:"id"`
		APIKey string `json:"apiKey"`
	}
	newKey := func(of harness.Client, name, role string) created {
		var k created
		ok(t, "POST", "/v1/api/me/api-keys", meOf(of), `{"name":"`+name+`","role":"`+role+`"}`).decode(t, &k)
		return k
	}
	target := newKey(c, "target", "MEMBER")
	member := newKey(c, "reporting", "MEMBER")
	foreign := newKey(other, "theirs", "ADMIN")
	var sdk struct {
		SDKToken string `json:"sdkToken"`
	}
	ok(t, "POST", "/v1/api/me/sdk-tokens", meOf(c), `{"label":"app"}`).decode(t, &sdk)
	rotate := func(id string) string { return "/v1/api/me/api-keys/" + id + "/rotate" }

	for _, tc := range []struct {
		name   string
		id     string
		h      headers
		status int
		code   string
	}{
		{"a MEMBER key", target.ID, headers{"X-Api-Key": member.APIKey}, http.StatusForbidden, "PERMISSION_DENIED"},
		{"an SDK token", target.ID, headers{"X-Sdk-Token": sdk.SDKToken, "X-Client-Id": c.ID}, http.StatusUnauthorized, "UNAUTHENTICATED"},
		{"an SDK token alone", target.ID, headers{"X-Sdk-Token": sdk.SDKToken}, http.StatusUnauthorized, "UNAUTHENTICATED"},
		{"an SDK token beside the MEMBER key", target.ID, headers{"X-Sdk-Token": sdk.SDKToken, "X-Api-Key": member.APIKey}, http.StatusForbidden, "PERMISSION_DENIED"},
		{"another client's key id", foreign.ID, meOf(c), http.StatusNotFound, "NOT_FOUND"},
		{"another client's key id with its client's header", foreign.ID, headers{"X-Api-Key": c.APIKey, "X-Client-Id": other.ID}, http.StatusUnauthorized, "UNAUTHENTICATED"},
	} {
		r := call(t, "POST", rotate(tc.id), tc.h, `{"oldKeyGraceSeconds":0}`)
		if r.status != tc.status || r.code() != tc.code || strings.Contains(string(r.raw), "mnv_") {
			t.Errorf("rotation by %s: %d %s, want %d %s", tc.name, r.status, r.raw, tc.status, tc.code)
		}
	}
	// Nothing was rotated: both keys still work.
	ok(t, "GET", "/v1/api/me/ledger", headers{"X-Api-Key": target.APIKey}, "")
	ok(t, "GET", "/v1/api/me/ledger", headers{"X-Api-Key": foreign.APIKey}, "")

	keys := func() int {
		var list struct {
			TotalItems int `json:"totalItems"`
		}
		ok(t, "GET", "/v1/api/me/api-keys?size=100", meOf(c), "").decode(t, &list)
		return list.TotalItems
	}
	before := keys()
	replay := headers{"X-Api-Key": c.APIKey, "Idempotency-Key": "rotate-by-id-1"}
	type rotated struct {
		APIKey struct {
			ID     string `json:"id"`
			APIKey string `json:"apiKey"`
		} `json:"apiKey"`
	}
	var first, second rotated
	r1 := ok(t, "POST", rotate(target.ID), replay, `{"oldKeyGraceSeconds":0}`)
	r1.decode(t, &first)
	r2 := ok(t, "POST", rotate(target.ID), replay, `{"oldKeyGraceSeconds":0}`)
	r2.decode(t, &second)
	if first.APIKey.APIKey == "" || second.APIKey != first.APIKey || r2.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the replay answered %s (replayed %q), the first %s", r2.raw, r2.header.Get("Idempotent-Replayed"), r1.raw)
	}
	// The list holds usable keys: the new one in the old one's place, no third.
	if after := keys(); after != before {
		t.Fatalf("%d usable keys after a rotation and its replay, were %d", after, before)
	}
	// The old key stopped at once (so its id is no usable key: not found); the new one works.
	if r := call(t, "GET", "/v1/api/me/ledger", headers{"X-Api-Key": target.APIKey}, ""); r.status != http.StatusUnauthorized {
		t.Fatalf("the rotated key: %d", r.status)
	}
	ok(t, "GET", "/v1/api/me/ledger", headers{"X-Api-Key": first.APIKey.APIKey}, "")
	if r := call(t, "POST", rotate(target.ID), meOf(c), `{}`); r.status != http.StatusNotFound {
		t.Fatalf("rotating the rotated key again: %d %s", r.status, r.raw)
	}
}
