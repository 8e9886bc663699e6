package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
)

// TestLowBalanceThreshold: the client's own balance.low threshold through the gateway
// (docs/api-decisions.md#money): any key reads it with the default beside it, the ADMIN sets and
// clears it, a MEMBER is refused, and a value the route does not take is a 400 naming the field.
func TestLowBalanceThreshold(t *testing.T) {
	s := start(t)
	c := s.accounts.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY)
	member := map[string]string{"X-API-KEY": s.data(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: meHeaders(c), body: `{"name":"reader","role":"MEMBER"}`})["apiKey"].(string)}
	const path = "/v1/api/me/low-balance-threshold"

	def := s.data(t, call{method: "GET", path: path, headers: member})
	if def["threshold"] != nil || def["effectiveThreshold"] != def["defaultThreshold"] {
		t.Fatalf("a new client: %v, want null and the default", def)
	}
	got := s.data(t, call{method: "PUT", path: path, headers: meHeaders(c), body: `{"threshold":25}`})
	if got["threshold"] != float64(25) || got["effectiveThreshold"] != float64(25) || got["defaultThreshold"] != def["defaultThreshold"] {
		t.Fatalf("set 25: %v", got)
	}
	if got := s.data(t, call{method: "GET", path: path, headers: member}); got["threshold"] != float64(25) {
		t.Fatalf("read back: %v", got)
	}
	if got := s.data(t, call{method: "PUT", path: path, headers: meHeaders(c), body: `{"threshold":0}`}); got["threshold"] != float64(0) || got["effectiveThreshold"] != float64(0) {
		t.Fatalf("set 0 (none): %v", got)
	}

	for _, tt := range []struct {
		name    string
		headers map[string]string
		body    string
		status  int
		code    string
	}{
		{"a MEMBER", member, `{"threshold":5}`, http.StatusForbidden, "PERMISSION_DENIED"},
		{"negative", meHeaders(c), `{"threshold":-1}`, http.StatusBadRequest, "INVALID_ARGUMENT"},
		{"a string", meHeaders(c), `{"threshold":"5"}`, http.StatusBadRequest, "INVALID_ARGUMENT"},
		{"a fraction", meHeaders(c), `{"threshold":1.5}`, http.StatusBadRequest, "INVALID_ARGUMENT"},
		{"above the largest amount", meHeaders(c), `{"threshold":1000000000001}`, http.StatusBadRequest, "INVALID_ARGUMENT"},
	} {
		a := s.do(t, call{method: "PUT", path: path, headers: tt.headers, body: tt.body})
		var env struct {
			Messages []struct {
				Code  string `json:"code"`
				Field string `json:"field"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(a.body, &env); err != nil || a.status != tt.status || len(env.Messages) == 0 || env.Messages[0].Code != tt.code ||
			(tt.status == http.StatusBadRequest && env.Messages[0].Field != "threshold") {
			t.Errorf("%s: %d %s, want %d %s", tt.name, a.status, a.body, tt.status, tt.code)
		}
	}
	if got := s.data(t, call{method: "GET", path: path, headers: meHeaders(c)}); got["threshold"] != float64(0) {
		t.Fatalf("after the refused changes: %v, want 0 still", got)
	}
	// null (or no field) takes the default again.
	for _, body := range []string{`{"threshold":null}`, `{}`} {
		if got := s.data(t, call{method: "PUT", path: path, headers: meHeaders(c), body: body}); got["threshold"] != nil || got["effectiveThreshold"] != def["defaultThreshold"] {
			t.Fatalf("clear with %s: %v", body, got)
		}
	}
}
