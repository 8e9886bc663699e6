package demosite_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mnvhq/mnv/cmd/internal/demosite"
)

const apiKey = "mnv_demo-key-that-must-never-reach-a-browser"

// fakeAPI is the little of the mnv API the demo backend calls: every transaction it creates is
// captured at once, so the tests are about the backend's binding, not the API's rules (those are
// proven against the real suite in tests/browser).
type fakeAPI struct {
	mu       sync.Mutex
	n        int
	verified []string // the transactions whose blob was verified
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-API-KEY") != apiKey || r.Header.Get("X-CLIENT-ID") != "client-1" {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"success":false,"messages":[{"code":"UNAUTHENTICATED","message":"no"}],"data":null}`)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ok := func(data string) { _, _ = fmt.Fprintf(w, `{"success":true,"messages":[],"data":%s}`, data) }
	switch p := strings.TrimPrefix(r.URL.Path, "/v1/api"); {
	case r.Method == http.MethodPost && p == "/opportunity":
		f.n++
		ok(fmt.Sprintf(`{"transactionId":"tx-%d"}`, f.n))
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/opportunity/"):
		id := strings.TrimPrefix(p, "/opportunity/")
		ok(fmt.Sprintf(`{"transactionId":%q,"status":"CAPTURED","operatorId":"sandbox","encryptedMobileNumber":"blob-of-%s"}`, id, id))
	case r.Method == http.MethodPost && p == "/workflows":
		var in map[string]string
		_ = json.NewDecoder(r.Body).Decode(&in)
		ok(fmt.Sprintf(`{"workflowId":"wf-of-%s","status":"IN_PROGRESS","mobileNumber":"+97150*****67","steps":[{"channel":"SILENT","status":"PENDING"}]}`, in["transactionId"]))
	case r.Method == http.MethodPost && strings.HasPrefix(p, "/workflows/") && strings.HasSuffix(p, "/silent"):
		var in map[string]string
		_ = json.NewDecoder(r.Body).Decode(&in)
		f.verified = append(f.verified, strings.TrimPrefix(in["encryptedMobileNumber"], "blob-of-"))
		ok(`{"workflowId":"wf-1","status":"VERIFIED","decidedBy":"SILENT","reason":"NETWORK_VERIFIED","mobileNumber":"+97150*****67","steps":[{"channel":"SILENT","status":"VERIFIED"}]}`)
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/workflows/wf-of-"):
		ok(fmt.Sprintf(`{"workflowId":%q,"status":"VERIFIED","decidedBy":"SMS_OTP","mobileNumber":"+97150*****67","charged":5}`, strings.TrimPrefix(p, "/workflows/")))
	case r.Method == http.MethodGet && p == "/me/stuck-plus/sessions":
		items := make([]string, 0, f.n)
		for i := 1; i <= f.n; i++ {
			items = append(items, fmt.Sprintf(`{"id":"sp-%d","transactionId":"tx-%d","mobileNumberMasked":"+97150*****67"}`, i, i))
		}
		ok(`{"items":[` + strings.Join(items, ",") + `]}`)
	default:
		http.NotFound(w, r)
	}
}

// browser is one visitor: its own cookie jar.
type browser struct {
	t    *testing.T
	c    *http.Client
	base string
}

func newBrowser(t *testing.T, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, c: &http.Client{Jar: jar}, base: base}
}

func (b *browser) do(method, path, body string) (int, map[string]any, string) {
	b.t.Helper()
	req, _ := http.NewRequest(method, b.base+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m, string(raw)
}

func start(t *testing.T) (*fakeAPI, string) {
	api := &fakeAPI{}
	gw := httptest.NewServer(api)
	t.Cleanup(gw.Close)
	site := demosite.New("127.0.0.1:0", gw.URL)
	site.SetClient(demosite.Client{ID: "client-1", APIKey: apiKey})
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)
	return api, srv.URL
}

// TestSessionBinding: a transaction is resolved only for the session that created it, as
// README's rule for your own site demands; another visitor cannot verify or read it.
func TestSessionBinding(t *testing.T) {
	api, base := start(t)
	alice, mallory := newBrowser(t, base), newBrowser(t, base)
	for _, b := range []*browser{alice, mallory} {
		if code, _, raw := b.do(http.MethodGet, "/", ""); code != http.StatusOK || strings.Contains(raw, apiKey) {
			t.Fatalf("page: %d, or it shows the key", code)
		}
	}

	code, m, raw := alice.do(http.MethodPost, "/demo/api/transactions", `{"flow":"VERIFY"}`)
	if code != http.StatusOK || m["transactionId"] != "tx-1" || strings.Contains(raw, apiKey) {
		t.Fatalf("alice's VERIFY: %d %s", code, raw)
	}
	if code, m, raw = alice.do(http.MethodPost, "/demo/api/transactions", `{"flow":"STUCK_PLUS"}`); code != http.StatusOK || m["transactionId"] != "tx-2" {
		t.Fatalf("alice's STUCK_PLUS: %d %s", code, raw)
	}

	tests := []struct {
		name     string
		who      *browser
		method   string
		path     string
		body     string
		wantCode int
		want     string // part of the body
	}{
		{"mallory cannot verify alice's transaction", mallory, http.MethodPost, "/demo/api/verify", `{"mobileNumber":"+971501234567"}`, http.StatusConflict, "NO_TRANSACTION"},
		{"mallory cannot read a workflow", mallory, http.MethodGet, "/demo/api/workflow", "", http.StatusConflict, "NO_WORKFLOW"},
		{"mallory cannot read alice's stuck-plus session", mallory, http.MethodGet, "/demo/api/stuck-plus", "", http.StatusConflict, "NO_TRANSACTION"},
		{"alice reads her stuck-plus session", alice, http.MethodGet, "/demo/api/stuck-plus", "", http.StatusOK, `"transactionId":"tx-2"`},
		{"alice verifies her transaction", alice, http.MethodPost, "/demo/api/verify", `{"mobileNumber":"+971501234567"}`, http.StatusOK, `"mobileNumberMasked":"+97150*****67"`},
		{"alice reads her workflow", alice, http.MethodGet, "/demo/api/workflow", "", http.StatusOK, `"charged":5`},
		{"an unknown flow", alice, http.MethodPost, "/demo/api/transactions", `{"flow":"STEAL"}`, http.StatusBadRequest, "INVALID_ARGUMENT"},
		{"a form post (another site's) is refused", alice, http.MethodPost, "/demo/api/transactions", "", http.StatusUnsupportedMediaType, "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, raw := tt.who.do(tt.method, tt.path, tt.body)
			if code != tt.wantCode || !strings.Contains(raw, tt.want) {
				t.Fatalf("%s %s = %d %s; want %d with %s", tt.method, tt.path, code, raw, tt.wantCode, tt.want)
			}
			if strings.Contains(raw, apiKey) {
				t.Fatalf("the answer shows the API key: %s", raw)
			}
		})
	}
	if len(api.verified) != 1 || api.verified[0] != "tx-1" {
		t.Fatalf("verified blobs %v, want only alice's tx-1", api.verified)
	}
}

// TestPage: the page loads the SDK from the gateway, under a CSP that allows only this site and
// the gateway, and sets an HttpOnly, Lax session cookie.
func TestPage(t *testing.T) {
	api := httptest.NewServer(&fakeAPI{})
	t.Cleanup(api.Close)
	site := demosite.New("127.0.0.1:0", api.URL)
	srv := httptest.NewServer(site)
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self' "+api.URL+";") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q", csp)
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == demosite.CookieName {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || len(cookie.Value) < 40 {
		t.Errorf("session cookie %+v", cookie)
	}

	resp, err = http.Get(srv.URL + "/app.js")
	if err != nil {
		t.Fatal(err)
	}
	js, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `from "` + api.URL + `/sdk/v1/mnv.js";`; !strings.Contains(string(js), want) || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") {
		t.Errorf("app.js does not import %s:\n%s", want, js)
	}

	// Before make run gives it the demo client, the backend says so rather than failing oddly.
	b := newBrowser(t, srv.URL)
	if code, _, raw := b.do(http.MethodPost, "/demo/api/transactions", `{"flow":"VERIFY"}`); code != http.StatusServiceUnavailable {
		t.Errorf("without a client: %d %s", code, raw)
	}
}
