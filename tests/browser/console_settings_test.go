package browser_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// lowBalanceSettings: an ADMIN sets the client's own low-balance threshold on the settings page
// (the form, not a fetch), the API reads it back, the overview warns once the balance is below
// it, and choosing the service's default clears it.
func (e *env) lowBalanceSettings(t *testing.T, p *person) {
	balance := p.api(t, "GET", "/clients", nil)
	want(t, "the client", balance, http.StatusOK)
	above := int64(balance.data()["balance"].(float64)) + 1000
	save := func(own bool, value int64) string {
		t.Helper()
		radio := `input[name="low-balance-own"]:not(:checked)`
		var status string
		actions := []chromedp.Action{
			chromedp.Navigate(p.origin + "/console/settings"),
			chromedp.WaitVisible(`#low-balance-title`, chromedp.ByQuery),
			chromedp.Poll(`document.querySelectorAll('.state-loading').length === 0`, nil, chromedp.WithPollingTimeout(15*time.Second)),
		}
		if own != e.ownThreshold(t, p) {
			actions = append(actions, chromedp.Click(radio, chromedp.ByQuery))
		}
		if own {
			sel := `section[aria-labelledby="low-balance-title"] input[type="number"]`
			actions = append(actions, chromedp.WaitVisible(sel, chromedp.ByQuery), chromedp.SetValue(sel, "", chromedp.ByQuery),
				chromedp.SendKeys(sel, fmt.Sprint(value), chromedp.ByQuery))
		}
		actions = append(actions,
			chromedp.Click(`section[aria-labelledby="low-balance-title"] button[type="submit"]`, chromedp.ByQuery),
			chromedp.Poll(`(document.querySelector('section[aria-labelledby="low-balance-title"] [role="status"]')?.textContent ?? '').startsWith('Saved')`, nil, chromedp.WithPollingTimeout(10*time.Second)),
			chromedp.Text(`section[aria-labelledby="low-balance-title"] [role="status"]`, &status, chromedp.ByQuery),
		)
		if err := chromedp.Run(p.ctx, actions...); err != nil {
			t.Fatal(err)
		}
		return status
	}

	if got := plain(save(true, above)); !strings.Contains(got, fmt.Sprint(above)) {
		t.Fatalf("saved %q, want it to name %d", got, above)
	}
	read := p.api(t, "GET", "/me/low-balance-threshold", nil)
	want(t, "read the threshold", read, http.StatusOK)
	if read.data()["threshold"] != float64(above) || read.data()["effectiveThreshold"] != float64(above) {
		t.Fatalf("after the settings page: %v, want %d", read.data(), above)
	}
	var warning string
	err := chromedp.Run(p.ctx,
		chromedp.Navigate(p.origin+"/console/"),
		chromedp.Poll(`[...document.querySelectorAll('main .warning')].some(w => w.textContent.includes('low-balance threshold of'))`, nil, chromedp.WithPollingTimeout(15*time.Second)),
		chromedp.Evaluate(`[...document.querySelectorAll('main .warning')].map(w => w.textContent).join(' | ')`, &warning),
	)
	if err != nil {
		t.Fatalf("the overview's warning below the threshold: %v", err)
	}
	if !strings.Contains(plain(warning), fmt.Sprint(above)) {
		t.Errorf("overview warning %q does not name the threshold %d", warning, above)
	}
	keepScreenshot(t, p, "overview-below-threshold")

	save(false, 0)
	cleared := p.api(t, "GET", "/me/low-balance-threshold", nil)
	if cleared.data()["threshold"] != nil || cleared.data()["effectiveThreshold"] != cleared.data()["defaultThreshold"] {
		t.Fatalf("after choosing the default: %v", cleared.data())
	}
}

// ownThreshold tells whether the client has a threshold of its own (the radio the page shows
// checked).
func (e *env) ownThreshold(t *testing.T, p *person) bool {
	t.Helper()
	a := p.api(t, "GET", "/me/low-balance-threshold", nil)
	want(t, "read the threshold", a, http.StatusOK)
	return a.data()["threshold"] != nil
}

// plain is text with the digit groups' separators of the browser's locale taken out.
func plain(s string) string {
	return strings.NewReplacer(",", "", "\u00a0", "", "\u202f", "", "'", "").Replace(s)
}

// costInDialogs: the console says what a paid action costs in its confirm dialog, before the
// person confirms: an enrichment of a Connect profile and a reveal of a stuck-plus session, at
// the client's own prices (set by the operator for the test, so no default could pass for
// them). Both dialogs are cancelled: nothing is charged.
func (e *env) costInDialogs(t *testing.T, p *person) {
	const enrichment, reveal = 3, 7
	price := func(kind string, amount int) {
		t.Helper()
		args := []string{"client", "price", e.client.ClientID, "--kind", kind, "-o", "json"}
		if amount < 0 {
			args = append(args, "--clear")
		} else {
			args = append(args, "--amount", fmt.Sprint(amount))
		}
		e.mnvctl(t, args...)
	}
	price("CONNECT_ENRICHMENT", enrichment)
	price("STUCK_PLUS_REVEAL", reveal)
	t.Cleanup(func() {
		price("CONNECT_ENRICHMENT", -1)
		price("STUCK_PLUS_REVEAL", -1)
	})
	// The sample CSV uploaded before is imported by a worker: wait for a profile to enrich.
	deadline := time.Now().Add(20 * time.Second)
	for {
		a := p.api(t, "GET", "/me/connect/profiles", nil)
		want(t, "profiles", a, http.StatusOK)
		if items, _ := a.data()["items"].([]any); len(items) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no Connect profile to enrich: the sample CSV's import did not finish")
		}
		time.Sleep(300 * time.Millisecond)
	}

	for _, d := range []struct {
		page, button string
		credits      int
	}{
		{"connect", "Enrich", enrichment},
		{"reveal", "Reveal", reveal},
	} {
		var text string
		var shown int
		err := chromedp.Run(p.ctx,
			chromedp.Navigate(p.origin+"/console/"+d.page),
			chromedp.Poll(fmt.Sprintf(`!!document.querySelector('main') && document.querySelectorAll('.state-loading').length === 0 && [...document.querySelectorAll('main table button')].some(b => b.textContent.startsWith(%q) && !b.disabled)`, d.button),
				nil, chromedp.WithPollingTimeout(15*time.Second)),
			chromedp.Evaluate(fmt.Sprintf(`[...document.querySelectorAll('main table button')].find(b => b.textContent.startsWith(%q) && !b.disabled).click()`, d.button), nil),
			chromedp.Poll(`!!document.querySelector('dialog[open] .cost[data-credits]')`, nil, chromedp.WithPollingTimeout(10*time.Second)),
			chromedp.Evaluate(`Number(document.querySelector('dialog[open] .cost').dataset.credits)`, &shown),
			chromedp.Text(`dialog[open]`, &text, chromedp.ByQuery),
		)
		if err != nil {
			t.Fatalf("%s: the confirm dialog's cost: %v", d.page, err)
		}
		if shown != d.credits || !strings.Contains(text, fmt.Sprintf("%d credits", d.credits)) {
			t.Errorf("%s dialog: %q (cost %d), want it to say %d credits", d.page, text, shown, d.credits)
		}
		keepScreenshot(t, p, d.page+"-cost-dialog")
		// Cancel: nothing confirmed, nothing charged.
		if err := chromedp.Run(p.ctx, chromedp.Evaluate(`[...document.querySelectorAll('dialog[open] button')].find(b => b.textContent.trim() === 'Cancel').click()`, nil)); err != nil {
			t.Fatal(err)
		}
	}
}
