package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mnvhq/mnv/tests/harness"
)

// TestSSOStepUp: a person of single sign-on (the session's singleSignOn) whose action is
// answered 403 STEP_UP_REQUIRED is offered their organisation's provider, not a passkey: the
// dialog starts the step-up with the page to come back to and sends the browser to the
// authorization URL. Here that URL stands for the provider sending the browser back refused,
// which the page says. The flow's checks themselves are tests/gateway's TestSSOStepUp.
func TestSSOStepUp(t *testing.T) {
	if testing.Short() {
		t.Skip("console: needs Chromium and the gateway binary; skipped under -short")
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	gateway := startGateway(t, root)
	browser := startChromium(t, root)
	ctx, cancel := chromedp.NewContext(browser)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	answers := fakeAnswers(time.Now())
	session := answers["GET /v1/api/console/session"].(map[string]any)
	session["singleSignOn"] = true
	answers["POST /v1/api/console/step-up/sso"] = map[string]any{"authorizationUrl": gateway + "/console/keys?step-up=failed"}
	api := newFakeAPI(answers)
	api.hook = func(key string, _ int, _ string) (int64, any, bool) {
		if key == "POST /v1/api/me/api-keys" {
			return 403, apiError{"STEP_UP_REQUIRED", "confirm it is you"}, true
		}
		return 0, nil, false
	}
	api.listen(ctx)

	var offer, alert, path string
	err = chromedp.Run(ctx, api.enable(),
		chromedp.Navigate(gateway+"/console/keys"),
		chromedp.WaitVisible(`main h1`, chromedp.ByQuery),
		chromedp.SendKeys(`form.inline-form input`, "CI", chromedp.ByQuery),
		chromedp.Click(`form.inline-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`dialog[open]`, chromedp.ByQuery),
		chromedp.Text(`dialog[open] .button-primary`, &offer, chromedp.ByQuery),
		chromedp.Click(`dialog[open] .button-primary`, chromedp.ByQuery),
	)
	if err == nil {
		// The page has been left: a new document, waited for anew.
		err = chromedp.Run(ctx, chromedp.WaitVisible(`main .state-error[role=alert]`, chromedp.ByQuery),
			chromedp.Text(`main .state-error[role=alert]`, &alert, chromedp.ByQuery),
			chromedp.Evaluate(`location.pathname+location.search`, &path),
		)
	}
	if err != nil {
		var text string
		_ = chromedp.Run(ctx, chromedp.Text(`body`, &text, chromedp.ByQuery))
		t.Fatalf("%v\n%s", err, text)
	}
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
