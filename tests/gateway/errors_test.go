package gateway_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// envelopeMessages reads an error envelope and returns its codes and messages; it fails the
// test when the body is not one.
func envelopeMessages(t *testing.T, a answer) (codes, messages []string) {
	t.Helper()
	var env struct {
		Success  *bool `json:"success"`
		Messages []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"messages"`
		Data json.RawMessage `json:"data"`
	}
	if ct := a.headers.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, body %q: want the JSON envelope", ct, a.body)
	}
	if err := json.Unmarshal(a.body, &env); err != nil || env.Success == nil || *env.Success || len(env.Messages) == 0 || string(env.Data) != "null" {
		t.Fatalf("body %q (%v): want an error envelope", a.body, err)
	}
	for _, m := range env.Messages {
		codes = append(codes, m.Code)
		messages = append(messages, m.Message)
	}
	return codes, messages
}

// TestUnauthenticatedSaysWhatToFix: a 401 for a header that is missing or malformed names the
// header and what is wrong with it; an unknown key, a revoked key and a key of another client
// all get one message, the same, which names no header: it never says what exists.
func TestUnauthenticatedSaysWhatToFix(t *testing.T) {
	s := start(t)
	c := s.accounts.CreateClient(t, 0)
	other := s.accounts.CreateClient(t, 0)
	created := s.data(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: meHeaders(c), body: `{"name":"soon gone","role":"MEMBER"}`})
	revokedKey, revokedID := created["apiKey"].(string), created["id"].(string)
	if a := s.do(t, call{method: "DELETE", path: "/v1/api/me/api-keys/" + revokedID, headers: meHeaders(c)}); a.status != http.StatusOK {
		t.Fatalf("revoke: %d %s", a.status, a.body)
	}
	unknownKey := "mnv_" + strings.Repeat("Q", 40)
	const (
		keyMissing   = "X-API-KEY header is missing"
		keyMalformed = "X-API-KEY header is malformed: an API key is mnv_ followed by 32 to 128 letters and digits"
		idMissing    = "X-CLIENT-ID header is missing"
		idMalformed  = "X-CLIENT-ID header is malformed: a client id is a UUID (8-4-4-4-12 hexadecimal digits)"
	)

	t.Run("what to fix", func(t *testing.T) {
		tests := []struct {
			name string
			call call
			want []string
		}{
			{"missing X-CLIENT-ID", call{method: "GET", path: "/v1/api/clients", headers: meHeaders(c)}, []string{idMissing}},
			{"missing X-API-KEY", call{method: "GET", path: "/v1/api/clients", headers: map[string]string{"X-CLIENT-ID": c.ID}}, []string{keyMissing}},
			{"missing both", call{method: "GET", path: "/v1/api/clients"}, []string{keyMissing, idMissing}},
			{"malformed key", call{method: "GET", path: "/v1/api/clients", headers: map[string]string{"X-API-KEY": c.APIKey[:20], "X-CLIENT-ID": c.ID}}, []string{keyMalformed}},
			{"malformed client id", call{method: "GET", path: "/v1/api/clients", headers: map[string]string{"X-API-KEY": c.APIKey, "X-CLIENT-ID": "acme"}}, []string{idMalformed}},
			{"malformed client id under /me", call{method: "GET", path: "/v1/api/me/ledger", headers: map[string]string{"X-API-KEY": c.APIKey, "X-CLIENT-ID": "acme"}}, []string{idMalformed}},
			{"missing key under /me", call{method: "GET", path: "/v1/api/me/ledger"}, []string{keyMissing}},
			{"SDK token in place of the key", call{method: "GET", path: "/v1/api/me/ledger", headers: map[string]string{"X-SDK-TOKEN": "mnvsdk_" + strings.Repeat("Q", 40)}},
				[]string{keyMissing + " (X-SDK-TOKEN is accepted on POST /v1/api/sdk/session only)"}},
			{"missing X-SDK-TOKEN", call{method: "POST", path: "/v1/api/sdk/session", headers: map[string]string{"X-CLIENT-ID": c.ID}, body: `{"platform":"IOS"}`},
				[]string{"X-SDK-TOKEN header is missing"}},
			{"malformed X-SDK-TOKEN", call{method: "POST", path: "/v1/api/sdk/session", headers: map[string]string{"X-CLIENT-ID": c.ID, "X-SDK-TOKEN": "mnvsdk_short"}, body: `{"platform":"IOS"}`},
				[]string{"X-SDK-TOKEN header is malformed: an SDK token is mnvsdk_ followed by 32 to 128 letters and digits"}},
			{"bootstrap without X-CLIENT-ID", call{method: "POST", path: "/v1/api/me/api-key/generate", body: `{"secretKey":"` + c.Secret + `"}`}, []string{idMissing}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				a := s.do(t, tt.call)
				if a.status != http.StatusUnauthorized {
					t.Fatalf("%d %s, want 401", a.status, a.body)
				}
				codes, messages := envelopeMessages(t, a)
				if !slices.Equal(messages, tt.want) {
					t.Errorf("messages %q, want %q", messages, tt.want)
				}
				for _, code := range codes {
					if code != "UNAUTHENTICATED" {
						t.Errorf("code %s, want UNAUTHENTICATED", code)
					}
				}
				if a.headers.Get("WWW-Authenticate") == "" {
					t.Error("no WWW-Authenticate")
				}
			})
		}
	})

	t.Run("never what exists", func(t *testing.T) {
		tests := []struct {
			name    string
			headers map[string]string
		}{
			{"unknown key", map[string]string{"X-API-KEY": unknownKey, "X-CLIENT-ID": c.ID}},
			{"revoked key", map[string]string{"X-API-KEY": revokedKey, "X-CLIENT-ID": c.ID}},
			{"key of another client", map[string]string{"X-API-KEY": other.APIKey, "X-CLIENT-ID": c.ID}},
		}
		seen := map[string][]string{}
		for _, tt := range tests {
			a := s.do(t, call{method: "GET", path: "/v1/api/clients", headers: tt.headers})
			if a.status != http.StatusUnauthorized {
				t.Fatalf("%s: %d %s, want 401", tt.name, a.status, a.body)
			}
			_, messages := envelopeMessages(t, a)
			if len(messages) != 1 || strings.Contains(messages[0], "X-") {
				t.Errorf("%s: messages %q, want one that names no header", tt.name, messages)
			}
			seen[strings.Join(messages, "|")] = append(seen[strings.Join(messages, "|")], tt.name)
		}
		if len(seen) != 1 {
			t.Errorf("the refusals differ, and so tell what exists: %v", seen)
		}
	})
}
