package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
)

// fieldError is the one error message of a 400 envelope.
func fieldError(t *testing.T, a answer) (code, field, message string) {
	t.Helper()
	var env struct {
		Success  bool `json:"success"`
		Messages []struct {
			Code    string  `json:"code"`
			Field   *string `json:"field"`
			Message string  `json:"message"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(a.body, &env); err != nil || env.Success || len(env.Messages) != 1 {
		t.Fatalf("body %s (%v): want an error envelope with one message", a.body, err)
	}
	m := env.Messages[0]
	if m.Field != nil {
		field = *m.Field
	}
	return m.Code, field, m.Message
}

// TestEnumsAndIntegersAreStrict: through the real gateway and accounts, an API key's role is
// one of its documented names and nothing else (a number made an ADMIN key), and an integer
// field takes a JSON number, not a string.
func TestEnumsAndIntegersAreStrict(t *testing.T) {
	s := start(t)
	c := s.accounts.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX)
	admin := meHeaders(c)
	keys := func() float64 {
		return s.data(t, call{method: "GET", path: "/v1/api/me/api-keys", headers: admin})["totalItems"].(float64)
	}
	before := keys()

	refused := []struct {
		name, path, body, field string
		says                    []string
	}{
		{"role as a number", "/v1/api/me/api-keys", `{"name":"n","role":1}`, "role", []string{"ADMIN, MEMBER", "got 1"}},
		{"role as the number of MEMBER", "/v1/api/me/api-keys", `{"name":"n","role":2}`, "role", []string{"ADMIN, MEMBER"}},
		{"role as a numeric string", "/v1/api/me/api-keys", `{"name":"n","role":"1"}`, "role", []string{"ADMIN, MEMBER"}},
		{"role unspecified", "/v1/api/me/api-keys", `{"name":"n","role":"ROLE_UNSPECIFIED"}`, "role", []string{"ADMIN, MEMBER"}},
		{"role far too long", "/v1/api/me/api-keys", `{"name":"n","role":"` + strings.Repeat("ADMIN", 10000) + `"}`, "role", []string{"ADMIN, MEMBER", "…"}},
		{"ttl as a string", "/v1/api/me/sdk-tokens", `{"label":"l","ttlSeconds":"3600"}`, "ttlSeconds", []string{"expected an integer"}},
		{"ttl with a fraction", "/v1/api/me/sdk-tokens", `{"label":"l","ttlSeconds":3600.5}`, "ttlSeconds", []string{"expected an integer"}},
		{"ttl beyond int64", "/v1/api/me/sdk-tokens", `{"label":"l","ttlSeconds":9223372036854775808}`, "ttlSeconds", []string{"from -9223372036854775808 to 9223372036854775807"}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			a := s.do(t, call{method: "POST", path: tt.path, headers: admin, body: tt.body})
			if a.status != http.StatusBadRequest {
				t.Fatalf("%d %s, want 400", a.status, a.body)
			}
			code, field, msg := fieldError(t, a)
			if code != "INVALID_ARGUMENT" || field != tt.field {
				t.Errorf("code %s field %q, want INVALID_ARGUMENT %q", code, field, tt.field)
			}
			for _, w := range tt.says {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not say %q", msg, w)
				}
			}
			if n := utf8.RuneCountInString(msg); n > 200 {
				t.Errorf("message of %d characters", n)
			}
		})
	}
	if after := keys(); after != before {
		t.Fatalf("refused requests created keys: %v before, %v after", before, after)
	}

	for _, tt := range []struct{ role, want string }{{"ADMIN", "ADMIN"}, {"MEMBER", "MEMBER"}, {"ROLE_ADMIN", "ADMIN"}} {
		t.Run("role "+tt.role, func(t *testing.T) {
			created := s.data(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: admin, body: `{"name":"n","role":"` + tt.role + `"}`})
			if created["role"] != tt.want {
				t.Fatalf("created %v, want role %s", created, tt.want)
			}
			// The key is what it says: only an ADMIN key may list keys.
			a := s.do(t, call{method: "GET", path: "/v1/api/me/api-keys", headers: map[string]string{"X-API-KEY": created["apiKey"].(string)}})
			if want := map[string]int{"ADMIN": 200, "MEMBER": 403}[tt.want]; a.status != want {
				t.Fatalf("the new key lists keys: %d, want %d", a.status, want)
			}
		})
	}
	if got := s.data(t, call{method: "POST", path: "/v1/api/me/sdk-tokens", headers: admin, body: `{"label":"l","ttlSeconds":36e2}`}); got["expiresAt"] == nil {
		t.Fatalf("token with 36e2 seconds: %v", got)
	}
}
