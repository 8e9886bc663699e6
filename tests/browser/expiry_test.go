package browser_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// consoleIdle is the idle timeout of TestBrowserConsoleSessionExpiry's make run: short enough to
// wait out, long enough that a loaded machine's page still loads within it.
const consoleIdle = 3 * time.Second

// TestBrowserConsoleSessionExpiry runs make run with a console session idle timeout of seconds:
// a person signed in whose browser keeps calling stays signed in past it; once left idle past
// it, the console sends them back to sign-in at their next click, and the API answers 401.
func TestBrowserConsoleSessionExpiry(t *testing.T) {
	e := setUpWith(t, map[string]string{"MNV_CONSOLE_SESSION_IDLE": consoleIdle.String()})
	origin, token := e.consoleInvitation(t)
	p := e.newPerson(t, origin)
	want(t, "accept", p.accept(t, token, "Idle Person"), http.StatusOK)
	p.page.Goto(t, origin+"/console/")
	p.page.WaitVisible(t, `main h1`)
	p.page.Poll(t, `document.querySelectorAll('.state-loading').length === 0`, nil, 15*time.Second)
	// In use, the session outlives its idle timeout: each request moves it.
	for begun := time.Now(); time.Since(begun) < 2*consoleIdle; time.Sleep(consoleIdle / 3) {
		want(t, "a session in use", p.api(t, "GET", "/console/session", nil), http.StatusOK)
	}

	time.Sleep(consoleIdle + 2*time.Second)
	var path string
	p.page.Click(t, `xpath=//nav//a[normalize-space()="Ledger"]`)
	if err := p.page.WaitVisibleErr(`#sign-in-title`); err != nil {
		text, _ := p.page.TextErr(`body`)
		t.Fatalf("after the idle timeout the console did not go to sign-in: %v\n%s", err, text)
	}
	p.page.Eval(t, `location.pathname + location.search`, &path)
	if !strings.HasPrefix(path, "/console/sign-in?next=") || !strings.Contains(path, "ledger") {
		t.Fatalf("sent to %s, want the sign-in page that returns to the ledger", path)
	}
	want(t, "the session after its idle timeout", p.api(t, "GET", "/console/session", nil), http.StatusUnauthorized)
	want(t, "the API after the idle timeout", p.api(t, "GET", "/me/ledger", nil), http.StatusUnauthorized)
	// Signing in again is the way back.
	want(t, "sign in again", p.signIn(t), http.StatusOK)
	want(t, "signed in again", p.api(t, "GET", "/me/ledger", nil), http.StatusOK)
}
