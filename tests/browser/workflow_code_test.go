package browser_test

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mnvhq/mnv/tests/harness"
)

// testWiFiCode: the demo on "Wi-Fi" captures without the operator's number, the workflow's
// silent step is UNDETERMINED and it sends a code by SMS; the SDK's code field appears on the
// page, a wrong code is read out with the attempts left, the code from the SMS verifies, and
// the demo's backend (reading the workflow with its key) shows VERIFIED, decided by SMS_OTP.
func (e *env) testWiFiCode(t *testing.T) {
	tab := e.tab(t)
	tab.Goto(t, e.demo)
	tab.WaitVisible(t, `body[data-state="ready"]`)
	tab.Click(t, "#connection-wifi")
	if !disabled(t, tab, "#sandbox-number") {
		t.Error("on Wi-Fi the sandbox's number field stays enabled: no proxy adds a number there")
	}
	tab.Fill(t, "#number", sandboxNumber)
	tab.Click(t, "#verify")
	const field = `#code-section form.mnv-code input[autocomplete="one-time-code"]`
	if err := tab.WaitVisibleErr(field); err != nil {
		t.Fatalf("no code field (state %q, result %q, error %q): %v", tab.Attribute(t, "body", "data-state"),
			tab.TextContent(t, "#result"), tab.TextContent(t, "#error"), err)
	}
	if got := tab.Attribute(t, field, "inputmode"); got != "numeric" {
		t.Errorf("inputmode %q", got)
	}
	id := tab.Attribute(t, field, "id")
	if label := tab.Text(t, `label[for="`+id+`"]`); strings.TrimSpace(label) == "" {
		t.Error("the code field has no label")
	}
	if !disabled(t, tab, ".mnv-code-resend") || !strings.Contains(tab.Text(t, ".mnv-code-resend"), " s") {
		t.Errorf("the resend button during its cooldown: %q, want disabled with the time left", tab.Text(t, ".mnv-code-resend"))
	}
	code := e.smsCode(t, sandboxNumber)
	screenshotAs(t, tab, "browser-demo-wifi.png")

	// A wrong code: read out at once (role=alert), the field marked invalid.
	tab.Fill(t, field, wrongCode(code))
	tab.Click(t, ".mnv-code-submit")
	var said string
	tab.Poll(t, `(() => { const m = document.querySelector('.mnv-code-message[role="alert"]'); return m && m.textContent.includes('attempts left') ? m.textContent : null })()`, &said, 10*time.Second)
	if !strings.Contains(said, "4 attempts left") || tab.Attribute(t, field, "aria-invalid") != "true" {
		t.Errorf("after a wrong code: %q, aria-invalid %q", said, tab.Attribute(t, field, "aria-invalid"))
	}

	tab.Fill(t, field, code)
	tab.Click(t, ".mnv-code-submit")
	if err := tab.WaitVisibleErr(`body[data-state="done"]`); err != nil {
		t.Fatalf("the demo page (state %q): %v", tab.Attribute(t, "body", "data-state"), err)
	}
	result, errText := strings.TrimSpace(tab.Text(t, "#result")), strings.TrimSpace(tab.TextContent(t, "#error"))
	details := tab.Text(t, "#details")
	if result != "VERIFIED" || errText != "" || !strings.Contains(details, `"decidedBy": "SMS_OTP"`) || !strings.Contains(details, `"SILENT:UNDETERMINED"`) {
		t.Fatalf("result %q, error %q, details %s; want VERIFIED decided by SMS_OTP after an undetermined silent step", result, errText, details)
	}
	if strings.Contains(details, code) || strings.Contains(details, sandboxNumber) || strings.Contains(details, e.client.APIKey) {
		t.Errorf("the page shows the code, the number or the key: %s", details)
	}
	if got := tab.Text(t, ".mnv-code-message"); !strings.Contains(got, "verified") {
		t.Errorf("the code field's last word %q", got)
	}
	screenshotAs(t, tab, "browser-demo-wifi-verified.png")
}

// testWiFiResend: on the page, a new code replaces the first (the demo client's policy set to
// no cooldown for the test, and put back after): the first stops matching, the new one
// verifies; the attempts are the workflow's across both codes.
func (e *env) testWiFiResend(t *testing.T) {
	e.call(t, http.MethodPut, "/me/workflow-policy", map[string]any{"resendCooldownSeconds": 0})
	t.Cleanup(func() { e.call(t, http.MethodPut, "/me/workflow-policy", map[string]any{}) })
	tab := e.tab(t)
	tab.Goto(t, e.demo)
	tab.WaitVisible(t, `body[data-state="ready"]`)
	tab.Click(t, "#connection-wifi")
	tab.Fill(t, "#number", sandboxNumber)
	tab.Click(t, "#verify")
	const field = `#code-section form.mnv-code input[autocomplete="one-time-code"]`
	tab.WaitVisible(t, field)
	first := e.smsCode(t, sandboxNumber)
	// The sandbox keeps a message when it takes the submit, a moment before the step is recorded
	// SENT; a resend in between is answered 429 (the code is still being sent), as a person's
	// would be. A person reads the SMS first; the test waits for the record.
	e.waitSMSSent(t)
	tab.Poll(t, `!document.querySelector('.mnv-code-resend').disabled`, nil, 10*time.Second)
	tab.Click(t, ".mnv-code-resend")
	tab.Poll(t, `document.querySelector('.mnv-code-message').textContent.includes('on its way')`, nil, 10*time.Second)
	second := e.smsCode(t, sandboxNumber)
	if first != second {
		tab.Fill(t, field, first)
		tab.Click(t, ".mnv-code-submit")
		tab.Poll(t, `document.querySelector('.mnv-code-message[role="alert"]')?.textContent.includes('4 attempts left')`, nil, 10*time.Second)
	}
	tab.Fill(t, field, second)
	tab.Click(t, ".mnv-code-submit")
	if err := tab.WaitVisibleErr(`body[data-state="done"]`); err != nil {
		t.Fatalf("the demo page (state %q): %v", tab.Attribute(t, "body", "data-state"), err)
	}
	// Two SMS steps, the second verified (the first superseded, or sent where an SMSC is wired).
	details := tab.Text(t, "#details")
	if result := strings.TrimSpace(tab.Text(t, "#result")); result != "VERIFIED" || strings.Count(details, `"SMS_OTP:`) != 2 || !strings.Contains(details, `"SMS_OTP:VERIFIED"`) {
		t.Fatalf("result %q, details %s; want VERIFIED by the second SMS step", result, details)
	}
}

// smsCode reads the code of the demo client's newest SMS not read before, as the client reads
// it: make run's sandbox SMS centre keeps what it was sent, and GET /me/sandbox/sms lists the
// client's own (the number masked). It waits for the message to arrive.
func (e *env) smsCode(t *testing.T, number string) string {
	t.Helper()
	digits := regexp.MustCompile(`\b[0-9]{4,10}\b`)
	deadline := time.Now().Add(20 * time.Second)
	for {
		items, _ := e.call(t, http.MethodGet, "/me/sandbox/sms", nil)["items"].([]any)
		if len(items) > 0 {
			m := items[0].(map[string]any)
			step, _ := m["stepId"].(string)
			masked, _ := m["mobileNumber"].(string)
			if !smsRead[step] {
				if strings.Contains(masked, number[4:]) {
					t.Errorf("the sandbox shows the whole number: %q", masked)
				}
				code := digits.FindString(m["text"].(string))
				if code == "" {
					t.Fatalf("no code in the sandbox's message %q", m["text"])
				}
				smsRead[step] = true
				return code
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new SMS in the sandbox for the demo client (%d listed)", len(items))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitSMSSent waits until the newest workflow's SMS steps have all left QUEUED (the SMS
// centre's answer recorded).
func (e *env) waitSMSSent(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		items, _ := e.call(t, http.MethodGet, "/workflows?size=1", nil)["items"].([]any)
		queued, sms := false, false
		if len(items) > 0 {
			steps, _ := items[0].(map[string]any)["steps"].([]any)
			for _, s := range steps {
				st, _ := s.(map[string]any)
				if st["channel"] == "SMS_OTP" {
					sms = true
					queued = queued || st["status"] == "QUEUED"
				}
			}
		}
		if sms && !queued {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the newest workflow's SMS step is still QUEUED (or none): %v", items)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// smsRead holds the steps whose SMS a test has read (the subtests run one after another).
var smsRead = map[string]bool{}

// disabled tells whether the element selector names is disabled.
func disabled(t *testing.T, tab *harness.Page, selector string) bool {
	t.Helper()
	var d bool
	tab.Eval(t, `document.querySelector(`+strconv.Quote(selector)+`).disabled`, &d)
	return d
}

// wrongCode is a code of the same length that is not code.
func wrongCode(code string) string {
	b := []byte(code)
	b[0] = '0' + (b[0]-'0'+1)%10
	return string(b)
}
