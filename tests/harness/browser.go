package harness

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BrowserDir is the browser driver (Node.js, playwright-core), relative to the checkout.
const BrowserDir = "tests/harness/browser"

// Browser is Debian's Chromium driven by playwright-core through the Node driver in
// BrowserDir (one JSON line per operation on its stdin and stdout): the Go tests stay the
// orchestrators of the real binaries and drive the browser with these operations. Each
// method that takes a testing.TB fails it on an error; the ...Err ones return it.
type Browser struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *Output
	done   chan struct{}

	writeMu sync.Mutex
	mu      sync.Mutex
	nextID  int64
	waiting map[int64]chan reply
	// handlers by target id (context, page or DevTools session) of the events it sends.
	handlers map[string][]func(event)
	exitErr  error
}

type reply struct {
	Result json.RawMessage `json:"result"`
	Error  *string         `json:"error"`
}

// event is what the driver sends on its own: a route to answer, a DevTools event, a console
// message or an uncaught exception of a page.
type event struct {
	Event   string          `json:"event"`
	Target  string          `json:"target"`
	Route   string          `json:"route"`
	Request RouteRequest    `json:"request"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	URL     string          `json:"url"`
}

var (
	browserDepsMu sync.Mutex
	browserDepsOK bool
)

// BrowserDeps installs the driver's pinned npm packages (make browser-deps: npm ci from the
// committed lock file, only when it changed), once per process and under a file lock: the
// browser test packages run in parallel and two npm ci in one folder break it.
func BrowserDeps() error {
	browserDepsMu.Lock()
	defer browserDepsMu.Unlock()
	if browserDepsOK {
		return nil
	}
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "mnv-browser-driver-deps.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock the browser driver's install: %w", err)
	}
	cmd := exec.Command("make", "-C", root, "browser-deps")
	// A make above us (make test) must not hand its job server or flags to this one.
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MAKELEVEL=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make browser-deps: %w\n%s", err, out)
	}
	browserDepsOK = true
	return nil
}

// ChromiumPath is $MNV_CHROMIUM (make test sets it), else the Chromium that
// deploy/local/chromium-ensure.sh finds or installs.
func ChromiumPath() (string, error) {
	if p := os.Getenv("MNV_CHROMIUM"); p != "" {
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out, err := exec.Command(filepath.Join(root, "deploy/local/chromium-ensure.sh")).Output()
	if err != nil {
		return "", fmt.Errorf("chromium-ensure.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// StartBrowser installs the driver if need be, launches Chromium through it and stops both
// when t ends: the driver runs in a process group of its own, which the cleanup ends, and
// the driver closes Chromium when its stdin ends or on SIGTERM.
func StartBrowser(t testing.TB) *Browser {
	t.Helper()
	b, err := startBrowser()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// LaunchBrowser is StartBrowser outside a test (make bench): the caller closes the browser.
func LaunchBrowser() (*Browser, error) { return startBrowser() }

func startBrowser() (*Browser, error) {
	chromium, err := ChromiumPath()
	if err != nil {
		return nil, err
	}
	if err := BrowserDeps(); err != nil {
		return nil, err
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("node", filepath.Join(root, BrowserDir, "driver.mjs"))
	cmd.Env = append(os.Environ(), "MNV_CHROMIUM="+chromium)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	b := &Browser{cmd: cmd, stdin: stdin, stderr: &Output{}, done: make(chan struct{}),
		waiting: map[int64]chan reply{}, handlers: map[string][]func(event){}}
	cmd.Stderr = b.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the browser driver: %w", err)
	}
	ready := make(chan error, 1)
	go b.read(stdout, ready)
	select {
	case err := <-ready:
		if err != nil {
			b.Close()
			return nil, err
		}
	case <-time.After(90 * time.Second):
		b.Close()
		return nil, fmt.Errorf("the browser driver did not start Chromium %s: %s", chromium, b.stderr.String())
	}
	return b, nil
}

// read dispatches the driver's lines: answers to their callers, events to their handlers.
func (b *Browser) read(stdout io.Reader, ready chan<- error) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 64<<20) // full-page screenshots come as one line
	started := false
	for sc.Scan() {
		line := sc.Bytes()
		var head struct {
			ID    int64  `json:"id"`
			Event string `json:"event"`
		}
		if err := json.Unmarshal(line, &head); err != nil {
			continue
		}
		if head.Event != "" {
			if head.Event == "ready" {
				started = true
				ready <- nil
				continue
			}
			var ev event
			if err := json.Unmarshal(line, &ev); err != nil {
				continue
			}
			b.mu.Lock()
			hs := append([]func(event){}, b.handlers[ev.Target]...)
			b.mu.Unlock()
			for _, h := range hs {
				h(ev)
			}
			continue
		}
		var r reply
		if err := json.Unmarshal(line, &r); err != nil {
			continue
		}
		b.mu.Lock()
		ch := b.waiting[head.ID]
		delete(b.waiting, head.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
	err := b.cmd.Wait()
	if err == nil {
		err = errors.New("exit status 0")
	}
	b.mu.Lock()
	b.exitErr = fmt.Errorf("the browser driver exited (%w): %s", err, b.stderr.String())
	for id, ch := range b.waiting {
		msg := b.exitErr.Error()
		ch <- reply{Error: &msg}
		delete(b.waiting, id)
	}
	b.mu.Unlock()
	if !started {
		ready <- b.exitErr
	}
	close(b.done)
}

// call sends one operation and waits for its answer (at most within, plus the driver's own
// timeouts, which are shorter).
func (b *Browser) call(op string, args map[string]any, out any) error {
	b.mu.Lock()
	if b.exitErr != nil {
		b.mu.Unlock()
		return b.exitErr
	}
	b.nextID++
	id := b.nextID
	ch := make(chan reply, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "op": op}
	for k, v := range args {
		msg[k] = v
	}
	line, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	b.writeMu.Lock()
	_, err = b.stdin.Write(append(line, '\n'))
	b.writeMu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return fmt.Errorf("%s: %s", op, *r.Error)
		}
		if out != nil && len(r.Result) > 0 {
			if err := json.Unmarshal(r.Result, out); err != nil {
				return fmt.Errorf("%s: %s: %w", op, r.Result, err)
			}
		}
		return nil
	case <-time.After(3 * time.Minute):
		return fmt.Errorf("%s: no answer from the browser driver", op)
	}
}

func (b *Browser) on(target string, h func(event)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.handlers[target] = append(b.handlers[target], h)
}

// Close ends the driver and its Chromium: stdin closed first (the driver closes Chromium),
// then SIGTERM and at last SIGKILL to the driver's process group.
func (b *Browser) Close() {
	_ = b.stdin.Close()
	for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
		if sig != 0 {
			_ = syscall.Kill(-b.cmd.Process.Pid, sig)
		}
		select {
		case <-b.done:
			return
		case <-time.After(5 * time.Second):
		}
	}
	<-b.done
}

// ContextOptions shape a browser context: its viewport, and a phone's touch and meta viewport.
type ContextOptions struct {
	Width, Height int
	Mobile        bool
}

// Context is a browser context: its own cookies and storage, one visitor.
type Context struct {
	b  *Browser
	id string
}

// NewContext opens a context (1000×900 unless opts say otherwise), closed when t ends.
func (b *Browser) NewContext(t testing.TB, opts ContextOptions) *Context {
	t.Helper()
	c, err := b.OpenContext(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// OpenContext is NewContext outside a test: the caller closes the context.
func (b *Browser) OpenContext(opts ContextOptions) (*Context, error) {
	var id string
	if err := b.call("newContext", map[string]any{"width": opts.Width, "height": opts.Height, "mobile": opts.Mobile}, &id); err != nil {
		return nil, err
	}
	return &Context{b: b, id: id}, nil
}

// Close closes the context and its tabs.
func (c *Context) Close() error {
	return c.b.call("closeContext", map[string]any{"context": c.id}, nil)
}

// NewPage opens a tab of the context, closed when t ends.
func (c *Context) NewPage(t testing.TB) *Page {
	t.Helper()
	p, err := c.OpenPage()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.b.call("closePage", map[string]any{"page": p.id}, nil) })
	return p
}

// OpenPage is NewPage outside a test: the tab closes with its context.
func (c *Context) OpenPage() (*Page, error) {
	var id string
	if err := c.b.call("newPage", map[string]any{"context": c.id}, &id); err != nil {
		return nil, err
	}
	return &Page{b: c.b, id: id, Context: c}, nil
}

// AddInitScript runs script in every page of the context before the page's own scripts (the
// page's Content-Security-Policy does not apply to it).
func (c *Context) AddInitScript(t testing.TB, script string) {
	t.Helper()
	if err := c.AddInitScriptErr(script); err != nil {
		t.Fatal(err)
	}
}

// AddInitScriptErr is AddInitScript that returns its error.
func (c *Context) AddInitScriptErr(script string) error {
	return c.b.call("addInitScript", map[string]any{"context": c.id, "script": script}, nil)
}

// Cookie is a browser cookie.
type Cookie struct {
	Name     string `json:"name"`
	Value    string `json:"value"`
	Domain   string `json:"domain"`
	Path     string `json:"path"`
	HTTPOnly bool   `json:"httpOnly"`
	Secure   bool   `json:"secure"`
	SameSite string `json:"sameSite"`
}

// Cookies are the context's cookies sent to urls.
func (c *Context) Cookies(t testing.TB, urls ...string) []Cookie {
	t.Helper()
	cs, err := c.CookiesErr(urls...)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// CookiesErr is Cookies that returns its error.
func (c *Context) CookiesErr(urls ...string) ([]Cookie, error) {
	var cs []Cookie
	err := c.b.call("cookies", map[string]any{"context": c.id, "urls": urls}, &cs)
	return cs, err
}

// AddCookies gives the context cookies another context holds (Cookies): a second visitor with
// the first one's session. A domain without a leading dot is the host's alone, so a __Host-
// cookie stays one.
func (c *Context) AddCookies(cs []Cookie) error {
	out := make([]map[string]any, 0, len(cs))
	for _, k := range cs {
		out = append(out, map[string]any{"name": k.Name, "value": k.Value, "domain": k.Domain, "path": k.Path,
			"httpOnly": k.HTTPOnly, "secure": k.Secure, "sameSite": k.SameSite})
	}
	return c.b.call("addCookies", map[string]any{"context": c.id, "cookies": out}, nil)
}

// RouteRequest is a request the browser is about to send, held for a route's handler.
type RouteRequest struct {
	Method   string            `json:"method"`
	URL      string            `json:"url"`
	Headers  map[string]string `json:"headers"` // lower-case names
	PostData string            `json:"postData"`
}

// RouteAnswer is a handler's answer: Continue sends the request on (with Headers, when set,
// in place of its own), else the browser gets Status, Headers and Body as the response.
type RouteAnswer struct {
	Continue bool              `json:"continue,omitempty"`
	Status   int               `json:"status,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	Body     string            `json:"body,omitempty"`
}

// Route hands the context's requests matching pattern (a glob, "**/v1/api/**") to handler,
// each in a goroutine of its own.
func (c *Context) Route(t testing.TB, pattern string, handler func(RouteRequest) RouteAnswer) {
	t.Helper()
	route(t, c.b, map[string]any{"context": c.id, "pattern": pattern}, c.id, handler)
}

func route(t testing.TB, b *Browser, args map[string]any, target string, handler func(RouteRequest) RouteAnswer) {
	t.Helper()
	b.on(target, func(ev event) {
		if ev.Event != "route" {
			return
		}
		go func() {
			a := handler(ev.Request)
			_ = b.call("answerRoute", map[string]any{"route": ev.Route, "answer": a}, nil)
		}()
	})
	if err := b.call("route", args, nil); err != nil {
		t.Fatal(err)
	}
}

// Page is a tab.
type Page struct {
	b       *Browser
	id      string
	Context *Context
}

// Route is Context.Route for this tab alone.
func (p *Page) Route(t testing.TB, pattern string, handler func(RouteRequest) RouteAnswer) {
	t.Helper()
	route(t, p.b, map[string]any{"page": p.id, "pattern": pattern}, p.id, handler)
}

// ConsoleMessage is a message of the page's console (console.error, a CSP report, a failed
// load the browser logs) or, with Type "pageerror", an uncaught exception.
type ConsoleMessage struct {
	Type, Text, URL string
}

// OnConsole calls fn with each console message and uncaught exception of the page.
func (p *Page) OnConsole(fn func(ConsoleMessage)) {
	p.b.on(p.id, func(ev event) {
		switch ev.Event {
		case "console":
			fn(ConsoleMessage{Type: ev.Type, Text: ev.Text, URL: ev.URL})
		case "pageerror":
			fn(ConsoleMessage{Type: "pageerror", Text: ev.Text})
		}
	})
}

func (p *Page) do(t testing.TB, op string, args map[string]any, out any) {
	t.Helper()
	if err := p.doErr(op, args, out); err != nil {
		t.Fatal(err)
	}
}

func (p *Page) doErr(op string, args map[string]any, out any) error {
	if args == nil {
		args = map[string]any{}
	}
	args["page"] = p.id
	return p.b.call(op, args, out)
}

// Goto loads url and waits for its load event; it returns the main document's HTTP status.
func (p *Page) Goto(t testing.TB, url string) int {
	t.Helper()
	status, err := p.GotoErr(url)
	if err != nil {
		t.Fatal(err)
	}
	return status
}

// GotoErr is Goto that returns its error.
func (p *Page) GotoErr(url string) (int, error) {
	var status int
	err := p.doErr("goto", map[string]any{"url": url}, &status)
	return status, err
}

// URL is the address the tab shows.
func (p *Page) URL(t testing.TB) string {
	t.Helper()
	var u string
	p.do(t, "url", nil, &u)
	return u
}

// WaitVisible waits for the first element matching selector (CSS, or playwright's
// text=/xpath=/:has-text() forms) to be visible.
func (p *Page) WaitVisible(t testing.TB, selector string) {
	t.Helper()
	p.do(t, "waitVisible", map[string]any{"selector": selector}, nil)
}

// WaitVisibleErr is WaitVisible that returns its error.
func (p *Page) WaitVisibleErr(selector string) error {
	return p.doErr("waitVisible", map[string]any{"selector": selector}, nil)
}

// Click clicks the first element matching selector once it is visible, enabled and still.
func (p *Page) Click(t testing.TB, selector string) {
	t.Helper()
	p.do(t, "click", map[string]any{"selector": selector}, nil)
}

// Fill replaces the value of the input matching selector (input events as a person's typing).
func (p *Page) Fill(t testing.TB, selector, value string) {
	t.Helper()
	p.do(t, "fill", map[string]any{"selector": selector, "value": value}, nil)
}

// Type focuses the element matching selector and types text key by key.
func (p *Page) Type(t testing.TB, selector, text string) {
	t.Helper()
	p.do(t, "type", map[string]any{"selector": selector, "text": text}, nil)
}

// Press presses a key ("Tab", "Enter", "Escape", " ", "Shift+Tab") on the focused element.
func (p *Page) Press(t testing.TB, key string) {
	t.Helper()
	p.do(t, "press", map[string]any{"key": key}, nil)
}

// Text is the rendered text (innerText) of the first element matching selector.
func (p *Page) Text(t testing.TB, selector string) string {
	t.Helper()
	var s string
	p.do(t, "innerText", map[string]any{"selector": selector}, &s)
	return s
}

// TextErr is Text that returns its error (for what a failing test shows of the page).
func (p *Page) TextErr(selector string) (string, error) {
	var s string
	err := p.doErr("innerText", map[string]any{"selector": selector}, &s)
	return s, err
}

// TextContent is the DOM text (hidden parts too) of the first element matching selector.
func (p *Page) TextContent(t testing.TB, selector string) string {
	t.Helper()
	var s string
	p.do(t, "textContent", map[string]any{"selector": selector}, &s)
	return s
}

// Attribute is an attribute of the first element matching selector ("" when it has none).
func (p *Page) Attribute(t testing.TB, selector, name string) string {
	t.Helper()
	var s *string
	p.do(t, "attribute", map[string]any{"selector": selector, "attribute": name}, &s)
	if s == nil {
		return ""
	}
	return *s
}

// Eval evaluates a JavaScript expression in the page (a promise is awaited) and decodes its
// value into out (nil: ignored).
func (p *Page) Eval(t testing.TB, expression string, out any) {
	t.Helper()
	if err := p.EvalErr(expression, out); err != nil {
		t.Fatal(err)
	}
}

// EvalErr is Eval that returns its error.
func (p *Page) EvalErr(expression string, out any) error {
	return p.doErr("evaluate", map[string]any{"expression": expression}, out)
}

// Poll waits up to within for expression to be truthy in the page (across navigations) and
// decodes that value into out (nil: ignored).
func (p *Page) Poll(t testing.TB, expression string, out any, within time.Duration) {
	t.Helper()
	if err := p.PollErr(expression, out, within); err != nil {
		t.Fatal(err)
	}
}

// PollErr is Poll that returns its error.
func (p *Page) PollErr(expression string, out any, within time.Duration) error {
	return p.doErr("waitFor", map[string]any{"expression": expression, "timeout": within.Milliseconds()}, out)
}

// Screenshot is a PNG of the whole page.
func (p *Page) Screenshot(t testing.TB) []byte {
	t.Helper()
	var b64 string
	p.do(t, "screenshot", nil, &b64)
	png, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	return png
}

// SetViewport resizes the tab's viewport.
func (p *Page) SetViewport(t testing.TB, width, height int) {
	t.Helper()
	p.do(t, "setViewport", map[string]any{"width": width, "height": height}, nil)
}

// CDP is a DevTools session of a tab, for what playwright has no API for (the WebAuthn
// domain's virtual authenticator; Network and Log events as the browser reports them).
type CDP struct {
	b  *Browser
	id string
}

// CDP opens a DevTools session of the tab; events names the events to pass to OnEvent.
func (p *Page) CDP(t testing.TB, events ...string) *CDP {
	t.Helper()
	var id string
	p.do(t, "cdpSession", map[string]any{"events": events}, &id)
	return &CDP{b: p.b, id: id}
}

// Send sends a DevTools command and decodes its result into out (nil: ignored).
func (s *CDP) Send(method string, params map[string]any, out any) error {
	return s.b.call("cdp", map[string]any{"session": s.id, "method": method, "params": params}, out)
}

// OnEvent calls fn with the method and parameters of each event the session was opened for.
func (s *CDP) OnEvent(fn func(method string, params json.RawMessage)) {
	s.b.on(s.id, func(ev event) {
		if ev.Event == "cdp" {
			fn(ev.Method, ev.Params)
		}
	})
}

// VirtualAuthenticator adds to the tab Chromium's virtual authenticator (DevTools' WebAuthn
// domain): a platform authenticator (CTAP 2.1, internal transport) with resident keys that
// verifies its user and answers presence at once. It returns the session and the
// authenticator's id.
func (p *Page) VirtualAuthenticator(t testing.TB) (*CDP, string) {
	t.Helper()
	s, id, err := p.AddVirtualAuthenticator()
	if err != nil {
		t.Fatal(err)
	}
	return s, id
}

// AddVirtualAuthenticator is VirtualAuthenticator that returns its error.
func (p *Page) AddVirtualAuthenticator() (*CDP, string, error) {
	var sid string
	if err := p.doErr("cdpSession", map[string]any{"events": []string(nil)}, &sid); err != nil {
		return nil, "", err
	}
	s := &CDP{b: p.b, id: sid}
	if err := s.Send("WebAuthn.enable", map[string]any{"enableUI": false}, nil); err != nil {
		return nil, "", err
	}
	var added struct {
		AuthenticatorID string `json:"authenticatorId"`
	}
	err := s.Send("WebAuthn.addVirtualAuthenticator", map[string]any{"options": map[string]any{
		"protocol": "ctap2", "ctap2Version": "ctap2_1", "transport": "internal", "hasResidentKey": true,
		"hasUserVerification": true, "isUserVerified": true, "automaticPresenceSimulation": true,
	}}, &added)
	if err != nil {
		return nil, "", err
	}
	if added.AuthenticatorID == "" {
		return nil, "", errors.New("WebAuthn.addVirtualAuthenticator: no id")
	}
	return s, added.AuthenticatorID, nil
}

// WebAuthnCredential is a credential the virtual authenticator holds.
type WebAuthnCredential struct {
	CredentialID string `json:"credentialId"`
	RpID         string `json:"rpId"`
	UserHandle   string `json:"userHandle"`
	SignCount    int    `json:"signCount"`
}

// Credentials are the credentials the virtual authenticator holds.
func (s *CDP) Credentials(authenticator string) ([]WebAuthnCredential, error) {
	var out struct {
		Credentials []WebAuthnCredential `json:"credentials"`
	}
	err := s.Send("WebAuthn.getCredentials", map[string]any{"authenticatorId": authenticator}, &out)
	return out.Credentials, err
}

// RemoveCredential removes a credential from the virtual authenticator.
func (s *CDP) RemoveCredential(authenticator, credentialID string) error {
	return s.Send("WebAuthn.removeCredential", map[string]any{"authenticatorId": authenticator, "credentialId": credentialID}, nil)
}
