package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	verificationv1 "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
	"github.com/mnvhq/mnv/services/accounts/app/apptest"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/auth/authtest"
)

// TestBrowserCaptureIsBoundToWebOrigins plays the attack of issue 9: Mallory starts a VERIFY
// flow on a client's site for a number she does not own, and lures the number's owner to her
// own page, which posts the capture of that transaction. Only a page on one of the client's own
// web origins may capture it; every other answer is 403, with no CORS grant, nothing captured,
// and the transaction still usable by the client's real page.
func TestBrowserCaptureIsBoundToWebOrigins(t *testing.T) {
	s := startFull(t)
	const shop, mallory = "https://shop.example", "https://mallory.example"
	client := s.accounts.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX)
	s.data(t, call{method: "PUT", path: "/v1/api/me/web-origins", headers: meHeaders(client), body: `{"origins":["https://shop.example"]}`})
	// Mallory is a client too, and allows her own page: that must not help her with others'.
	attacker := s.accounts.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX)
	s.data(t, call{method: "PUT", path: "/v1/api/me/web-origins", headers: meHeaders(attacker), body: `{"origins":["https://mallory.example"]}`})
	noOrigins := s.accounts.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX)

	open := func(c apptest.Client) string {
		return s.data(t, call{method: "POST", path: "/v1/api/opportunity", headers: keyHeaders(c),
			body: `{"serviceCode":"VERIFY","metadataId":"order-1"}`})["transactionId"].(string)
	}
	tr := open(client)
	capture := "/v1/api/web/transactions/" + tr + "/capture"
	// The page's completion of the transaction (after an operator's authorization) is bound
	// alike.
	complete := "/v1/api/web/transactions/" + tr + "/complete"
	const completion = `{"code":"c","codeVerifier":"v"}`
	number := map[string]string{"X-Mnv-Sandbox-Msisdn": "+971501234567"}
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{}
		for k, v := range number {
			h[k] = v
		}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}

	refused := []struct {
		name   string
		method string
		path   string
		h      map[string]string
	}{
		{"no Origin", "POST", capture, number},
		{"the attacker's page", "POST", capture, with(map[string]string{"Origin": mallory})},
		{"a look-alike host", "POST", capture, with(map[string]string{"Origin": "https://shop.example.mallory.example"})},
		{"plain http of the same host", "POST", capture, with(map[string]string{"Origin": "http://shop.example"})},
		{"a non-canonical spelling", "POST", capture, with(map[string]string{"Origin": "https://SHOP.example"})},
		{"an opaque origin (sandboxed iframe, file:)", "POST", capture, with(map[string]string{"Origin": "null"})},
		{"the attacker's preflight", "OPTIONS", capture, map[string]string{"Origin": mallory, "Access-Control-Request-Method": "POST"}},
		{"a preflight without Origin", "OPTIONS", capture, map[string]string{"Access-Control-Request-Method": "POST"}},
		{"a client with no origins", "POST", "/v1/api/web/transactions/" + open(noOrigins) + "/capture", with(map[string]string{"Origin": shop})},
		// An unknown id answers like a refused origin: a page learns nothing about which exist.
		{"an unknown transaction", "POST", "/v1/api/web/transactions/00000000-0000-4000-8000-000000000000/capture", with(map[string]string{"Origin": shop})},
		{"a malformed transaction id", "POST", "/v1/api/web/transactions/nope/capture", with(map[string]string{"Origin": shop})},
		{"a completion without Origin", "POST", complete, nil},
		{"a completion from the attacker's page", "POST", complete, map[string]string{"Origin": mallory}},
		{"the attacker's preflight of a completion", "OPTIONS", complete, map[string]string{"Origin": mallory, "Access-Control-Request-Method": "POST"}},
		{"a completion of an unknown transaction", "POST", "/v1/api/web/transactions/00000000-0000-4000-8000-000000000000/complete", map[string]string{"Origin": shop}},
		{"a completion of another client's transaction", "POST", "/v1/api/web/transactions/" + open(attacker) + "/complete", map[string]string{"Origin": shop}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			c := call{method: tt.method, path: tt.path, headers: tt.h}
			if strings.HasSuffix(tt.path, "/complete") && tt.method == "POST" {
				c.body = completion
			}
			a := s.do(t, c)
			if a.status != http.StatusForbidden || errorCode(t, a) != "PERMISSION_DENIED" {
				t.Fatalf("%d %s, want 403 PERMISSION_DENIED", a.status, a.body)
			}
			if got := a.headers.Values("Access-Control-Allow-Origin"); len(got) != 0 {
				t.Fatalf("refused request got a CORS grant: %v", got)
			}
			if !strings.Contains(a.headers.Get("Vary"), "Origin") {
				t.Fatalf("Vary = %q, want Origin", a.headers.Get("Vary"))
			}
		})
	}
	// The verification service holds the rule itself, not only the gateway in front of it: the
	// gateway's own credential without the page's origin (or with another) captures nothing.
	ver := verificationv1.NewVerificationServiceClient(apptest.Dial(t, s.ver.Addr, authtest.GatewayToken))
	for _, origin := range []string{"", mallory} {
		ctx := context.Background()
		if origin != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, auth.MDOrigin, origin)
		}
		_, err := ver.CaptureTransaction(ctx, &verificationv1.CaptureTransactionRequest{TransactionId: tr})
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("direct capture with origin %q: %v, want PermissionDenied", origin, err)
		}
		if _, err := ver.CompleteWebTransaction(ctx, &verificationv1.CompleteWebTransactionRequest{TransactionId: tr, Code: "c", CodeVerifier: "v"}); status.Code(err) != codes.PermissionDenied {
			t.Fatalf("direct completion with origin %q: %v, want PermissionDenied", origin, err)
		}
	}
	if st := s.data(t, call{method: "GET", path: "/v1/api/opportunity/" + tr, headers: keyHeaders(client)})["status"]; st != "PENDING" {
		t.Fatalf("after the refused captures the transaction is %v, want PENDING", st)
	}

	// The client's own page: preflight, then the capture, each granted to that origin only.
	pre := s.do(t, call{method: "OPTIONS", path: capture, headers: map[string]string{
		"Origin": shop, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x-mnv-sandbox-msisdn"}})
	if pre.status != http.StatusNoContent || pre.headers.Get("Access-Control-Allow-Origin") != shop ||
		!strings.Contains(pre.headers.Get("Access-Control-Allow-Headers"), "X-Mnv-Sandbox-Msisdn") ||
		pre.headers.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatalf("preflight: %d %v", pre.status, pre.headers)
	}
	got := s.do(t, call{method: "POST", path: capture, headers: with(map[string]string{"Origin": shop})})
	if got.status != http.StatusOK || got.headers.Get("Access-Control-Allow-Origin") != shop {
		t.Fatalf("capture from the client's page: %d %v %s", got.status, got.headers, got.body)
	}
	var env struct {
		Data struct {
			Status string `json:"status"`
		} `json:"data"`
	}
	if err := json.Unmarshal(got.body, &env); err != nil || env.Data.Status != "CAPTURED" {
		t.Fatalf("capture: %s", got.body)
	}
	// A header-enrichment capture has nothing to complete: the client's page is answered (with
	// CORS) that it is captured already.
	done := s.do(t, call{method: "POST", path: complete, headers: map[string]string{"Origin": shop}, body: completion})
	if done.status != http.StatusConflict || done.headers.Get("Access-Control-Allow-Origin") != shop {
		t.Fatalf("completion from the client's page: %d %v %s", done.status, done.headers, done.body)
	}
	// Already captured: still readable by the client's page (409), still refused to others.
	again := s.do(t, call{method: "POST", path: capture, headers: with(map[string]string{"Origin": shop})})
	if again.status != http.StatusConflict || again.headers.Get("Access-Control-Allow-Origin") != shop {
		t.Fatalf("second capture: %d %s", again.status, again.body)
	}
	if a := s.do(t, call{method: "POST", path: capture, headers: with(map[string]string{"Origin": mallory})}); a.status != http.StatusForbidden {
		t.Fatalf("captured transaction from the attacker's page: %d", a.status)
	}
}

// TestWebOriginsManagement: any key reads the list, only an ADMIN key changes it, and bad
// origins are refused with the reason.
func TestWebOriginsManagement(t *testing.T) {
	s := start(t)
	c := s.accounts.CreateClient(t, 0, accountsv1.Feature_FEATURE_VERIFY)
	member := s.data(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: meHeaders(c), body: `{"name":"reporting","role":"MEMBER"}`})["apiKey"].(string)
	memberHeaders := map[string]string{"X-API-KEY": member}

	set := s.data(t, call{method: "PUT", path: "/v1/api/me/web-origins", headers: meHeaders(c),
		body: `{"origins":["https://Shop.Example/","http://localhost:8081"]}`})
	items, _ := set["items"].([]any)
	if len(items) != 2 || items[0].(map[string]any)["origin"] != "http://localhost:8081" || items[1].(map[string]any)["origin"] != "https://shop.example" {
		t.Fatalf("set: %v", set)
	}
	if list := s.data(t, call{method: "GET", path: "/v1/api/me/web-origins", headers: memberHeaders}); len(list["items"].([]any)) != 2 {
		t.Fatalf("member list: %v", list)
	}
	for _, tt := range []struct {
		name    string
		headers map[string]string
		body    string
		status  int
		code    string
	}{
		{"a MEMBER key", memberHeaders, `{"origins":["https://mallory.example"]}`, http.StatusForbidden, "PERMISSION_DENIED"},
		{"no key", nil, `{"origins":["https://mallory.example"]}`, http.StatusUnauthorized, "UNAUTHENTICATED"},
		{"plain http", meHeaders(c), `{"origins":["http://shop.example"]}`, http.StatusBadRequest, "INVALID_ARGUMENT"},
		{"a path", meHeaders(c), `{"origins":["https://shop.example/pay"]}`, http.StatusBadRequest, "INVALID_ARGUMENT"},
		{"a wildcard", meHeaders(c), `{"origins":["*"]}`, http.StatusBadRequest, "INVALID_ARGUMENT"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := s.do(t, call{method: "PUT", path: "/v1/api/me/web-origins", headers: tt.headers, body: tt.body})
			if a.status != tt.status || errorCode(t, a) != tt.code {
				t.Fatalf("%d %s, want %d %s", a.status, a.body, tt.status, tt.code)
			}
		})
	}
	if list := s.data(t, call{method: "GET", path: "/v1/api/me/web-origins", headers: meHeaders(c)}); len(list["items"].([]any)) != 2 {
		t.Fatalf("after refusals: %v", list)
	}
}

func errorCode(t *testing.T, a answer) string {
	t.Helper()
	var env struct {
		Messages []struct {
			Code string `json:"code"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(a.body, &env); err != nil || len(env.Messages) == 0 {
		t.Fatalf("not an error envelope: %s", a.body)
	}
	return env.Messages[0].Code
}
