package browser_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mnvhq/mnv/tests/harness"
)

// camaraOperator is make run's fake CAMARA operator: it reads the device's line from the sandbox
// header, which a tab's "mobile network" adds to every request (mobileTab).
const camaraOperator = "sandbox-camara"

// shopPage is a client's page for the NETWORK_API flow, served on its own origin. On load it
// first finishes a capture that comes back from the operator (resumeCapture); otherwise it
// captures the transaction its URL names (tx, through operator op; redirect 'manual' when
// asked), and puts what happened in window.outcome. (A real page gets the transaction id from
// its own backend, never from its URL: README, "The rule for your own site".)
func shopPage(gateway string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>shop</title><script type="module">
import { capture, resumeCapture, MnvError } from %q;
const q = new URLSearchParams(location.search);
const failed = (e) => ({ mnvError: e instanceof MnvError, code: e.code, httpStatus: e.httpStatus, message: e.message });
try {
  const back = await resumeCapture();
  if (back !== null) {
    window.outcome = { resumed: true, status: back.status, operatorId: back.operatorId, blob: back.encryptedMobileNumber, href: location.href };
  } else if (q.get('tx')) {
    const r = await capture({ transactionId: q.get('tx'), operatorId: q.get('op') || undefined, redirect: q.get('redirect') || undefined });
    window.outcome = { captured: true, status: r.status, authorizationUrl: r.authorizationUrl ?? null };
  } else {
    window.outcome = { idle: true };
  }
} catch (e) {
  window.outcome = { failed: true, ...failed(e) };
}
</script>`, gateway+"/sdk/v1/mnv.js")
	})
}

// mobileTab is a tab on line msisdn's mobile network ("" for none): its requests to make run's
// CAMARA operator carry the sandbox header with msisdn, which is how that operator recognises
// the line. It records the statuses of mnv's callback.
func (e *env) mobileTab(t *testing.T, msisdn string) (*harness.Page, *callbacks) {
	t.Helper()
	tab := e.tab(t)
	cb := &callbacks{}
	network := tab.CDP(t, "Network.responseReceived", "Network.requestWillBeSent")
	network.OnEvent(func(method string, params json.RawMessage) {
		var ev networkResponse
		if json.Unmarshal(params, &ev) != nil {
			return
		}
		switch method {
		case "Network.responseReceived":
			cb.record(ev.Response)
		case "Network.requestWillBeSent":
			cb.record(ev.RedirectResponse) // a redirect's answer comes with the request it causes
		}
	})
	if err := network.Send("Network.enable", nil, nil); err != nil {
		t.Fatal(err)
	}
	if msisdn != "" {
		// The network adds the line's header on the way to the operator.
		tab.Route(t, e.operatorURL(t)+"/**", func(q harness.RouteRequest) harness.RouteAnswer {
			headers := map[string]string{"X-Mnv-Sandbox-Msisdn": msisdn}
			for k, v := range q.Headers {
				headers[k] = v
			}
			return harness.RouteAnswer{Continue: true, Headers: headers}
		})
	}
	return tab, cb
}

// operatorURL is the base URL of make run's CAMARA operator, from the registry it wrote.
func (e *env) operatorURL(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.state, "operators.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*apiRoot:\s*(\S+)\s*$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no apiRoot in make run's registry:\n%s", b)
	}
	return string(m[1])
}

type callbacks struct {
	mu     sync.Mutex
	status []int
}

func (c *callbacks) record(r *networkAnswer) {
	if r != nil && strings.Contains(r.URL, "/v1/api/sdk/session/callback") {
		c.mu.Lock()
		c.status = append(c.status, r.Status)
		c.mu.Unlock()
	}
}

func (c *callbacks) statuses() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.status...)
}

// awaitOutcome waits for the page (whichever the tab is on by then: it may navigate away and
// back) to set a window.outcome that has key.
func awaitOutcome(t *testing.T, tab *harness.Page, key string) map[string]any {
	t.Helper()
	expr := fmt.Sprintf(`(() => { const o = window.outcome; return o && o[%q] ? o : null; })()`, key)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var out map[string]any
		// A navigation under way destroys the context the expression runs in: try again.
		if err := tab.EvalErr(expr, &out); err == nil && out != nil {
			return out
		}
		time.Sleep(100 * time.Millisecond)
	}
	var href string
	_ = tab.EvalErr(`location.href`, &href)
	t.Fatalf("no window.outcome with %q on %s", key, href)
	return nil
}

// shopURL is the shop page capturing tx through op.
func (e *env) shopURL(tx, op, redirect string) string {
	q := url.Values{"tx": {tx}, "op": {op}}
	if redirect != "" {
		q.Set("redirect", redirect)
	}
	return e.shop.URL + "/?" + q.Encode()
}

// creds are a client's API credentials, as its backend holds them.
type creds struct {
	ClientID string `json:"clientId"`
	APIKey   string `json:"apiKey"`
}

// callAs calls the mnv API with c's credentials and returns the status and the envelope's data.
func (e *env) callAs(t *testing.T, c creds, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd bytes.Buffer
	if body != nil {
		_ = json.NewEncoder(&rd).Encode(body)
	}
	req, _ := http.NewRequest(method, e.api+path, &rd)
	req.Header.Set("X-API-KEY", c.APIKey)
	req.Header.Set("X-CLIENT-ID", c.ClientID)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Data map[string]any `json:"data"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&env)
	return resp.StatusCode, env.Data
}

// verifyNetwork is the demo client's backend verifying blob through the operator's network API.
func (e *env) verifyNetwork(t *testing.T, number, blob string) map[string]any {
	t.Helper()
	return e.call(t, http.MethodPost, "/verify", map[string]string{
		"mobileNumber": number, "encryptedMobileNumber": blob, "operatorId": camaraOperator, "serviceType": "NETWORK_API"})
}

// otherClient is a second client, made with mnvctl against make run, whose web origins do not
// include the shop's.
func (e *env) otherClient(t *testing.T) creds {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "bin", "mnvctl"), "client", "create", "--name", "Other Ltd", "--contact-name", "Olga",
		"--contact-email", "olga@other.example", "--contact-phone", "0044207946001", "--balance", "10",
		"--features", "VERIFY,SANDBOX", "-o", "json")
	cmd.Env = []string{"MNV_STATE_DIR=" + e.state}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mnvctl client create: %v: %s", err, stderr.String())
	}
	var c creds
	if err := json.Unmarshal(out, &c); err != nil || c.APIKey == "" {
		t.Fatalf("mnvctl answered %s (%v)", out, err)
	}
	return c
}

// networkAPI: the browser flow through an operator's network API, in Chromium against make run
// and its fake CAMARA operator.
func (e *env) networkAPI(t *testing.T) {
	t.Run("the page follows the operator, comes back, and the backend verifies", func(t *testing.T) {
		const line = "+971501112233"
		ctx, cb := e.mobileTab(t, line)
		tx := e.createTransaction(t, "VERIFY")
		ctx.Goto(t, e.shopURL(tx, camaraOperator, ""))
		got := awaitOutcome(t, ctx, "resumed")
		if got["status"] != "CAPTURED" || got["operatorId"] != camaraOperator || got["blob"] == nil {
			t.Fatalf("the page came back with %v, want CAPTURED through %s with the blob", got, camaraOperator)
		}
		// The way back went through mnv's callback, which sent the browser to the page (its
		// address without the query, which mnv refuses on the way back); the page's address
		// lost mnv's fragment.
		if s := cb.statuses(); len(s) != 1 || s[0] != http.StatusSeeOther {
			t.Errorf("the callback answered %v, want one 303", s)
		}
		if href, _ := got["href"].(string); href != e.shop.URL+"/" {
			t.Errorf("the page is at %q, want %q", href, e.shop.URL+"/")
		}
		backend := e.call(t, http.MethodGet, "/opportunity/"+tx, nil)
		if backend["status"] != "CAPTURED" || backend["encryptedMobileNumber"] != got["blob"] {
			t.Fatalf("the backend resolves %v", backend)
		}
		v := e.verifyNetwork(t, line, backend["encryptedMobileNumber"].(string))
		if v["status"] != "VERIFIED" || v["serviceType"] != "NETWORK_API" || v["charged"] != float64(1) {
			t.Fatalf("verify answered %v, want VERIFIED through NETWORK_API, charged 1", v)
		}
	})

	t.Run("a wrong state and a replayed callback change nothing", func(t *testing.T) {
		const line = "+971501112244"
		ctx, _ := e.mobileTab(t, "")
		tx := e.createTransaction(t, "VERIFY")
		ctx.Goto(t, e.shopURL(tx, camaraOperator, "manual"))
		started := awaitOutcome(t, ctx, "captured")
		authURL, _ := started["authorizationUrl"].(string)
		if started["status"] != "AUTHORIZATION_PENDING" || authURL == "" {
			t.Fatalf("the capture answered %v", started)
		}
		// The device on the operator's network: the operator sends it to mnv's callback.
		req, _ := http.NewRequest(http.MethodGet, authURL, nil)
		req.Header.Set("X-Mnv-Sandbox-Msisdn", line)
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		callback, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || resp.StatusCode != http.StatusFound || callback.Path != "/v1/api/sdk/session/callback" {
			t.Fatalf("the operator answered %d to %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		forged := *callback
		q := forged.Query()
		q.Set("state", q.Get("state")+"x")
		forged.RawQuery = q.Encode()

		visit := func(u string) string {
			t.Helper()
			ctx.Goto(t, u)
			return ctx.Text(t, "body")
		}
		if body := visit(forged.String()); !strings.Contains(body, `"INVALID_ARGUMENT"`) {
			t.Errorf("a wrong state: %s", body)
		}
		if s := e.transactionStatus(t, tx); s != "AUTHORIZATION_PENDING" {
			t.Fatalf("after a wrong state the transaction is %s, want AUTHORIZATION_PENDING", s)
		}
		// The right state completes it, and the page finishes.
		ctx.Goto(t, callback.String())
		if got := awaitOutcome(t, ctx, "resumed"); got["status"] != "CAPTURED" {
			t.Fatalf("the page came back with %v", got)
		}
		blob := e.call(t, http.MethodGet, "/opportunity/"+tx, nil)["encryptedMobileNumber"]
		// The same callback again (a reload, a copied URL): refused, nothing changed.
		if body := visit(callback.String()); !strings.Contains(body, `"INVALID_ARGUMENT"`) {
			t.Errorf("a replayed callback: %s", body)
		}
		if after := e.call(t, http.MethodGet, "/opportunity/"+tx, nil); after["status"] != "CAPTURED" || after["encryptedMobileNumber"] != blob {
			t.Errorf("after the replay the transaction is %v", after)
		}
		if v := e.verifyNetwork(t, "+971509998877", blob.(string)); v["status"] != "NOT_VERIFIED" {
			t.Errorf("verify of another number answered %v, want NOT_VERIFIED", v)
		}
	})

	t.Run("an operator link lifted from someone's capture completes nothing on a victim's phone", func(t *testing.T) {
		// Mallory's tab captures a flow of hers on the client's site, but does not follow the
		// operator: she hands the link to a victim.
		mallory, _ := e.mobileTab(t, "")
		tx := e.createTransaction(t, "VERIFY")
		mallory.Goto(t, e.shopURL(tx, camaraOperator, "manual"))
		link, _ := awaitOutcome(t, mallory, "captured")["authorizationUrl"].(string)
		if link == "" {
			t.Fatal("no authorization URL")
		}
		// The victim opens it on the victim's line: the operator vouches for the victim's line
		// and mnv sends the victim's browser to the shop's page, which is not the tab that
		// captured.
		victim, cb := e.mobileTab(t, "+971501112266")
		victim.Goto(t, link)
		if got := awaitOutcome(t, victim, "failed"); got["code"] != "STATE_MISMATCH" {
			t.Errorf("the victim's page: %v, want STATE_MISMATCH", got)
		}
		if s := cb.statuses(); len(s) != 1 || s[0] != http.StatusSeeOther {
			t.Errorf("the callback answered %v, want one 303", s)
		}
		// Mallory's session at the client never gets a blob of the victim's line.
		if got := e.call(t, http.MethodGet, "/opportunity/"+tx, nil); got["status"] != "AUTHORIZATION_PENDING" || got["encryptedMobileNumber"] != nil {
			t.Errorf("the transaction is %v, want AUTHORIZATION_PENDING without a blob", got)
		}
	})

	t.Run("another client's transaction is neither captured nor completed, nor taken on the way back", func(t *testing.T) {
		other := e.otherClient(t)
		status, data := e.callAs(t, other, http.MethodPost, "/opportunity", map[string]string{"serviceCode": "VERIFY", "metadataId": "theirs"})
		theirs, _ := data["transactionId"].(string)
		if status != http.StatusOK || theirs == "" {
			t.Fatalf("their transaction: %d %v", status, data)
		}
		ctx, cb := e.mobileTab(t, "+971501112255")
		completions := watchCompletions(t, ctx)
		ctx.Goto(t, e.shopURL(theirs, camaraOperator, ""))
		// The shop's page is not an origin of theirs: refused before anything is captured, and
		// the browser hides the refusal from the page.
		if got := awaitOutcome(t, ctx, "failed"); got["code"] != "NETWORK_ERROR" {
			t.Errorf("capture of their transaction: %v, want NETWORK_ERROR", got)
		}
		// A link to the shop's page that claims their transaction came back: this tab sent
		// none, so the page takes nothing and reads nothing.
		crafted := e.shop.URL + "/#" + url.Values{"mnv_transaction": {theirs}, "mnv_code": {"lifted-or-guessed"}}.Encode()
		ctx.Goto(t, crafted)
		if got := awaitOutcome(t, ctx, "failed"); got["code"] != "STATE_MISMATCH" {
			t.Errorf("a crafted return: %v, want STATE_MISMATCH", got)
		}
		if n := completions.count(); n != 0 {
			t.Errorf("the page completed a transaction %d times", n)
		}
		if s := cb.statuses(); len(s) != 0 {
			t.Errorf("the callback was reached: %v", s)
		}
		// Their transaction is untouched, and the shop's origin cannot complete it either.
		if status, data := e.callAs(t, other, http.MethodGet, "/opportunity/"+theirs, nil); status != http.StatusOK || data["status"] != "PENDING" {
			t.Errorf("their transaction is %d %v, want PENDING", status, data)
		}
		req, _ := http.NewRequest(http.MethodPost, e.api+"/web/transactions/"+theirs+"/complete", strings.NewReader(`{"code":"c","codeVerifier":"v"}`))
		req.Header.Set("Origin", e.shop.URL)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("completion of their transaction from the shop: %d, ACAO %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	})
}

// completions counts the page's completions of transactions (POST /v1/api/web/transactions/{id}/complete).
type completions struct {
	mu sync.Mutex
	n  int
}

func (r *completions) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

func watchCompletions(t *testing.T, tab *harness.Page) *completions {
	t.Helper()
	r := &completions{}
	network := tab.CDP(t, "Network.requestWillBeSent")
	network.OnEvent(func(_ string, params json.RawMessage) {
		var q networkResponse
		if json.Unmarshal(params, &q) == nil && strings.HasSuffix(q.Request.URL, "/complete") {
			r.mu.Lock()
			r.n++
			r.mu.Unlock()
		}
	})
	if err := network.Send("Network.enable", nil, nil); err != nil {
		t.Fatal(err)
	}
	return r
}
