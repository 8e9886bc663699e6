package browser_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
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
		p.page.Goto(t, p.origin+"/console/settings")
		p.page.WaitVisible(t, `#low-balance-title`)
		p.page.Poll(t, `document.querySelectorAll('.state-loading').length === 0`, nil, 15*time.Second)
		if own != e.ownThreshold(t, p) {
			p.page.Click(t, radio)
		}
		if own {
			sel := `section[aria-labelledby="low-balance-title"] input[type="number"]`
			p.page.WaitVisible(t, sel)
			p.page.Fill(t, sel, "")
			p.page.Type(t, sel, fmt.Sprint(value))
		}
		p.page.Click(t, `section[aria-labelledby="low-balance-title"] button[type="submit"]`)
		p.page.Poll(t, `(document.querySelector('section[aria-labelledby="low-balance-title"] [role="status"]')?.textContent ?? '').startsWith('Saved')`, nil, 10*time.Second)
		return p.page.Text(t, `section[aria-labelledby="low-balance-title"] [role="status"]`)
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
	p.page.Goto(t, p.origin+"/console/")
	if err := p.page.PollErr(`[...document.querySelectorAll('main .warning')].some(w => w.textContent.includes('low-balance threshold of'))`, nil, 15*time.Second); err != nil {
		t.Fatalf("the overview's warning below the threshold: %v", err)
	}
	p.page.Eval(t, `[...document.querySelectorAll('main .warning')].map(w => w.textContent).join(' | ')`, &warning)
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
		var shown int
		p.page.Goto(t, p.origin+"/console/"+d.page)
		p.page.Poll(t, fmt.Sprintf(`!!document.querySelector('main') && document.querySelectorAll('.state-loading').length === 0 && [...document.querySelectorAll('main table button')].some(b => b.textContent.startsWith(%q) && !b.disabled)`, d.button),
			nil, 15*time.Second)
		p.page.Eval(t, fmt.Sprintf(`[...document.querySelectorAll('main table button')].find(b => b.textContent.startsWith(%q) && !b.disabled).click()`, d.button), nil)
		if err := p.page.PollErr(`!!document.querySelector('dialog[open] .cost[data-credits]')`, nil, 10*time.Second); err != nil {
			t.Fatalf("%s: the confirm dialog's cost: %v", d.page, err)
		}
		p.page.Eval(t, `Number(document.querySelector('dialog[open] .cost').dataset.credits)`, &shown)
		text := p.page.Text(t, `dialog[open]`)
		if shown != d.credits || !strings.Contains(text, fmt.Sprintf("%d credits", d.credits)) {
			t.Errorf("%s dialog: %q (cost %d), want it to say %d credits", d.page, text, shown, d.credits)
		}
		keepScreenshot(t, p, d.page+"-cost-dialog")
		// Cancel: nothing confirmed, nothing charged.
		p.page.Eval(t, `[...document.querySelectorAll('dialog[open] button')].find(b => b.textContent.trim() === 'Cancel').click()`, nil)
	}
}

// verificationFilters: the history page's filters against the suite. The demo client's backend
// makes a verification that matches and one that does not (the sandbox operator), then the
// person picks a reason on the page: the rows shown are the ones the API lists for that reason,
// each of that reason, and another operator's id shows none.
func (e *env) verificationFilters(t *testing.T, p *person) {
	for _, n := range []struct{ network, typed string }{{"+971501234581", "+971501234581"}, {"+971501234582", "+971501234589"}} {
		e.sandboxVerify(t, n.network, n.typed)
	}
	_, listed := e.callAs(t, e.client, http.MethodGet, "/verifications?reason=NUMBER_MISMATCH&size=100", nil)
	want := int(listed["totalItems"].(float64))
	if want == 0 {
		t.Fatalf("the API lists no NUMBER_MISMATCH verification: %v", listed)
	}
	pick := func(label, value string) {
		t.Helper()
		p.page.Eval(t, fmt.Sprintf(`(() => { const l = [...document.querySelectorAll('form.filters label')].find(l => l.textContent === %q);
  const s = document.getElementById(l.htmlFor); s.value = %q; s.dispatchEvent(new Event('change', {bubbles: true})); })()`, label, value), nil)
	}
	rows := `[...document.querySelectorAll('main table tbody tr')].map(r => r.children[3].textContent)`
	var reasons []string
	p.page.Goto(t, p.origin+"/console/verifications")
	p.page.Poll(t, `document.querySelectorAll('main table tbody tr').length > 0`, nil, 15*time.Second)
	pick("Reason", "NUMBER_MISMATCH")
	if err := p.page.PollErr(fmt.Sprintf(`(() => { const r = %s; return r.length === %d && r.every(x => x === 'Number mismatch'); })()`, rows, min(want, 25)), nil, 10*time.Second); err != nil {
		t.Fatalf("the history filtered by reason (the API lists %d): %v", want, err)
	}
	p.page.Eval(t, rows, &reasons)
	keepScreenshot(t, p, "verifications-by-reason")
	var empty bool
	pick("Operator", "sandbox")
	p.page.Poll(t, fmt.Sprintf(`%s.length === %d`, rows, min(want, 25)), nil, 10*time.Second)
	pick("Method", "NETWORK_API")
	err := p.page.PollErr(`!!document.querySelector('main .state-empty')`, nil, 10*time.Second)
	if err == nil {
		err = p.page.EvalErr(`!!document.querySelector('main .state-empty')`, &empty)
	}
	if err != nil || !empty {
		t.Fatalf("sandbox's NUMBER_MISMATCH by NETWORK_API (none were): %v, empty state %v", err, empty)
	}
}

// sandboxVerify is the demo client's backend verifying typed against a sandbox capture of
// network (an SDK session with the sandbox's number header).
func (e *env) sandboxVerify(t *testing.T, network, typed string) {
	t.Helper()
	_, tok := e.callAs(t, e.client, http.MethodPost, "/me/sdk-tokens", map[string]any{"label": "filters"})
	req, _ := http.NewRequest(http.MethodPost, e.api+"/sdk/session", strings.NewReader(`{"platform":"IOS"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-SDK-TOKEN", tok["sdkToken"].(string))
	req.Header.Set("X-CLIENT-ID", e.client.ClientID)
	req.Header.Set("X-Mnv-Sandbox-Msisdn", network)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var session struct {
		Data struct {
			EncryptedMobileNumber string `json:"encryptedMobileNumber"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&session); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("sandbox SDK session: %d %v", resp.StatusCode, err)
	}
	if status, v := e.callAs(t, e.client, http.MethodPost, "/verify", map[string]string{"mobileNumber": typed,
		"encryptedMobileNumber": session.Data.EncryptedMobileNumber, "operatorId": "sandbox", "serviceType": "HEADER_ENRICHMENT"}); status != http.StatusOK {
		t.Fatalf("verify: %d %v", status, v)
	}
}
