// Package console_test loads the console in Debian's Chromium from the gateway binary alone (it
// starts without its backends): the sign-in page renders, with no Content-Security-Policy
// violation and no console error, passes axe-core without a serious or critical violation,
// and is kept as a screenshot (out/console-sign-in.png). The end-to-end tests of the console
// against the whole suite (a passkey through the virtual authenticator, every page) are the
// people API's, in tests/browser.
package console_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mnvhq/mnv/tests/harness"
)

// cspWatch records, from before any script of the page runs, the violations the browser
// reports (a DevTools script: the page's CSP does not apply to it).
const cspWatch = `window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));`

func TestSignInPage(t *testing.T) {
	root, gateway, browser := setUp(t)
	bctx := browser.NewContext(t, harness.ContextOptions{Width: 1200, Height: 800})
	bctx.AddInitScript(t, cspWatch)
	p := bctx.NewPage(t)

	var mu sync.Mutex
	var problems []string
	// What the browser logs itself (a CSP report, a failed load) comes in DevTools' Log domain.
	logs := p.CDP(t, "Log.entryAdded")
	logs.OnEvent(func(_ string, params json.RawMessage) {
		var ev struct {
			Entry struct{ Source, Level, Text, URL string }
		}
		_ = json.Unmarshal(params, &ev)
		if ev.Entry.Level == "error" || strings.Contains(ev.Entry.Text, "Content Security Policy") {
			mu.Lock()
			problems = append(problems, fmt.Sprintf("log %s: %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			mu.Unlock()
		}
	})
	if err := logs.Send("Log.enable", nil, nil); err != nil {
		t.Fatal(err)
	}
	p.OnConsole(func(m harness.ConsoleMessage) {
		mu.Lock()
		defer mu.Unlock()
		switch m.Type {
		case "error", "warning":
			problems = append(problems, fmt.Sprintf("console.%s: %s %s", m.Type, m.Text, m.URL))
		case "pageerror":
			problems = append(problems, "exception: "+m.Text)
		}
	})

	start := time.Now()
	var csp []string
	p.Goto(t, gateway+"/console/sign-in")
	p.WaitVisible(t, `#sign-in-title`)
	heading := p.Text(t, `#sign-in-title`)
	button := p.Text(t, `main button`)
	p.Eval(t, `window.__csp`, &csp)
	t.Logf("/console/sign-in usable after %s", time.Since(start).Round(time.Millisecond))
	if heading != "Sign in" || button != "Sign in with a passkey" {
		t.Errorf("heading %q, button %q", heading, button)
	}
	if len(csp) > 0 {
		t.Errorf("CSP violations: %v", csp)
	}

	// Everything else under /console, signed out, ends on the sign-in page (the session is a
	// 401 without a cookie) or says why it cannot.
	p.Goto(t, gateway+"/console/keys")
	p.Poll(t, `location.pathname === '/console/sign-in' || !!document.querySelector('.state-error')`, nil, 15*time.Second)
	var path string
	p.Eval(t, `location.pathname`, &path)
	text := p.Text(t, `body`)
	p.Eval(t, `window.__csp`, &csp)
	t.Logf("/console/keys signed out: %s", path)
	if len(csp) > 0 {
		t.Errorf("CSP violations on %s: %v", path, csp)
	}
	if path != "/console/sign-in" {
		t.Logf("stayed on %s: %s", path, strings.TrimSpace(text))
	}

	p.Goto(t, gateway+"/console/sign-in")
	p.WaitVisible(t, `#sign-in-title`)
	axe(t, p, root)
	screenshot(t, p, root, "console-sign-in.png")

	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		// The signed-out session read is a 401 the browser logs as a failed resource load.
		if strings.Contains(p, "401") && strings.Contains(p, "/v1/api/console/session") {
			continue
		}
		t.Errorf("%s", p)
	}
}

// axe runs axe-core (console's pinned devDependency) in the page through DevTools, so the CSP
// does not apply to it, and fails on a serious or critical violation.
func axe(t *testing.T, p *harness.Page, root string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "console/node_modules/axe-core/axe.min.js"))
	if err != nil {
		t.Fatalf("axe-core: %v (make console-check installs it)", err)
	}
	var found []struct {
		ID, Impact, Help string
		Nodes            []struct{ Target []string }
	}
	p.Eval(t, string(src), nil)
	p.Eval(t, `axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => ({target: n.target.map(String)}))})))`, &found)
	for _, v := range found {
		msg := fmt.Sprintf("axe %s (%s): %s at %v", v.ID, v.Impact, v.Help, v.Nodes)
		if v.Impact == "serious" || v.Impact == "critical" {
			t.Error(msg)
		} else {
			t.Log(msg)
		}
	}
}

func screenshot(t *testing.T, p *harness.Page, root, name string) {
	t.Helper()
	png := p.Screenshot(t)
	out := filepath.Join(root, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: out/%s", name)
}

// setUp skips t under -short, else starts the gateway binary alone (startGateway) and
// Chromium: the checkout, the gateway's URL and the browser, all stopped when t ends.
func setUp(t *testing.T) (root, gateway string, browser *harness.Browser) {
	t.Helper()
	if testing.Short() {
		t.Skip("console: needs Chromium and the gateway binary; skipped under -short")
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root, startGateway(t, root), harness.StartBrowser(t)
}

// startGateway runs bin/gateway ($MNV_BIN_DIR, as make test builds it, or built now) on a free
// address, its backends' addresses free ports with nothing behind them, and waits for /healthz.
func startGateway(t *testing.T, root string) string {
	t.Helper()
	bin, err := gatewayBinary(root)
	if err != nil {
		t.Fatal(err)
	}
	token := make([]byte, 24)
	_, _ = rand.Read(token)
	env := map[string]string{"MNV_INTERNAL_TOKEN": hex.EncodeToString(token), "MNV_LOG_LEVEL": "warn"}
	for _, name := range []string{"MNV_HTTP_ADDR", "MNV_ACCOUNTS_ADDR", "MNV_VERIFICATION_ADDR", "MNV_CONNECT_ADDR"} {
		addr, err := harness.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		env[name] = addr
	}
	cmd := exec.Command(bin)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out harness.Output
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	url := "http://" + env["MNV_HTTP_ADDR"]
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			// The people API's routes are generated before the gateway routes them (the backend
			// of issue 34 is built beside the console): until then the gateway refuses to start.
			if strings.Contains(out.String(), "no mux for") && strings.Contains(out.String(), "PeopleService") {
				t.Skipf("this gateway does not route the people API yet: %s", out.String())
			}
			t.Fatalf("the gateway exited: %v\n%s", err, out.String())
		default:
		}
		resp, err := http.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not answer /healthz: %v\n%s", err, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// gatewayBinary is $MNV_BIN_DIR/gateway (make test builds bin/ first), else one built once for
// the test binary.
func gatewayBinary(root string) (string, error) {
	if d := os.Getenv("MNV_BIN_DIR"); d != "" {
		return filepath.Join(d, "gateway"), nil
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mnv-console-gateway-")
		if err != nil {
			buildErr = err
			return
		}
		built = filepath.Join(dir, "gateway")
		cmd := exec.Command("go", "build", "-o", built, "./gateway/cmd/gateway")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build gateway: %w\n%s", err, out)
		}
	})
	return built, buildErr
}
