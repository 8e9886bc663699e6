package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
)

// TestVerificationFilters: the verifications list through the gateway, filtered by reason,
// operator and method (with the status), each alone and together, and a value the route does
// not take is a 400 naming the query parameter (docs/api-decisions.md#verification).
func TestVerificationFilters(t *testing.T) {
	s := start(t)
	c := s.accounts.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX)
	verify := func(number string) {
		t.Helper()
		token := s.data(t, call{method: "POST", path: "/v1/api/me/sdk-tokens", headers: meHeaders(c), body: `{"label":"app"}`})["sdkToken"].(string)
		h := map[string]string{"X-SDK-TOKEN": token, "X-CLIENT-ID": c.ID}
		if number != "" {
			h["X-Mnv-Sandbox-Msisdn"] = number
		}
		blob, _ := s.data(t, call{method: "POST", path: "/v1/api/sdk/session", headers: h, body: `{"platform":"IOS"}`})["encryptedMobileNumber"].(string)
		typed := "+971501234561"
		a := s.do(t, call{method: "POST", path: "/v1/api/verify", headers: keyHeaders(c),
			body: `{"mobileNumber":"` + typed + `","encryptedMobileNumber":"` + blob + `","operatorId":"sandbox","serviceType":"HEADER_ENRICHMENT"}`})
		if a.status != http.StatusOK {
			t.Fatalf("verify %q: %d %s", number, a.status, a.body)
		}
	}
	verify("+971501234561") // VERIFIED, NUMBER_MATCH
	verify("+971501234562") // NOT_VERIFIED, NUMBER_MISMATCH
	verify("")              // UNDETERMINED, NO_NETWORK_IDENTITY

	list := func(query string) (reasons []string, total float64) {
		t.Helper()
		d := s.data(t, call{method: "GET", path: "/v1/api/verifications?" + query, headers: keyHeaders(c)})
		for _, it := range d["items"].([]any) {
			reasons = append(reasons, it.(map[string]any)["reason"].(string))
		}
		return reasons, d["totalItems"].(float64)
	}
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"", []string{"NO_NETWORK_IDENTITY", "NUMBER_MISMATCH", "NUMBER_MATCH"}},
		{"reason=NUMBER_MATCH", []string{"NUMBER_MATCH"}},
		{"reason=NUMBER_MISMATCH&status=NOT_VERIFIED", []string{"NUMBER_MISMATCH"}},
		{"reason=NUMBER_MISMATCH&status=VERIFIED", nil},
		{"operatorId=sandbox", []string{"NO_NETWORK_IDENTITY", "NUMBER_MISMATCH", "NUMBER_MATCH"}},
		{"operatorId=another-operator", nil},
		{"serviceType=HEADER_ENRICHMENT&operatorId=sandbox&reason=NO_NETWORK_IDENTITY", []string{"NO_NETWORK_IDENTITY"}},
		{"serviceType=NETWORK_API", nil},
	} {
		got, total := list(tt.query)
		if len(got) != len(tt.want) || int(total) != len(tt.want) {
			t.Errorf("?%s: %v (total %v), want %v", tt.query, got, total, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("?%s: %v, want %v", tt.query, got, tt.want)
				break
			}
		}
	}

	for _, tt := range []struct{ query, field string }{
		{"reason=MATCH", "reason"},
		{"reason=number_match", "reason"},
		{"operatorId=Sandbox", "operatorId"},
		{"operatorId=-sandbox", "operatorId"},
		{"serviceType=SMS", "serviceType"},
	} {
		a := s.do(t, call{method: "GET", path: "/v1/api/verifications?" + tt.query, headers: keyHeaders(c)})
		var env struct {
			Messages []struct {
				Code  string `json:"code"`
				Field string `json:"field"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(a.body, &env); err != nil || a.status != http.StatusBadRequest || len(env.Messages) != 1 ||
			env.Messages[0].Code != "INVALID_ARGUMENT" || env.Messages[0].Field != tt.field {
			t.Errorf("?%s: %d %s, want 400 INVALID_ARGUMENT on %s", tt.query, a.status, a.body, tt.field)
		}
	}
}
