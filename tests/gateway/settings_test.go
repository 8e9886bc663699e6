package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
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

// TestPrices: what each paid operation costs the client, through the gateway, read with a
// MEMBER's key: the configured prices, with the client's own (the operator's override) over
// them, and another client's override never in its list.
func TestPrices(t *testing.T) {
	s := start(t)
	c := s.accounts.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY)
	other := s.accounts.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY)
	member := map[string]string{"X-API-KEY": s.data(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: meHeaders(c), body: `{"name":"reader","role":"MEMBER"}`})["apiKey"].(string)}
	ctx := context.Background()
	for _, o := range []struct {
		client  string
		kind    accountsv1.LedgerKind
		variant string
		amount  int64
	}{
		{c.ID, accountsv1.LedgerKind_LEDGER_KIND_STUCK_PLUS_REVEAL, "", 7},
		{c.ID, accountsv1.LedgerKind_LEDGER_KIND_VERIFICATION, "NETWORK_API", 3},
		{other.ID, accountsv1.LedgerKind_LEDGER_KIND_CONNECT_ENRICHMENT, "", 9},
	} {
		amount := o.amount
		if _, err := s.accounts.Admin.SetClientPrice(ctx, &accountsv1.SetClientPriceRequest{ClientId: o.client, Kind: o.kind, Variant: o.variant, Amount: &amount}); err != nil {
			t.Fatal(err)
		}
	}
	type price struct {
		Kind       string `json:"kind"`
		Variant    string `json:"variant"`
		Amount     int64  `json:"amount"`
		Overridden bool   `json:"overridden"`
	}
	a := s.do(t, call{method: "GET", path: "/v1/api/me/prices", headers: member})
	var env struct {
		Data struct {
			Items []price `json:"items"`
		} `json:"data"`
	}
	if err := json.Unmarshal(a.body, &env); err != nil || a.status != http.StatusOK {
		t.Fatalf("GET /v1/api/me/prices: %d %s", a.status, a.body)
	}
	want := []price{
		{"CONNECT_ENRICHMENT", "", 1, false},
		{"STUCK_PLUS_REVEAL", "", 7, true},
		{"VERIFICATION", "", 1, false},
		{"VERIFICATION", "NETWORK_API", 3, true},
		{"VERIFICATION_STEP", "", 2, false}, // a workflow's step (an SMS) when no channel or country price is set
	}
	if !reflect.DeepEqual(env.Data.Items, want) {
		t.Fatalf("prices %+v, want %+v", env.Data.Items, want)
	}
}
