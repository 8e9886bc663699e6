package gateway_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// TestClientsCannotAssertAPrincipal: the services believe the principal the gateway resolved
// (auth.MDPrincipal); a client that sends one itself, in any header spelling, is who its own
// credential says, with that credential's role, or nobody.
func TestClientsCannotAssertAPrincipal(t *testing.T) {
	s := start(t)
	c := s.accounts.CreateClient(t, 100, accountsv1.Feature_FEATURE_VERIFY)
	other := s.accounts.CreateClient(t, 100, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_CONNECT)
	member := s.data(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: meHeaders(c), body: `{"name":"reader","role":"MEMBER"}`})["apiKey"].(string)
	forged, err := auth.AssertPrincipal(principal.Principal{
		ClientID: other.ID, KeyID: "00000000-0000-4000-8000-000000000000", Role: principal.RoleAdmin, Status: principal.StatusActive,
		Features: []string{"VERIFY", "CONNECT"}, Operators: principal.DefaultOperators(),
	})
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString([]byte(forged))
	spellings := map[string]string{
		"X-Mnv-Principal-Bin":               b64,
		"Grpc-Metadata-X-Mnv-Principal-Bin": b64,
		"Grpc-Metadata-X-Mnv-Principal":     b64,
		"X-Mnv-Principal":                   b64,
	}
	for name, value := range spellings {
		with := func(h map[string]string) map[string]string {
			out := map[string]string{name: value}
			for k, v := range h {
				out[k] = v
			}
			return out
		}
		t.Run(name, func(t *testing.T) {
			if a := s.do(t, call{method: "GET", path: "/v1/api/me", headers: with(nil)}); a.status != http.StatusUnauthorized {
				t.Errorf("no key: %d %s", a.status, a.body)
			}
			unknown := crypto.NewToken(principal.APIKeyPrefix)
			if a := s.do(t, call{method: "GET", path: "/v1/api/me", headers: with(map[string]string{"X-API-KEY": unknown})}); a.status != http.StatusUnauthorized {
				t.Errorf("a key nobody has: %d %s", a.status, a.body)
			}
			a := s.do(t, call{method: "GET", path: "/v1/api/me", headers: with(map[string]string{"X-API-KEY": member})})
			var me struct {
				Data meAnswer `json:"data"`
			}
			if err := json.Unmarshal(a.body, &me); err != nil || a.status != http.StatusOK {
				t.Fatalf("a MEMBER key: %d %s", a.status, a.body)
			}
			if me.Data.ClientID != c.ID || me.Data.APIKey.Role != "MEMBER" {
				t.Errorf("a MEMBER key with a forged principal is %s %s, want its own client %s, MEMBER", me.Data.ClientID, me.Data.APIKey.Role, c.ID)
			}
			if a := s.do(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: with(map[string]string{"X-API-KEY": member}), body: `{"name":"up","role":"ADMIN"}`}); a.status != http.StatusForbidden {
				t.Errorf("a MEMBER key creating a key: %d %s, want 403", a.status, a.body)
			}
		})
	}
}
