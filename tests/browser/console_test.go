package browser_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/tests/harness"
)

// The console's people, in Chromium with a virtual authenticator (DevTools' WebAuthn domain)
// against make run: an invitation printed at start is accepted with a new passkey, the session
// cookie works on the API's routes, and what another origin, a MEMBER, a removed member and a
// signed-out browser try is refused.

// consoleLink is the invitation make run prints for the demo client's person.
var consoleLink = regexp.MustCompile(`sign in as \S+ with a new passkey: (http://localhost:\d+/console/invite#(mnvinv_\w+))`)

// person is a browser context of its own (its own cookies) with a passkey authenticator, on
// the console's origin.
type person struct {
	page   *harness.Page
	origin string
	// webAuthn is the tab's DevTools session whose virtual authenticator (authenticator)
	// holds the person's passkeys.
	webAuthn      *harness.CDP
	authenticator string
}

// consoleInvitation is the invitation make run printed for the demo client's person: the
// console's origin and the token.
func (e *env) consoleInvitation(t *testing.T) (origin, token string) {
	t.Helper()
	m := consoleLink.FindStringSubmatch(e.output)
	if m == nil {
		t.Fatalf("make run printed no console invitation:\n%s", e.output)
	}
	link, err := url.Parse(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return link.Scheme + "://" + link.Host, m[2]
}

// newPerson opens a browser context of its own (its own cookies) with a virtual authenticator
// that verifies its user, at origin.
func (e *env) newPerson(t *testing.T, origin string) *person {
	t.Helper()
	page := e.browser.NewContext(t, harness.ContextOptions{Width: 1000, Height: 900}).NewPage(t)
	page.Goto(t, origin+"/healthz")
	webAuthn, auth := page.VirtualAuthenticator(t)
	return &person{page: page, origin: origin, webAuthn: webAuthn, authenticator: auth}
}

// run evaluates an async function body in the page with args (JSON) and decodes its result.
func (p *person) run(t *testing.T, body string, args any, out any) {
	t.Helper()
	a, _ := json.Marshal(args)
	js := fmt.Sprintf("(async (args) => { %s })(%s)", body, a)
	var raw json.RawMessage
	if err := p.page.EvalErr(js, &raw); err != nil {
		t.Fatalf("in the page: %v", err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
	}
}

// answer is what the page's fetch got.
type answer struct {
	Status int            `json:"status"`
	Body   map[string]any `json:"body"`
}

func (a answer) data() map[string]any {
	d, _ := a.Body["data"].(map[string]any)
	return d
}

// fetchJS is the page's call of the API: same origin, the browser's cookies.
const fetchJS = `const api = async (method, path, body) => {
  const r = await fetch('/v1/api' + path, {method, headers: body ? {'content-type': 'application/json'} : {}, body: body ? JSON.stringify(body) : undefined});
  let b = null; try { b = await r.json(); } catch (e) {}
  return {status: r.status, body: b};
};`

func (p *person) api(t *testing.T, method, path string, body any) answer {
	t.Helper()
	var a answer
	p.run(t, fetchJS+` return await api(args.method, args.path, args.body);`, map[string]any{"method": method, "path": path, "body": body}, &a)
	return a
}

// accept opens the invitation of token and accepts it with a new passkey.
func (p *person) accept(t *testing.T, token, name string) answer {
	t.Helper()
	var a answer
	p.run(t, fetchJS+`
const open = await api('POST', '/console/invitations/open', {token: args.token});
if (open.status !== 200) return open;
const o = JSON.parse(open.body.data.optionsJson);
const cred = await navigator.credentials.create({publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(o.publicKey)});
return await api('POST', '/console/invitations/accept', {token: args.token, ceremonyId: open.body.data.ceremonyId,
  credentialJson: JSON.stringify(cred.toJSON()), name: args.name});`, map[string]any{"token": token, "name": name}, &a)
	return a
}

// signIn signs in with any passkey of the site (the authenticator's).
func (p *person) signIn(t *testing.T) answer {
	t.Helper()
	var a answer
	p.run(t, fetchJS+`
const start = await api('POST', '/console/sign-in/options', {});
const o = JSON.parse(start.body.data.optionsJson);
const cred = await navigator.credentials.get({publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(o.publicKey)});
return await api('POST', '/console/sign-in', {ceremonyId: start.body.data.ceremonyId, credentialJson: JSON.stringify(cred.toJSON())});`, nil, &a)
	return a
}

func want(t *testing.T, what string, a answer, status int) {
	t.Helper()
	if a.Status != status {
		t.Fatalf("%s: %d %v, want %d", what, a.Status, a.Body, status)
	}
}

func (e *env) testConsole(t *testing.T) {
	origin, token := e.consoleInvitation(t)
	admin := e.newPerson(t, origin)

	// Not signed in: the session routes and the API-key routes alike are 401.
	want(t, "session before sign-in", admin.api(t, "GET", "/console/session", nil), http.StatusUnauthorized)
	want(t, "keys before sign-in", admin.api(t, "GET", "/me/api-keys", nil), http.StatusUnauthorized)

	acc := admin.accept(t, token, "Dev Eloper")
	want(t, "accept", acc, http.StatusOK)
	if acc.data()["membership"].(map[string]any)["role"] != "ADMIN" {
		t.Fatalf("accepted as %v", acc.data())
	}
	want(t, "the invitation again", admin.accept(t, token, "Again"), http.StatusNotFound)

	s := admin.api(t, "GET", "/console/session", nil)
	want(t, "session", s, http.StatusOK)
	if s.data()["person"].(map[string]any)["email"] != "dev@example.com" || s.data()["membership"].(map[string]any)["clientId"] != e.client.ClientID {
		t.Fatalf("session: %v", s.data())
	}
	// The cookie reads the API's routes, with the person's role: never an API key in the page.
	want(t, "ledger", admin.api(t, "GET", "/me/ledger", nil), http.StatusOK)
	created := admin.api(t, "POST", "/me/api-keys", map[string]any{"name": "made in the console", "role": "MEMBER"})
	want(t, "create a key (stepped up at sign-in)", created, http.StatusOK)
	if k, _ := created.data()["apiKey"].(string); !strings.HasPrefix(k, "mnv_") {
		t.Fatalf("created: %v", created.data())
	}
	// The console's rotation: by the key's id, with an overlap; both keys work meanwhile.
	rotated := admin.api(t, "POST", "/me/api-keys/"+created.data()["id"].(string)+"/rotate", map[string]any{"oldKeyGraceSeconds": 600})
	want(t, "rotate the key", rotated, http.StatusOK)
	newKey := rotated.data()["apiKey"].(map[string]any)
	if rotated.data()["oldKeyValidUntil"] == nil || newKey["name"] != "made in the console" || newKey["role"] != "MEMBER" {
		t.Fatalf("rotated: %v", rotated.data())
	}
	for _, k := range []string{created.data()["apiKey"].(string), newKey["apiKey"].(string)} {
		if status, _ := e.callAs(t, creds{ClientID: e.client.ClientID, APIKey: k}, http.MethodGet, "/me/ledger", nil); status != http.StatusOK {
			t.Fatalf("a key of the rotation answered %d during the overlap", status)
		}
	}
	want(t, "rotate the old key again", admin.api(t, "POST", "/me/api-keys/"+created.data()["id"].(string)+"/rotate", map[string]any{}), http.StatusConflict)

	// A page on another origin of the same site (localhost, another port: the cookie's
	// SameSite lets it through) posts with the cookie: refused before anything runs, the keys
	// unchanged.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<!doctype html><title>another site</title>"))
	}))
	t.Cleanup(evil.Close)
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
	before := len(e.call(t, http.MethodGet, "/me/api-keys?size=100", nil)["items"].([]any))
	other := &person{page: admin.page, origin: evilURL}
	admin.page.Goto(t, evilURL)
	var crossStatus int
	other.run(t, `try { const r = await fetch(args.url, {method: 'POST', credentials: 'include', headers: {'content-type': 'application/json'}, body: JSON.stringify({name: 'forged', role: 'ADMIN'})}); return r.status; } catch (e) { return -1; }`,
		map[string]any{"url": origin + "/v1/api/me/api-keys"}, &crossStatus)
	other.run(t, `await fetch(args.url, {method: 'POST', mode: 'no-cors', credentials: 'include', headers: {'content-type': 'text/plain'}, body: JSON.stringify({name: 'forged', role: 'ADMIN'})}); return 0;`,
		map[string]any{"url": origin + "/v1/api/me/api-keys"}, nil)
	if after := len(e.call(t, http.MethodGet, "/me/api-keys?size=100", nil)["items"].([]any)); after != before {
		t.Fatalf("a page on another origin created a key with the console's cookie (%d keys, were %d; status %d)", after, before, crossStatus)
	}
	admin.page.Goto(t, origin+"/healthz")

	// A MEMBER, invited from the console, in a browser of their own.
	inv := admin.api(t, "POST", "/me/invitations", map[string]any{"email": "member@example.com", "role": "MEMBER"})
	want(t, "invite a member", inv, http.StatusOK)
	memberToken := inv.data()["link"].(string)
	memberToken = memberToken[strings.Index(memberToken, "#")+1:]
	member := e.newPerson(t, origin)
	want(t, "member accepts", member.accept(t, memberToken, "<img src=x onerror=alert(1)>"), http.StatusOK)
	want(t, "member reads the ledger", member.api(t, "GET", "/me/ledger", nil), http.StatusOK)
	want(t, "member lists members", member.api(t, "GET", "/me/members", nil), http.StatusOK)
	memberKeys := member.api(t, "GET", "/console/passkeys", nil)
	want(t, "member lists their passkeys", memberKeys, http.StatusOK)
	memberPasskey := memberKeys.data()["items"].([]any)[0].(map[string]any)["id"].(string)
	want(t, "member reads the low-balance threshold", member.api(t, "GET", "/me/low-balance-threshold", nil), http.StatusOK)
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/me/api-keys", map[string]any{"name": "x", "role": "ADMIN"}},
		{"GET", "/me/api-keys", nil},
		{"POST", "/me/invitations", map[string]any{"email": "x@example.com", "role": "ADMIN"}},
		{"GET", "/me/invitations", nil},
		{"GET", "/me/audit-log", nil},
		{"PUT", "/me/web-origins", map[string]any{"origins": []string{"https://evil.example"}}},
		{"DELETE", "/me/members/" + acc.data()["person"].(map[string]any)["id"].(string), nil},
		{"POST", "/me/api-keys/" + newKey["id"].(string) + "/rotate", map[string]any{"oldKeyGraceSeconds": 0}},
		{"PUT", "/me/low-balance-threshold", map[string]any{"threshold": 5}},
	} {
		want(t, "a MEMBER's "+c.method+" "+c.path, member.api(t, c.method, c.path, c.body), http.StatusForbidden)
	}

	t.Run("accepting an invitation while signed in", func(t *testing.T) { e.testInvitationWhileSignedIn(t, admin, origin) })

	// The audit log names who did what.
	audit := admin.api(t, "GET", "/me/audit-log", nil)
	want(t, "audit log", audit, http.StatusOK)
	var actions []string
	for _, it := range audit.data()["items"].([]any) {
		actions = append(actions, it.(map[string]any)["action"].(string))
	}
	if j := strings.Join(actions, ","); !strings.Contains(j, "CreateApiKey") || !strings.Contains(j, "InviteMember") || !strings.Contains(j, "AcceptInvitation") {
		t.Fatalf("audit actions %v", actions)
	}

	// A removed member's session ends at once.
	members := admin.api(t, "GET", "/me/members", nil)
	var memberID string
	for _, it := range members.data()["items"].([]any) {
		if p := it.(map[string]any)["person"].(map[string]any); p["email"] == "member@example.com" {
			memberID = p["id"].(string)
		}
	}
	want(t, "remove the member", admin.api(t, "DELETE", "/me/members/"+memberID, nil), http.StatusOK)
	want(t, "the removed member's session", member.api(t, "GET", "/console/session", nil), http.StatusUnauthorized)

	// The same person invited to a second client (by the operator, with mnvctl) proves their
	// own passkey instead of creating one, and has a session there.
	second := e.otherClient(t)
	link2 := e.mnvctl(t, "user", "invite", "--client", second.ClientID, "--email", "dev@example.com", "--role", "ADMIN", "-o", "json")["link"].(string)
	firstCookie := admin.cookie(t)
	var joined answer
	admin.run(t, fetchJS+`
const open = await api('POST', '/console/invitations/open', {token: args.token});
if (open.status !== 200 || !open.body.data.existingPerson) return open;
const o = JSON.parse(open.body.data.optionsJson);
const cred = await navigator.credentials.get({publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(o.publicKey)});
return await api('POST', '/console/invitations/accept', {token: args.token, ceremonyId: open.body.data.ceremonyId, credentialJson: JSON.stringify(cred.toJSON())});`,
		map[string]any{"token": link2[strings.Index(link2, "#")+1:]}, &joined)
	want(t, "join a second client with one's passkey", joined, http.StatusOK)
	// The session of the first client ended with the join: one identity per browser.
	if status := sessionWith(t, origin, firstCookie); status != http.StatusUnauthorized {
		t.Fatalf("the session before the join answered %d, want 401", status)
	}
	if joined.data()["membership"].(map[string]any)["clientId"] != second.ClientID {
		t.Fatalf("joined: %v", joined.data())
	}
	// A session of the second client: the first client's key is not found.
	want(t, "another client's key", admin.api(t, "DELETE", "/me/api-keys/"+created.data()["id"].(string), nil), http.StatusNotFound)
	// Back to the first client: a switch is no passkey check, so what can hurt needs a step-up.
	want(t, "switch", admin.api(t, "POST", "/console/session/switch", map[string]any{"clientId": e.client.ClientID}), http.StatusOK)
	notYet := admin.api(t, "POST", "/me/api-keys", map[string]any{"name": "after a switch", "role": "MEMBER"})
	want(t, "create a key without a step-up", notYet, http.StatusForbidden)
	if code := notYet.Body["messages"].([]any)[0].(map[string]any)["code"]; code != "STEP_UP_REQUIRED" {
		t.Fatalf("refused with %v", code)
	}
	rotateNotYet := admin.api(t, "POST", "/me/api-keys/"+newKey["id"].(string)+"/rotate", map[string]any{"oldKeyGraceSeconds": 0})
	want(t, "rotate a key without a step-up", rotateNotYet, http.StatusForbidden)
	if code := rotateNotYet.Body["messages"].([]any)[0].(map[string]any)["code"]; code != "STEP_UP_REQUIRED" {
		t.Fatalf("the rotation was refused with %v", code)
	}
	// Neither refusal rotated the key: it still works.
	if status, _ := e.callAs(t, creds{ClientID: e.client.ClientID, APIKey: newKey["apiKey"].(string)}, http.MethodGet, "/me/ledger", nil); status != http.StatusOK {
		t.Fatalf("the key answered %d after refused rotations", status)
	}
	var stepped answer
	admin.run(t, fetchJS+`
const start = await api('POST', '/console/step-up/options', {});
const o = JSON.parse(start.body.data.optionsJson);
const cred = await navigator.credentials.get({publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(o.publicKey)});
return await api('POST', '/console/step-up', {ceremonyId: start.body.data.ceremonyId, credentialJson: JSON.stringify(cred.toJSON())});`, nil, &stepped)
	want(t, "step up", stepped, http.StatusOK)
	want(t, "create a key after a step-up", admin.api(t, "POST", "/me/api-keys", map[string]any{"name": "after a step-up", "role": "MEMBER"}), http.StatusOK)

	// A reveal by a person: behind the step-up, with the reason, audited with the person.
	sessions := admin.api(t, "GET", "/me/stuck-plus/sessions", nil)
	want(t, "stuck-plus sessions", sessions, http.StatusOK)
	if items, _ := sessions.data()["items"].([]any); len(items) > 0 {
		id := items[0].(map[string]any)["id"].(string)
		want(t, "a reveal with a short reason", admin.api(t, "POST", "/me/stuck-plus/sessions/"+id+"/reveal", map[string]any{"reason": "short"}), http.StatusBadRequest)
		revealed := admin.api(t, "POST", "/me/stuck-plus/sessions/"+id+"/reveal", map[string]any{"reason": "the customer asked to confirm their number"})
		want(t, "reveal", revealed, http.StatusOK)
		reveals := admin.api(t, "GET", "/me/stuck-plus/reveals", nil)
		want(t, "reveals", reveals, http.StatusOK)
		last := reveals.data()["items"].([]any)[0].(map[string]any)
		if last["userId"] != acc.data()["person"].(map[string]any)["id"] || last["keyId"] != "" {
			t.Fatalf("the reveal's audit names %v", last)
		}
	} else {
		t.Fatal("no STUCK_PLUS session to reveal: the STUCK_PLUS subtest runs before this one")
	}

	// The gateway's own routes (not grpc-gateway's JSON) take the session too: the sample CSV,
	// uploaded back as a file from the page, becomes an import job.
	var upload answer
	admin.run(t, fetchJS+`
const sample = await fetch('/v1/api/me/connect/import/sample.csv');
if (sample.status !== 200) return {status: sample.status, body: null};
const form = new FormData();
form.append('file', new Blob([await sample.text()], {type: 'text/csv'}), 'sample.csv');
const r = await fetch('/v1/api/me/connect/import', {method: 'POST', body: form});
return {status: r.status, body: await r.json()};`, nil, &upload)
	if upload.Status != http.StatusAccepted && upload.Status != http.StatusOK {
		t.Fatalf("the sample CSV uploaded with the session: %d %v", upload.Status, upload.Body)
	}

	t.Run("every page against the suite", func(t *testing.T) { e.consolePages(t, admin) })
	t.Run("the keyboard alone", func(t *testing.T) { e.keyboardWalk(t, admin) })

	t.Run("the low-balance threshold set on the settings page", func(t *testing.T) { e.lowBalanceSettings(t, admin) })
	t.Run("the cost shown before an enrichment and a reveal", func(t *testing.T) { e.costInDialogs(t, admin) })
	t.Run("the history's filters", func(t *testing.T) { e.verificationFilters(t, admin) })

	t.Run("single sign-on", func(t *testing.T) {
		e.testSSO(t, admin, origin, acc.data()["person"].(map[string]any)["id"].(string))
	})

	// Sign out, then in again with the passkey.
	want(t, "sign out", admin.api(t, "POST", "/console/session/sign-out", map[string]any{}), http.StatusOK)
	want(t, "after sign-out", admin.api(t, "GET", "/console/session", nil), http.StatusUnauthorized)
	want(t, "sign in", admin.signIn(t), http.StatusOK)
	want(t, "signed in again", admin.api(t, "GET", "/console/session", nil), http.StatusOK)
	// Its sessions: this one alone (each sign-in, join and switch ended the one before).
	mine := admin.api(t, "GET", "/console/sessions", nil)
	want(t, "sessions", mine, http.StatusOK)
	if n := len(mine.data()["items"].([]any)); n != 1 {
		t.Fatalf("%d sessions listed, want this one", n)
	}
	want(t, "sign out everywhere", admin.api(t, "POST", "/console/sessions/sign-out-all", map[string]any{}), http.StatusOK)
	want(t, "after signing out everywhere", admin.api(t, "GET", "/me/ledger", nil), http.StatusUnauthorized)

	t.Run("your passkeys", func(t *testing.T) {
		want(t, "sign in", admin.signIn(t), http.StatusOK)
		e.testPasskeys(t, admin, memberPasskey)
	})

	t.Run("sign-out everywhere ends another browser's session", func(t *testing.T) {
		e.testSignOutEverywhere(t, admin, origin)
	})
}

// testSignOutEverywhere: the person of admin (signed in) gets a passkey on a second browser
// (a recovery invitation from the operator: a phone), signed in there too; signing out
// everywhere on the console's Sessions page ends both, and the second browser's console goes to
// sign-in.
func (e *env) testSignOutEverywhere(t *testing.T, admin *person, origin string) {
	link := e.mnvctl(t, "user", "invite", "--client", e.client.ClientID, "--email", "dev@example.com", "--role", "ADMIN", "-o", "json")["link"].(string)
	phone := e.newPerson(t, origin)
	want(t, "accept a recovery on a second browser", phone.accept(t, link[strings.Index(link, "#")+1:], ""), http.StatusOK)
	mine := admin.api(t, "GET", "/console/sessions", nil)
	want(t, "sessions", mine, http.StatusOK)
	if n := len(mine.data()["items"].([]any)); n != 2 {
		t.Fatalf("%d sessions listed, want this browser's and the second's", n)
	}
	want(t, "the second browser signed in", phone.api(t, "GET", "/console/session", nil), http.StatusOK)
	admin.page.Goto(t, origin+"/console/sessions")
	admin.page.WaitVisible(t, `main h1`)
	admin.page.Click(t, `xpath=//main//button[normalize-space()="Sign out everywhere"]`)
	admin.page.Click(t, `xpath=//dialog[@open]//button[normalize-space()="Sign out everywhere"]`)
	if err := admin.page.WaitVisibleErr(`#sign-in-title`); err != nil {
		t.Fatalf("sign out everywhere on the page: %v", err)
	}
	want(t, "this browser after signing out everywhere", admin.api(t, "GET", "/console/session", nil), http.StatusUnauthorized)
	want(t, "the second browser after signing out everywhere", phone.api(t, "GET", "/me/ledger", nil), http.StatusUnauthorized)
	phone.page.Goto(t, origin+"/console/")
	if err := phone.page.WaitVisibleErr(`#sign-in-title`); err != nil {
		t.Fatalf("the second browser's console did not go to sign-in: %v", err)
	}
}

// mnvctl runs mnvctl against make run and decodes its JSON answer.
func (e *env) mnvctl(t *testing.T, args ...string) map[string]any {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "bin", "mnvctl"), args...)
	cmd.Env = []string{"MNV_STATE_DIR=" + e.state}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mnvctl %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("mnvctl answered %s (%v)", out, err)
	}
	return v
}
