package gateway_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
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

// raw sends a request with the request line as written: net/http's client would clean the
// path (or refuse it) before it left.
func raw(t *testing.T, s *stack, method, target string, headers map[string]string) answer {
	t.Helper()
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var req strings.Builder
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, target, u.Host)
	for k, v := range headers {
		fmt.Fprintf(&req, "%s: %s\r\n", k, v)
	}
	req.WriteString("\r\n")
	if _, err := io.WriteString(conn, req.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, headers: resp.Header, body: body}
}

// TestNoSuchPathIsAnEnvelope: the API's root, unknown paths and paths that are not clean
// answer the 404 envelope, never an HTML redirect to somewhere else.
func TestNoSuchPathIsAnEnvelope(t *testing.T) {
	s := start(t)
	c := s.accounts.CreateClient(t, 0)
	const (
		noSuchPath = "no such path"
		notClean   = `no such path: a path has no empty, "." or ".." segments (no "//", "/./" or "/../")`
		apiRoot    = "no such path: the API's routes are described at /v1/api/docs (and as OpenAPI at /v1/api/openapi.json)"
	)
	tests := []struct {
		method, target string
		want           string
	}{
		{"GET", "/v1/api", apiRoot},
		{"GET", "/v1/api/", apiRoot},
		{"POST", "/v1/api", apiRoot},
		{"GET", "/v1/api?x=1", apiRoot},
		{"GET", "/v1/api/web", noSuchPath},
		{"GET", "/v1/api/nothing-here", noSuchPath},
		{"GET", "/nothing-here", noSuchPath},
		{"GET", "//v1/api/clients", notClean},
		{"GET", "/v1/api//clients", notClean},
		{"GET", "/v1/api/./clients", notClean},
		{"GET", "/v1/api/me/../clients", notClean},
		{"GET", "/v1/api/clients/.", notClean},
		{"GET", "/v1/api/clients/..", notClean},
		{"GET", "/v1/api/me/api-keys//", notClean},
		{"POST", "/v1/api//me/api-keys", notClean},
		{"GET", "/v1/api/web//transactions", notClean},
		{"GET", "/healthz/../v1/api/clients", notClean},
		// An escaped slash belongs to its segment: these name no route.
		{"GET", "/v1/api%2Fclients", noSuchPath},
		{"GET", "/v1/api/me%2Fapi-keys", noSuchPath},
		{"GET", "/v1/api/me/connect%2Foverview", noSuchPath},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			a := raw(t, s, tt.method, tt.target, keyHeaders(c))
			if a.status != http.StatusNotFound {
				t.Fatalf("%d %v %q, want 404", a.status, a.headers, a.body)
			}
			codes, messages := envelopeMessages(t, a)
			if !slices.Equal(codes, []string{"NOT_FOUND"}) || !slices.Equal(messages, []string{tt.want}) {
				t.Errorf("codes %q messages %q, want NOT_FOUND %q", codes, messages, tt.want)
			}
			if a.headers.Get("Location") != "" || a.headers.Get("X-Request-Id") == "" {
				t.Errorf("headers %v: want no Location, an X-Request-Id", a.headers)
			}
		})
	}
	// The clean forms still answer.
	for _, target := range []string{"/v1/api/clients", "/healthz", "/v1/api/openapi.json"} {
		if a := raw(t, s, "GET", target, keyHeaders(c)); a.status != http.StatusOK {
			t.Errorf("GET %s: %d %q", target, a.status, a.body)
		}
	}
}

// TestLandingAtTheRoot: a person who opens the gateway's address gets a small page that links
// the reference and the health endpoints (HEAD: its headers); the paths beside it keep the
// envelope (TestNoSuchPathIsAnEnvelope).
func TestLandingAtTheRoot(t *testing.T) {
	s := start(t)
	for _, method := range []string{"GET", "HEAD"} {
		a := raw(t, s, method, "/", nil)
		if a.status != http.StatusOK || !strings.HasPrefix(a.headers.Get("Content-Type"), "text/html") ||
			!strings.Contains(a.headers.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Fatalf("%s /: %d %v %q", method, a.status, a.headers, a.body)
		}
		if method == "HEAD" {
			if len(a.body) != 0 {
				t.Errorf("HEAD /: a body %q", a.body)
			}
			continue
		}
		for _, link := range []string{`href="/v1/api/docs"`, `href="/v1/api/openapi.json"`, `href="/healthz"`, `href="/readyz"`} {
			if !strings.Contains(string(a.body), link) {
				t.Errorf("GET /: no %s in %s", link, a.body)
			}
		}
	}
	if a := raw(t, s, "POST", "/", nil); a.status != http.StatusNotFound && a.status != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d %q", a.status, a.body)
	}
}

// TestMethodNotAllowedSaysAllow: a 405 lists the methods the path has in Allow.
func TestMethodNotAllowedSaysAllow(t *testing.T) {
	s := start(t)
	c := s.accounts.CreateClient(t, 0)
	tests := []struct {
		method, path string
		allow        string
	}{
		{"PUT", "/v1/api/me/api-keys", "GET, POST"},
		{"PATCH", "/v1/api/clients", "GET"},
		{"GET", "/v1/api/me/api-keys/00000000-0000-4000-8000-000000000000", "DELETE"},
		{"POST", "/v1/api/me/connect/profiles/00000000-0000-4000-8000-000000000000", "DELETE, GET"},
		{"PUT", "/v1/api/me/connect/integrations/00000000-0000-4000-8000-000000000000", "DELETE, GET, PATCH"},
		{"DELETE", "/v1/api/me/connect/import", "POST"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			a := s.do(t, call{method: tt.method, path: tt.path, headers: meHeaders(c)})
			if a.status != http.StatusMethodNotAllowed {
				t.Fatalf("%d %q, want 405", a.status, a.body)
			}
			if got := a.headers.Values("Allow"); len(got) != 1 || got[0] != tt.allow {
				t.Errorf("Allow %q, want %q", got, tt.allow)
			}
			if codes, _ := envelopeMessages(t, a); !slices.Equal(codes, []string{"METHOD_NOT_ALLOWED"}) {
				t.Errorf("codes %q", codes)
			}
		})
	}
}

// TestMessagesAreNotHTMLEscaped: the API answers JSON, so a message reads <name> as written,
// not \u003cname\u003e (encoding/json's HTML escaping).
func TestMessagesAreNotHTMLEscaped(t *testing.T) {
	s := start(t)
	c := s.accounts.CreateClient(t, 0, accountsv1.Feature_FEATURE_CONNECT)
	a := s.do(t, call{method: "POST", path: "/v1/api/me/connect/integrations", headers: meHeaders(c),
		body: `{"displayName":"CRM","integrationType":"WEBHOOK","endpointUrl":"https://crm.example.com/hook","httpMethod":"POST",` +
			`"triggerEvent":"MANUAL","fieldMappings":{"shoeSize":"size"},"batchSize":10,"matchedOnly":false}`})
	if a.status != http.StatusBadRequest {
		t.Fatalf("%d %s, want 400", a.status, a.body)
	}
	if !strings.Contains(string(a.body), "attributes.<name>") || strings.Contains(string(a.body), `\u003c`) {
		t.Errorf("body %s: want attributes.<name> unescaped", a.body)
	}
}
