package gateway_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
)

// usageAnswer is the data of the usage routes (docs/api-decisions.md#usage).
type usageAnswer struct {
	From   string      `json:"from"`
	To     string      `json:"to"`
	Totals usagePeriod `json:"totals"`
	Days   []usagePeriod
}

type usagePeriod struct {
	Day        string `json:"day"`
	Count      int64  `json:"count"`
	Charged    int64  `json:"charged"`
	Credited   int64  `json:"credited"`
	Breakdowns []struct {
		Dimension string `json:"dimension"`
		Buckets   []struct {
			Value    string `json:"value"`
			Count    int64  `json:"count"`
			Charged  int64  `json:"charged"`
			Credited int64  `json:"credited"`
		} `json:"buckets"`
	} `json:"breakdowns"`
}

// byDimension is p's breakdowns as dimension -> value -> [count, charged, credited].
func (p usagePeriod) byDimension() map[string]map[string][3]int64 {
	out := map[string]map[string][3]int64{}
	for _, b := range p.Breakdowns {
		out[b.Dimension] = map[string][3]int64{}
		for _, k := range b.Buckets {
			out[b.Dimension][k.Value] = [3]int64{k.Count, k.Charged, k.Credited}
		}
	}
	return out
}

// TestUsage: the two usage routes through the gateway, with any key of the client (a MEMBER
// too): today's verifications of a client by status (charged, free, refused for the balance),
// operator and method, and its ledger by kind, every day of the default range present, another
// client's verifications never counted; a range the routes refuse is 400 naming its field.
func TestUsage(t *testing.T) {
	s := start(t)
	c := s.accounts.CreateClient(t, 2, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX)
	other := s.accounts.CreateClient(t, 5, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX)
	verify := func(c clientOf, number string, want int) {
		t.Helper()
		token := s.data(t, call{method: "POST", path: "/v1/api/me/sdk-tokens", headers: map[string]string{"X-API-KEY": c.APIKey}, body: `{"label":"app"}`})["sdkToken"].(string)
		h := map[string]string{"X-SDK-TOKEN": token, "X-CLIENT-ID": c.ID}
		if number != "" {
			h["X-Mnv-Sandbox-Msisdn"] = number
		}
		blob, _ := s.data(t, call{method: "POST", path: "/v1/api/sdk/session", headers: h, body: `{"platform":"IOS"}`})["encryptedMobileNumber"].(string)
		typed := number
		if typed == "" {
			typed = "+971501234500"
		}
		a := s.do(t, call{method: "POST", path: "/v1/api/verify", headers: map[string]string{"X-API-KEY": c.APIKey, "X-CLIENT-ID": c.ID},
			body: `{"mobileNumber":"` + typed + `","encryptedMobileNumber":"` + blob + `","operatorId":"sandbox","serviceType":"HEADER_ENRICHMENT"}`})
		if a.status != want {
			t.Fatalf("verify %q: %d %s, want %d", number, a.status, a.body, want)
		}
	}
	// c: two VERIFIED (1 credit each: its balance of 2), one UNDETERMINED (free), one refused
	// for the balance (REJECTED); other: one VERIFIED.
	verify(clientOf{c.ID, c.APIKey}, "+971501234561", http.StatusOK)
	verify(clientOf{c.ID, c.APIKey}, "+971501234562", http.StatusOK)
	verify(clientOf{c.ID, c.APIKey}, "", http.StatusOK)
	verify(clientOf{c.ID, c.APIKey}, "+971501234563", http.StatusPaymentRequired)
	verify(clientOf{other.ID, other.APIKey}, "+971501234564", http.StatusOK)

	member := s.data(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: meHeaders(c), body: `{"name":"reader","role":"MEMBER"}`})["apiKey"].(string)
	read := func(path string) usageAnswer {
		t.Helper()
		a := s.do(t, call{method: "GET", path: path, headers: map[string]string{"X-API-KEY": member}})
		if a.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, a.status, a.body)
		}
		var env struct {
			Data usageAnswer `json:"data"`
		}
		if err := json.Unmarshal(a.body, &env); err != nil {
			t.Fatal(err)
		}
		return env.Data
	}
	today := time.Now().UTC().Format(time.DateOnly)

	v := read("/v1/api/me/usage/verifications")
	if len(v.Days) != 30 || v.To != today || v.Days[29].Day != today || v.From != v.Days[0].Day {
		t.Fatalf("default range: from %s to %s, %d days, want the 30 days to %s", v.From, v.To, len(v.Days), today)
	}
	wantV := map[string]map[string][3]int64{
		"status":   {"VERIFIED": {2, 2, 0}, "UNDETERMINED": {1, 0, 0}, "REJECTED": {1, 0, 0}},
		"operator": {"sandbox": {4, 2, 0}},
		"method":   {"HEADER_ENRICHMENT": {4, 2, 0}},
	}
	for _, p := range []usagePeriod{v.Totals, v.Days[29]} {
		if p.Count != 4 || p.Charged != 2 || p.Credited != 0 || !reflect.DeepEqual(p.byDimension(), wantV) {
			t.Errorf("verifications: %d, %d charged, by %v; want 4, 2 charged, by %v", p.Count, p.Charged, p.byDimension(), wantV)
		}
	}
	if n := read("/v1/api/me/usage/verifications?from=" + today + "&to=" + today + "&operator=sandbox").Totals.Count; n != 4 {
		t.Errorf("today, operator sandbox: %d verifications, want 4", n)
	}
	if n := read("/v1/api/me/usage/verifications?to=" + today + "&operator=elsewhere").Totals.Count; n != 0 {
		t.Errorf("another operator: %d verifications, want 0", n)
	}

	sp := read("/v1/api/me/usage/spend?to=" + today)
	wantS := map[string]map[string][3]int64{"kind": {"TOP_UP": {1, 0, 2}, "VERIFICATION": {2, 2, 0}}}
	if p := sp.Totals; p.Count != 3 || p.Charged != 2 || p.Credited != 2 || !reflect.DeepEqual(p.byDimension(), wantS) || len(sp.Days) != 30 {
		t.Errorf("spend: %d entries, %d charged, %d credited, by %v, %d days; want 3, 2, 2, by %v, 30 days", p.Count, p.Charged, p.Credited, p.byDimension(), len(sp.Days), wantS)
	}

	for _, tt := range []struct{ query, field string }{
		{"from=2026-02-30", "from"},
		{"from=yesterday", "from"},
		{"from=2026-03-02&to=2026-03-01", "to"},
		{"from=2025-01-01&to=2026-01-02", "to"},
		{"to=2026-13-01", "to"},
	} {
		for _, route := range []string{"verifications", "spend"} {
			a := s.do(t, call{method: "GET", path: "/v1/api/me/usage/" + route + "?" + tt.query, headers: meHeaders(c)})
			var env struct {
				Messages []struct {
					Code  string `json:"code"`
					Field string `json:"field"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(a.body, &env); err != nil || a.status != http.StatusBadRequest || len(env.Messages) != 1 ||
				env.Messages[0].Code != "INVALID_ARGUMENT" || env.Messages[0].Field != tt.field {
				t.Errorf("%s?%s: %d %s, want 400 INVALID_ARGUMENT on %s", route, tt.query, a.status, a.body, tt.field)
			}
		}
	}
}

type clientOf struct{ ID, APIKey string }
