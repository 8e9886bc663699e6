package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
)

// meAnswer is the data of GET /v1/api/me.
type meAnswer struct {
	ClientID        string   `json:"clientId"`
	ClientName      string   `json:"clientName"`
	ClientStatus    string   `json:"clientStatus"`
	EnabledFeatures []string `json:"enabledFeatures"`
	APIKey          struct {
		ID         string  `json:"id"`
		Name       string  `json:"name"`
		Role       string  `json:"role"`
		Hint       string  `json:"hint"`
		ExpiresAt  *string `json:"expiresAt"`
		LastUsedAt *string `json:"lastUsedAt"`
	} `json:"apiKey"`
}

// messages returns the texts of an envelope's messages.
func messages(t *testing.T, a answer) []string {
	t.Helper()
	var env struct {
		Messages []struct {
			Message string `json:"message"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(a.body, &env); err != nil {
		t.Fatalf("not an envelope: %s", a.body)
	}
	var out []string
	for _, m := range env.Messages {
		out = append(out, m.Message)
	}
	return out
}

// TestMe: GET /v1/api/me tells any key who it is, and a request that is not a usable key of
// the client is 401 with the message every other route gives it.
func TestMe(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	c := s.accounts.CreateClient(t, 100, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX)
	other := s.accounts.CreateClient(t, 100, accountsv1.Feature_FEATURE_CONNECT)
	me := func(h map[string]string) answer { return s.do(t, call{method: "GET", path: "/v1/api/me", headers: h}) }
	read := func(h map[string]string) meAnswer {
		t.Helper()
		a := me(h)
		if a.status != http.StatusOK {
			t.Fatalf("GET /v1/api/me: %d %s", a.status, a.body)
		}
		// The key is never shown again, in any field.
		if key := h["X-API-KEY"]; key != "" && bytes.Contains(a.body, []byte(key)) {
			t.Fatalf("the answer holds the key: %s", a.body)
		}
		var env struct {
			Data meAnswer `json:"data"`
		}
		if err := json.Unmarshal(a.body, &env); err != nil {
			t.Fatal(err)
		}
		return env.Data
	}

	// The key's use is recorded within a second or so, by a batch: wait for it, so that the
	// golden answer does not depend on whether the batch ran between the check of the key and
	// its read.
	deadline := time.Now().Add(10 * time.Second)
	for read(meHeaders(c)).APIKey.LastUsedAt == nil {
		if time.Now().After(deadline) {
			t.Fatal("lastUsedAt still null 10 s after the key was used")
		}
		time.Sleep(100 * time.Millisecond)
	}
	golden(t, "me", me(meHeaders(c)))
	keys := s.data(t, call{method: "GET", path: "/v1/api/me/api-keys", headers: meHeaders(c)})["items"].([]any)
	adminID := keys[0].(map[string]any)["id"].(string)
	if got := read(meHeaders(c)); got.ClientID != c.ID || got.APIKey.ID != adminID || got.APIKey.Role != "ADMIN" || got.APIKey.Hint != c.APIKey[len(c.APIKey)-4:] {
		t.Fatalf("ADMIN key: %+v, want client %s key %s", got, c.ID, adminID)
	}
	// X-CLIENT-ID may be sent, as on every /me route, when it is the key's own client.
	if got := read(keyHeaders(c)); got.ClientID != c.ID {
		t.Fatalf("with X-CLIENT-ID: %+v", got)
	}

	created := s.data(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: meHeaders(c), body: `{"name":"reader","role":"MEMBER"}`})
	member := map[string]string{"X-API-KEY": created["apiKey"].(string)}
	if got := read(member); got.ClientID != c.ID || got.APIKey.ID != created["id"] || got.APIKey.Role != "MEMBER" || got.APIKey.Name != "reader" {
		t.Fatalf("MEMBER key: %+v, want key %v", got, created["id"])
	}

	// The old key of a rotation with grace is still the caller's key, and tells when it stops.
	graceful := s.data(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: meHeaders(c), body: `{"name":"rotating","role":"MEMBER"}`})["apiKey"].(string)
	s.data(t, call{method: "POST", path: "/v1/api/me/api-key/rotate", headers: map[string]string{"X-API-KEY": graceful},
		body: `{"secretKey":"` + c.Secret + `","oldKeyGraceSeconds":3600}`})
	if got := read(map[string]string{"X-API-KEY": graceful}); got.APIKey.Name != "rotating" || got.APIKey.ExpiresAt == nil {
		t.Fatalf("a key in grace: %+v, want its expiry", got)
	}

	// What the services refuse has one message, whatever exists: that of an unknown key.
	unknown := me(map[string]string{"X-API-KEY": "mnv_" + strings.Repeat("Z", 40)})
	if unknown.status != http.StatusUnauthorized {
		t.Fatalf("unknown key: %d %s", unknown.status, unknown.body)
	}
	s.data(t, call{method: "DELETE", path: "/v1/api/me/api-keys/" + created["id"].(string), headers: meHeaders(c)})
	foreign := meHeaders(c)
	foreign["X-CLIENT-ID"] = other.ID
	sdk := s.data(t, call{method: "POST", path: "/v1/api/me/sdk-tokens", headers: meHeaders(c), body: `{"label":"app"}`})["sdkToken"].(string)

	tests := []struct {
		name string
		h    map[string]string
		// want is the one message of the 401; empty: the same as the unknown key's.
		want []string
		// likeLedger: GET /v1/api/me/ledger, another /me route, answers the same.
		likeLedger bool
	}{
		{name: "revoked key", h: member, likeLedger: true},
		{name: "another client's X-CLIENT-ID", h: foreign, likeLedger: true},
		{name: "another client's key with this client's id", h: map[string]string{"X-API-KEY": other.APIKey, "X-CLIENT-ID": c.ID}, likeLedger: true},
		{name: "no key", h: map[string]string{}, want: []string{"X-API-KEY header is missing"}},
		{name: "no key, X-CLIENT-ID only", h: map[string]string{"X-CLIENT-ID": c.ID}, want: []string{"X-API-KEY header is missing"}},
		{name: "an SDK token in X-SDK-TOKEN", h: map[string]string{"X-SDK-TOKEN": sdk, "X-CLIENT-ID": c.ID},
			want: []string{"X-API-KEY header is missing (X-SDK-TOKEN is accepted on POST /v1/api/sdk/session only)"}},
		{name: "an SDK token in X-API-KEY", h: map[string]string{"X-API-KEY": sdk},
			want: []string{"X-API-KEY header holds an SDK token: an SDK token goes in X-SDK-TOKEN, on POST /v1/api/sdk/session only"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := me(tt.h)
			if a.status != http.StatusUnauthorized || errorCode(t, a) != "UNAUTHENTICATED" {
				t.Fatalf("%d %s, want 401 UNAUTHENTICATED", a.status, a.body)
			}
			want := tt.want
			if want == nil {
				want = messages(t, unknown)
			}
			if got := messages(t, a); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("messages %q, want %q", got, want)
			}
			if tt.likeLedger {
				l := s.do(t, call{method: "GET", path: "/v1/api/me/ledger", headers: tt.h})
				if l.status != a.status || strings.Join(messages(t, l), "\n") != strings.Join(messages(t, a), "\n") {
					t.Fatalf("/me/ledger answers %d %s, /me %d %s", l.status, l.body, a.status, a.body)
				}
			}
		})
	}

	// A suspended client reads itself, as it reads GET /v1/api/clients, and sees why it is held.
	if _, err := s.accounts.Admin.SetClientStatus(ctx, &accountsv1.SetClientStatusRequest{ClientId: c.ID, Status: accountsv1.ClientStatus_CLIENT_STATUS_SUSPENDED}); err != nil {
		t.Fatal(err)
	}
	if got := read(meHeaders(c)); got.ClientStatus != "SUSPENDED" || got.APIKey.ID != adminID {
		t.Fatalf("suspended: %+v", got)
	}
}
