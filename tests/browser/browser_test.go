// Package browser_test drives the demo site and the browser SDK in a real headless Chromium
// against a real `make run`: the flows a newcomer clicks, and what a page on a foreign origin or
// with a spent transaction gets.
package browser_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/tests/harness"
)

// sandboxNumber is the number the sandbox operator "sees" in the demo's VERIFIED flow.
const sandboxNumber = "+971501234567"

// env is the suite one test run shares: make run, the demo client and a browser.
type env struct {
	api     string // http://gateway/v1/api
	gateway string // http://gateway
	demo    string // http://demo site
	client  creds
	browser *harness.Browser
	// visitor is the browser context of the demo's visitor: its tabs share its cookies
	// (newPerson opens a context of one's own per person).
	visitor *harness.Context
	state   string // make run's MNV_STATE_DIR, where mnvctl finds it
	db      string // make run's DATABASE_URL
	output  string // what make run printed once ready
	// shop is a page of the demo client's on an origin of its own (allowed, like the demo
	// site's), for the NETWORK_API flow: it captures the transaction its URL names and finishes
	// what comes back (see shopPage).
	shop *httptest.Server
}

func TestBrowser(t *testing.T) {
	began := time.Now()
	t.Cleanup(func() { t.Logf("browser tests took %s", time.Since(began).Round(time.Millisecond)) })
	e := setUp(t)

	t.Run("VERIFY: the typed number is the one the network sees", func(t *testing.T) {
		tab := e.tab(t)
		result, errText := e.runDemo(t, tab, "#verify", sandboxNumber, sandboxNumber)
		if result != "VERIFIED" || errText != "" {
			t.Fatalf("result %q, error %q; want VERIFIED", result, errText)
		}
		details := tab.Text(t, "#details")
		if !strings.Contains(details, `"mobileNumberMasked": "+97150*****67"`) || strings.Contains(details, e.client.APIKey) {
			t.Errorf("details %s", details)
		}
		screenshot(t, tab)
	})

	t.Run("VERIFY: another number than the network sees", func(t *testing.T) {
		result, errText := e.runDemo(t, e.tab(t), "#verify", "+971501234567", "+971509999999")
		if result != "NOT_VERIFIED" || errText != "" {
			t.Fatalf("result %q, error %q; want NOT_VERIFIED", result, errText)
		}
	})

	t.Run("VERIFY on Wi-Fi: the network cannot tell, the page takes the SMS code", e.testWiFiCode)
	t.Run("VERIFY on Wi-Fi: a new code on the page", e.testWiFiResend)

	t.Run("STUCK_PLUS: the masked session is listed", func(t *testing.T) {
		result, errText := e.runDemo(t, e.tab(t), "#stuck-plus", "", "+971501234567")
		if !strings.Contains(result, "+97150*****67") || errText != "" {
			t.Fatalf("result %q, error %q; want the masked session", result, errText)
		}
	})

	t.Run("a page on another origin cannot capture", func(t *testing.T) {
		tx := e.createTransaction(t, "VERIFY")
		foreign := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!doctype html><title>not the client's site</title><script type="module">
import { capture, MnvError } from %q;
try { await capture({ transactionId: %q, sandboxNumber: %q }); window.outcome = { captured: true }; }
catch (e) { window.outcome = { mnvError: e instanceof MnvError, code: e.code, httpStatus: e.httpStatus }; }
</script>`, e.gateway+"/sdk/v1/mnv.js", tx, sandboxNumber)
		}))
		defer foreign.Close()

		tab := e.tab(t)
		captures := watchCaptures(t, tab)
		outcome := waitOutcome(t, tab, foreign.URL)
		// The gateway answers a foreign origin without CORS headers, so the page cannot read the
		// refusal: the SDK reports a network error, never a raw fetch error.
		if outcome["mnvError"] != true || outcome["code"] != "NETWORK_ERROR" || outcome["httpStatus"] != float64(0) {
			t.Errorf("the page got %v; want an MnvError NETWORK_ERROR with httpStatus 0", outcome)
		}
		// What the gateway answered on the wire, as the browser saw it.
		if got := captures.statuses(); len(got) == 0 || got[0] != http.StatusForbidden {
			t.Errorf("the gateway's answers to the capture (preflight first): %v; want 403", got)
		}
		if code := e.refusalCode(t, foreign.URL, tx); code != "PERMISSION_DENIED" {
			t.Errorf("the refusal's code %q, want PERMISSION_DENIED", code)
		}
		if status := e.transactionStatus(t, tx); status != "PENDING" {
			t.Errorf("the transaction is %s after the refused capture; want PENDING", status)
		}
	})

	t.Run("MnvError: an unknown and an already captured transaction", func(t *testing.T) {
		tab := e.tab(t)
		tab.Goto(t, e.demo)
		tab.WaitVisible(t, `body[data-state="ready"]`)
		tx := e.createTransaction(t, "VERIFY")
		tests := []struct {
			name, tx       string
			wantCode       string
			wantHTTPStatus float64
		}{
			// An unknown transaction allows no origin (a page learns nothing of which ids
			// exist): like a foreign page's, the answer is unreadable to the page.
			{"unknown", "00000000-0000-4000-8000-000000000000", "NETWORK_ERROR", 0},
			{"first capture", tx, "", 0},
			{"already captured", tx, "ALREADY_USED", http.StatusConflict},
		}
		for _, tt := range tests {
			var got map[string]any
			script := fmt.Sprintf(`import(%q).then(m => m.capture({ transactionId: %q, sandboxNumber: %q }))
  .then(r => ({ status: r.status }), e => ({ mnvError: e.name === 'MnvError' || e.constructor.name === 'MnvError', code: e.code, httpStatus: e.httpStatus, message: e.message, requestId: e.requestId }))`,
				e.gateway+"/sdk/v1/mnv.js", tt.tx, sandboxNumber)
			if err := tab.EvalErr(script, &got); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if tt.wantCode == "" {
				if got["status"] != "CAPTURED" {
					t.Fatalf("%s: %v, want CAPTURED", tt.name, got)
				}
				continue
			}
			if got["code"] != tt.wantCode || got["httpStatus"] != tt.wantHTTPStatus || got["mnvError"] != true {
				t.Errorf("%s: %v; want MnvError %s, httpStatus %v", tt.name, got, tt.wantCode, tt.wantHTTPStatus)
			}
			if tt.wantHTTPStatus != 0 && got["requestId"] == nil {
				t.Errorf("%s: no requestId in %v", tt.name, got)
			}
		}
	})

	t.Run("NETWORK_API", e.networkAPI)

	// After STUCK_PLUS: the console reveals the session it captured.
	t.Run("console: a person invited at start signs in with a passkey; what others try is refused", e.testConsole)
}

func setUp(t *testing.T) *env {
	t.Helper()
	return setUpWith(t, nil)
}

// setUpWith is setUp with more variables for make run (a console configured otherwise).
func setUpWith(t *testing.T, extra map[string]string) *env {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if testing.Short() {
		t.Skip("browser: needs Chromium, PostgreSQL and make run; skipped under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	t.Cleanup(cancel)
	dbURL, drop, err := pgtest.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	state := t.TempDir()
	vars := map[string]string{"DATABASE_URL": dbURL, "MNV_STATE_DIR": state, "MNV_LOG_LEVEL": "warn"}
	for k, v := range extra {
		vars[k] = v
	}
	run, err := harness.StartMakeRunReady(ctx, root, vars, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(run.Stop)
	e := &env{gateway: "http://" + vars["MNV_HTTP_ADDR"], demo: "http://" + vars["MNV_DEMO_ADDR"], state: state, db: dbURL}
	e.api = e.gateway + "/v1/api"
	if !strings.Contains(run.Output(), "Demo site: "+e.demo) {
		t.Fatalf("make run does not print the demo's address %s:\n%s", e.demo, run.Output())
	}
	e.output = run.Output()
	b, err := os.ReadFile(filepath.Join(state, "demo-client.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &e.client); err != nil {
		t.Fatal(err)
	}
	e.shop = httptest.NewServer(shopPage(e.gateway))
	t.Cleanup(e.shop.Close)
	var origins []string
	for _, it := range e.call(t, http.MethodGet, "/me/web-origins", nil)["items"].([]any) {
		origins = append(origins, it.(map[string]any)["origin"].(string))
	}
	e.call(t, http.MethodPut, "/me/web-origins", map[string]any{"origins": append(origins, e.shop.URL)})

	// Chromium (MNV_CHROMIUM, as make test sets it, or the one chromium-ensure.sh finds or
	// installs), driven with playwright-core.
	e.browser = harness.StartBrowser(t)
	e.visitor = e.browser.NewContext(t, harness.ContextOptions{Width: 1000, Height: 900})
	return e
}

// tab opens a new tab of the visitor's context (same cookies: one visitor), closed with the
// test.
func (e *env) tab(t *testing.T) *harness.Page {
	t.Helper()
	return e.visitor.NewPage(t)
}

// runDemo loads the demo page, fills the numbers, clicks button and returns what the page shows.
func (e *env) runDemo(t *testing.T, tab *harness.Page, button, number, seen string) (result, errText string) {
	t.Helper()
	tab.Goto(t, e.demo)
	tab.WaitVisible(t, `body[data-state="ready"]`)
	tab.Fill(t, "#sandbox-number", seen)
	if number != "" {
		tab.Fill(t, "#number", number)
	}
	tab.Click(t, button)
	if err := tab.WaitVisibleErr(`body[data-state="done"]`); err != nil {
		t.Fatalf("the demo page (state %q): %v", tab.Attribute(t, "body", "data-state"), err)
	}
	return strings.TrimSpace(tab.Text(t, "#result")), strings.TrimSpace(tab.TextContent(t, "#error"))
}

// screenshot keeps the demo page as a test artifact, out/browser-demo.png at the repo root.
func screenshot(t *testing.T, tab *harness.Page) {
	t.Helper()
	screenshotAs(t, tab, "browser-demo.png")
}

// screenshotAs keeps the page as out/<name> at the repo root.
func screenshotAs(t *testing.T, tab *harness.Page, name string) {
	t.Helper()
	png := tab.Screenshot(t)
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// call is the mnv API as the demo client's backend calls it; it returns the envelope's data.
func (e *env) call(t *testing.T, method, path string, body any) map[string]any {
	t.Helper()
	status, data := e.callAs(t, e.client, method, path, body)
	if status != http.StatusOK {
		t.Fatalf("%s %s: %d", method, path, status)
	}
	return data
}

func (e *env) createTransaction(t *testing.T, flow string) string {
	t.Helper()
	id, _ := e.call(t, http.MethodPost, "/opportunity", map[string]string{"serviceCode": flow, "metadataId": "browser-test"})["transactionId"].(string)
	if id == "" {
		t.Fatal("no transaction id")
	}
	return id
}

func (e *env) transactionStatus(t *testing.T, tx string) string {
	t.Helper()
	s, _ := e.call(t, http.MethodGet, "/opportunity/"+tx, nil)["status"].(string)
	return s
}

// refusalCode is the code of the gateway's answer to a capture from origin, which the browser
// hides from the page: asked as that page's browser asks it.
func (e *env) refusalCode(t *testing.T, origin, tx string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.api+"/web/transactions/"+tx+"/capture", nil)
	req.Header.Set("Origin", origin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Messages []struct {
			Code string `json:"code"`
		} `json:"messages"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&env)
	if resp.StatusCode != http.StatusForbidden || len(env.Messages) == 0 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("capture from %s: %d, ACAO %q", origin, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		return ""
	}
	return env.Messages[0].Code
}

// captures records the statuses of the capture requests a tab makes, as the browser received
// them (preflights included), before CORS hides them from the page.
type captures struct {
	mu     sync.Mutex
	status []int
}

func (c *captures) statuses() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.status...)
}

// (DevTools' Network domain: playwright's own response events leave preflights out.)
func watchCaptures(t *testing.T, tab *harness.Page) *captures {
	t.Helper()
	c := &captures{}
	network := tab.CDP(t, "Network.responseReceived")
	network.OnEvent(func(_ string, params json.RawMessage) {
		var ev networkResponse
		if json.Unmarshal(params, &ev) == nil && ev.Response != nil && strings.Contains(ev.Response.URL, "/web/transactions/") {
			c.mu.Lock()
			c.status = append(c.status, ev.Response.Status)
			c.mu.Unlock()
		}
	})
	if err := network.Send("Network.enable", nil, nil); err != nil {
		t.Fatal(err)
	}
	return c
}

// networkResponse is what DevTools' Network.responseReceived and, as redirectResponse,
// Network.requestWillBeSent say of an answer.
type networkResponse struct {
	Response         *networkAnswer `json:"response"`
	RedirectResponse *networkAnswer `json:"redirectResponse"`
	Request          struct {
		URL string `json:"url"`
	} `json:"request"`
}

type networkAnswer struct {
	URL    string `json:"url"`
	Status int    `json:"status"`
}

// waitOutcome loads url and waits for its script to set window.outcome.
func waitOutcome(t *testing.T, tab *harness.Page, url string) map[string]any {
	t.Helper()
	var outcome map[string]any
	if _, err := tab.GotoErr(url); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	if err := tab.PollErr(`window.outcome`, &outcome, 20*time.Second); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return outcome
}
