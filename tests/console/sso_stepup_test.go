package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mnvhq/mnv/tests/harness"
)

// TestSSOStepUp: a person of single sign-on (the session's singleSignOn) whose action is
// answered 403 STEP_UP_REQUIRED is offered their organisation's provider, not a passkey: the
// dialog starts the step-up with the page to come back to and sends the browser to the
// authorization URL. Here that URL stands for the provider sending the browser back refused,
// which the page says. The flow's checks themselves are tests/gateway's TestSSOStepUp.
func TestSSOStepUp(t *testing.T) {
	_, gateway, browser := setUp(t)

	answers := fakeAnswers(time.Now())
	session := answers["GET /v1/api/console/session"].(map[string]any)
	session["singleSignOn"] = true
	answers["POST /v1/api/console/step-up/sso"] = map[string]any{"authorizationUrl": gateway + "/console/keys?step-up=failed"}
	api := newFakeAPI(answers)
	api.hook = func(key string, _ int, _ string) (int, any, bool) {
		if key == "POST /v1/api/me/api-keys" {
			return 403, apiError{"STEP_UP_REQUIRED", "confirm it is you"}, true
		}
		return 0, nil, false
	}
	tab := api.tab(t, browser, harness.ContextOptions{Width: 1200, Height: 800})

	tab.Goto(t, gateway+"/console/keys")
	tab.WaitVisible(t, `main h1`)
	tab.Type(t, `form.inline-form input`, "CI")
	tab.Click(t, `form.inline-form button[type=submit]`)
	tab.WaitVisible(t, `dialog[open]`)
	offer := tab.Text(t, `dialog[open] .button-primary`)
	tab.Click(t, `dialog[open] .button-primary`)
	// The page has been left: a new document, waited for anew.
	if err := tab.WaitVisibleErr(`main .state-error[role=alert]`); err != nil {
		text, _ := tab.TextErr(`body`)
		t.Fatalf("%v\n%s", err, text)
	}
	alert := tab.Text(t, `main .state-error[role=alert]`)
	var path string
	tab.Eval(t, `location.pathname+location.search`, &path)
	if !strings.Contains(offer, "organisation") {
		t.Errorf("the step-up dialog offers %q", offer)
	}
	if r := api.requests("POST /v1/api/console/step-up/sso"); len(r) != 1 || !strings.Contains(r[0].body, `"returnTo":"/console/keys"`) {
		t.Errorf("step-up at the provider: %+v", r)
	}
	if r := api.requests("POST /v1/api/console/step-up/options"); len(r) != 0 {
		t.Errorf("a person of single sign-on was asked for a passkey: %+v", r)
	}
	if path != "/console/keys?step-up=failed" || !strings.Contains(alert, "did not complete") {
		t.Errorf("back at %s, the page says %q", path, alert)
	}
	api.checkAnswered(t)
}
