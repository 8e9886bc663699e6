package console_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mnvhq/mnv/tests/harness"
)

// markup is a client-supplied string that must render as text, never as an element.
const markup = `<img src=x onerror="document.title='owned'">`

// fakeAnswers are the data of the console's /v1/api calls, which fakeAPI answers in the browser
// (playwright's routes) in the envelope, so every page renders signed in without backends.
// fakeKey is the fake API's new key: the shape of one, made at run time so that no literal in
// the repository looks like a credential to a secret scanner.
var fakeKey = "mnv_" + strings.Repeat("0", 40)

func fakeAnswers(now time.Time) map[string]any {
	iso := func(d time.Duration) string { return now.Add(-d).UTC().Format("2006-01-02T15:04:05.000Z") }
	person := map[string]any{"id": "u1", "name": "Ada Admin", "email": "ada@example.com"}
	var ledger []any
	balance := 48210
	for i := 0; i < 40; i++ {
		kind, amount := "VERIFICATION", -(5 + i%3*5)
		if i%13 == 0 {
			kind, amount = "CONNECT_ENRICHMENT", -20
		}
		ledger = append(ledger, map[string]any{"id": fmt.Sprintf("l%d", i), "kind": kind, "amount": amount, "balanceAfter": balance,
			"reference": fmt.Sprintf("verification:%04d", i), "createdAt": iso(time.Duration(i) * 8 * time.Hour), "description": nil})
		balance -= amount
	}
	page := func(items ...any) map[string]any {
		return map[string]any{"items": items, "page": 0, "size": 20, "totalItems": len(items), "totalPages": 1}
	}
	// The usage routes' answers over the overview's 14 days.
	var spendDays, verifyDays []any
	for i := 13; i >= 0; i-- {
		d := now.Add(-time.Duration(i) * 24 * time.Hour).UTC().Format("2006-01-02")
		spendDays = append(spendDays, map[string]any{"day": d, "count": 3 + i%4, "charged": 15 + 5*(i%5), "credited": 0, "breakdowns": []any{}})
		verifyDays = append(verifyDays, map[string]any{"day": d, "count": 4 + i%3, "charged": 10 + 5*(i%3), "credited": 0, "breakdowns": []any{}})
	}
	status := map[string]any{"dimension": "status", "buckets": []any{
		map[string]any{"value": "NOT_VERIFIED", "count": 12, "charged": 60, "credited": 0},
		map[string]any{"value": "VERIFIED", "count": 58, "charged": 290, "credited": 0},
	}}
	from, to := spendDays[0].(map[string]any)["day"], spendDays[13].(map[string]any)["day"]
	return map[string]any{
		"GET /v1/api/console/session": map[string]any{
			"person": person, "membership": map[string]any{"clientId": "c1", "clientName": "Acme Shop", "role": "ADMIN"},
			"memberships": []any{map[string]any{"clientId": "c1", "clientName": "Acme Shop", "role": "ADMIN"}, map[string]any{"clientId": "c2", "clientName": "Acme Labs", "role": "MEMBER"}},
			"session":     map[string]any{"id": "s1", "clientId": "c1", "current": true}, "clientStatus": "ACTIVE",
		},
		"GET /v1/api/clients": map[string]any{"id": "c1", "clientName": "Acme Shop", "balance": 48210, "balanceValid": true,
			"balanceExpiryDate": iso(-40 * 24 * time.Hour), "daysUntilBalanceExpiry": 40, "clientStatus": "ACTIVE"},
		"GET /v1/api/me/ledger":                map[string]any{"items": ledger, "page": 0, "size": 100, "totalItems": 40, "totalPages": 1},
		"GET /v1/api/me/low-balance-threshold": map[string]any{"threshold": nil, "effectiveThreshold": 100, "defaultThreshold": 100},
		"GET /v1/api/me/sso":                   map[string]any{"redirectUri": "https://mnv.example/v1/api/console/sso/callback", "settings": nil},
		"GET /v1/api/me/prices": map[string]any{"items": []any{
			map[string]any{"kind": "CONNECT_ENRICHMENT", "variant": "", "amount": 2, "overridden": true},
			map[string]any{"kind": "STUCK_PLUS_REVEAL", "variant": "", "amount": 5, "overridden": false},
			map[string]any{"kind": "VERIFICATION", "variant": "", "amount": 1, "overridden": false},
		}},
		"GET /v1/api/me/usage/spend": map[string]any{"from": from, "to": to, "days": spendDays,
			"totals": map[string]any{"count": 60, "charged": 300, "credited": 0, "breakdowns": []any{}}},
		"GET /v1/api/me/usage/verifications": map[string]any{"from": from, "to": to, "days": verifyDays,
			"totals": map[string]any{"count": 70, "charged": 350, "credited": 0, "breakdowns": []any{status}}},
		"GET /v1/api/verifications": page(
			map[string]any{"verificationId": "v1", "createdAt": iso(time.Hour), "mobileNumber": "+97150*****67", "status": "VERIFIED", "reason": "MATCH", "operatorId": "du", "charged": 5, "serviceType": "HEADER_ENRICHMENT"},
			map[string]any{"verificationId": "v2", "createdAt": iso(2 * time.Hour), "mobileNumber": "+97155*****12", "status": "NOT_VERIFIED", "reason": "MISMATCH", "operatorId": "etisalat", "charged": 5, "serviceType": "HEADER_ENRICHMENT"},
			map[string]any{"verificationId": "v3", "createdAt": iso(3 * time.Hour), "mobileNumber": "+97150*****99", "status": "UNDETERMINED", "reason": "NO_NUMBER", "operatorId": "du", "charged": 0, "serviceType": "NETWORK_API"},
		),
		"GET /v1/api/workflows": page(fakeWorkflow(iso, "wf1", "VERIFIED", "SMS_OTP"), fakeWorkflow(iso, "wf2", "IN_PROGRESS", ""),
			fakeWorkflow(iso, "wf3", "VERIFIED", "SILENT")),
		"GET /v1/api/workflows/wf1": fakeWorkflow(iso, "wf1", "VERIFIED", "SMS_OTP"),
		"GET /v1/api/me/workflow-policy": map[string]any{
			"policy": map[string]any{"channels": []any{"SILENT", "SMS_OTP"}, "codeLength": 6, "codeTtlSeconds": nil, "maxAttempts": nil, "maxResends": nil,
				"resendCooldownSeconds": nil, "silentTimeoutSeconds": nil, "smsTimeoutSeconds": nil, "simSwap": nil, "appName": nil,
				"smsCountries": []any{"GB", "FR"}, "dailySmsCap": 500,
				"countries": map[string]any{"GB": map[string]any{"channels": []any{"SMS_OTP"}, "codeLength": 8, "codeTtlSeconds": nil, "maxAttempts": nil,
					"maxResends": nil, "resendCooldownSeconds": nil, "silentTimeoutSeconds": nil, "smsTimeoutSeconds": nil, "simSwap": map[string]any{"mode": "BLOCK", "maxAgeHours": 72},
					"deviceSwap": map[string]any{"mode": "REPORT", "maxAgeHours": nil}}}},
			"effective": map[string]any{"channels": []any{"SILENT", "SMS_OTP"}, "codeLength": 6, "codeTtlSeconds": 300, "maxAttempts": 5, "maxResends": 3,
				"resendCooldownSeconds": 30, "silentTimeoutSeconds": 60, "smsTimeoutSeconds": 600, "simSwap": map[string]any{"mode": "OFF", "maxAgeHours": 240},
				"deviceSwap": map[string]any{"mode": "OFF", "maxAgeHours": 240}},
		},
		"PUT /v1/api/me/workflow-policy": map[string]any{"policy": map[string]any{"channels": []any{}, "countries": map[string]any{}}, "effective": nil},
		"GET /v1/api/me/usage/workflows": map[string]any{"from": from, "to": to, "days": []any{},
			"totals": map[string]any{"count": 30, "charged": 60, "credited": 0, "breakdowns": []any{map[string]any{"dimension": "channel", "buckets": []any{
				map[string]any{"value": "SILENT", "count": 18, "charged": 0, "credited": 0},
				map[string]any{"value": "SMS_OTP", "count": 12, "charged": 60, "credited": 0},
			}}}}},
		"GET /v1/api/operators": map[string]any{"items": []any{
			map[string]any{"id": "du", "name": "du", "country": "AE", "mccMnc": []any{"424-03"}, "serviceTypes": []any{"HEADER_ENRICHMENT"}, "sandbox": false},
			map[string]any{"id": "etisalat", "name": "e& " + markup, "country": "AE", "mccMnc": []any{"424-02"}, "serviceTypes": []any{"HEADER_ENRICHMENT", "NETWORK_API"}, "sandbox": false},
		}},
		"GET /v1/api/verifications/v1": map[string]any{"verificationId": "v1", "createdAt": iso(time.Hour), "mobileNumber": "+97150*****67", "status": "VERIFIED",
			"reason": "MATCH", "operatorId": "du", "charged": 5, "balanceAfter": 48210, "serviceType": "HEADER_ENRICHMENT", "sessionId": "sess-1", "verified": true},
		"GET /v1/api/me/api-keys": page(
			map[string]any{"id": "k1", "name": "Production " + markup, "hint": "x9Qa", "role": "ADMIN", "createdAt": iso(30 * 24 * time.Hour), "lastUsedAt": iso(time.Minute)},
			map[string]any{"id": "k2", "name": "Staging", "hint": "b2Lm", "role": "MEMBER", "createdAt": iso(9 * 24 * time.Hour)},
		),
		"POST /v1/api/me/api-keys":   map[string]any{"id": "k3", "name": "CI", "hint": "Zz90", "role": "MEMBER", "apiKey": fakeKey},
		"GET /v1/api/me/sdk-tokens":  page(map[string]any{"id": "t1", "label": "iOS app", "hint": "Qe4r", "createdAt": iso(4 * 24 * time.Hour), "expiresAt": iso(-300 * 24 * time.Hour)}),
		"GET /v1/api/me/web-origins": map[string]any{"items": []any{map[string]any{"origin": "https://shop.example"}, map[string]any{"origin": "http://localhost:3000"}}},
		"GET /v1/api/me/webhooks": page(
			map[string]any{"id": "w1", "url": "https://hooks.shop.example/mnv", "description": "Orders " + markup, "enabled": true, "events": []any{"verification.completed", "balance.low"}},
			map[string]any{"id": "w2", "url": "https://old.shop.example/hook", "description": "", "enabled": false, "disabledReason": "FAILING", "events": []any{}},
		),
		"GET /v1/api/me/webhooks/w1": map[string]any{"id": "w1", "url": "https://hooks.shop.example/mnv", "description": "Orders " + markup, "enabled": true,
			"events": []any{"verification.completed", "balance.low"}, "createdAt": iso(20 * 24 * time.Hour)},
		"GET /v1/api/me/webhooks/w1/deliveries": page(
			map[string]any{"id": "d1", "eventType": "verification.completed", "status": "SUCCEEDED", "attempts": 1, "lastHttpStatus": 200, "createdAt": iso(time.Hour)},
			map[string]any{"id": "d2", "eventType": "balance.low", "status": "FAILED", "attempts": 8, "lastHttpStatus": 500, "lastError": "HTTP 500", "createdAt": iso(26 * time.Hour)},
		),
		"GET /v1/api/me/connect/overview": map[string]any{"profiles": map[string]any{"total": 1200, "matched": 830, "enriched": 410},
			"imports": map[string]any{"running": 1, "total": 6}, "integrations": map[string]any{"active": 1, "total": 2},
			"syncs": map[string]any{"last24h": map[string]any{"succeeded": 14, "failed": 1}}},
		"GET /v1/api/me/connect/profiles": page(map[string]any{"id": "p1", "firstName": "Sam", "lastName": markup, "mobileNumberMasked": "+97150*****67", "externalId": "crm-17", "matched": true, "countryCode": "AE"}),
		"GET /v1/api/me/connect/import/jobs": page(map[string]any{"id": "j1", "fileName": "customers.csv", "status": "COMPLETED", "percentComplete": 100, "totalRows": 1200,
			"importedRows": 1180, "updatedRows": 15, "failedRows": 5, "createdAt": iso(2 * time.Hour),
			"errors": []any{map[string]any{"row": 17, "column": "mobile_number", "message": "not a mobile number"}}}),
		"GET /v1/api/me/connect/integrations": page(map[string]any{"id": "i1", "displayName": "HubSpot", "status": "ACTIVE", "integrationType": "HUBSPOT", "endpointUrl": "https://api.hubapi.com"}),
		"GET /v1/api/me/stuck-plus/sessions":  page(map[string]any{"id": "sp1", "createdAt": iso(5 * time.Hour), "mobileNumberMasked": "+97150*****67", "operatorId": "du", "metadataId": "order-" + markup}),
		"GET /v1/api/me/stuck-plus/reveals":   page(),
		"GET /v1/api/me/members": map[string]any{"items": []any{
			map[string]any{"person": person, "role": "ADMIN", "joinedAt": iso(90 * 24 * time.Hour)},
			map[string]any{"person": map[string]any{"id": "u2", "name": "Max " + markup, "email": "max@example.com"}, "role": "MEMBER", "joinedAt": iso(10 * 24 * time.Hour)},
		}},
		"GET /v1/api/me/invitations": map[string]any{"items": []any{map[string]any{"id": "inv1", "email": "new@example.com", "role": "MEMBER", "createdAt": iso(time.Hour), "expiresAt": iso(-71 * time.Hour)}}},
		"GET /v1/api/console/passkeys": map[string]any{"items": []any{
			map[string]any{"id": "k1", "name": "Laptop " + markup, "createdAt": iso(90 * 24 * time.Hour), "lastUsedAt": iso(time.Hour), "backupEligible": true, "backedUp": true},
			map[string]any{"id": "k2", "name": "", "createdAt": iso(24 * time.Hour)},
		}},
		"GET /v1/api/console/sessions": map[string]any{"items": []any{
			map[string]any{"id": "s1", "current": true, "userAgent": "Chromium on Linux", "clientAddress": "127.0.0.1", "createdAt": iso(time.Hour), "lastSeenAt": iso(0), "expiresAt": iso(-11 * time.Hour)},
			map[string]any{"id": "s2", "current": false, "userAgent": "Safari on iPhone", "clientAddress": "10.0.0.7", "createdAt": iso(50 * time.Hour), "lastSeenAt": iso(3 * time.Hour), "expiresAt": iso(-2 * time.Hour)},
		}},
		"GET /v1/api/me/sandbox/sms": map[string]any{"items": []any{
			map[string]any{"workflowId": "wf1", "stepId": "st1", "mobileNumber": "+97150*****67", "from": "mnv", "text": "123456 is your verification code. " + markup, "receivedAt": iso(time.Minute)},
		}},
		"GET /v1/api/me/audit-log": page(
			map[string]any{"id": "a1", "at": iso(time.Hour), "person": person, "action": "CreateApiKey", "target": "k2", "status": 200, "clientAddress": "127.0.0.1", "userAgent": "Chromium"},
			map[string]any{"id": "a2", "at": iso(2 * time.Hour), "person": person, "action": "RevealStuckPlusSession", "target": "sp0", "status": 403, "clientAddress": "127.0.0.1", "userAgent": "Chromium"},
		),
	}
}

// fakeWorkflow is a workflow as the API answers it: a silent step, then (when SMS_OTP decided
// it or it is in progress) an SMS step; the number masked, the country's code from the data.
func fakeWorkflow(iso func(time.Duration) string, id, status, decidedBy string) map[string]any {
	silentStatus, steps := "UNDETERMINED", []any{}
	if decidedBy == "SILENT" {
		silentStatus = "VERIFIED"
	}
	steps = append(steps, map[string]any{"stepId": id + "-s1", "seq": 1, "channel": "SILENT", "status": silentStatus, "reason": nil,
		"verificationId": "v1", "charged": 0, "startedAt": iso(time.Hour), "endedAt": iso(59 * time.Minute)})
	if decidedBy != "SILENT" {
		smsStatus := "SENT"
		if status == "VERIFIED" {
			smsStatus = "VERIFIED"
		}
		steps = append(steps, map[string]any{"stepId": id + "-s2", "seq": 2, "channel": "SMS_OTP", "status": smsStatus, "reason": nil,
			"verificationId": nil, "charged": 5, "startedAt": iso(59 * time.Minute), "endedAt": nil})
	}
	var decided any
	if decidedBy != "" {
		decided = decidedBy
	}
	return map[string]any{"workflowId": id, "status": status, "decidedBy": decided, "reason": nil, "mobileNumber": "+44740*****56",
		"country": "GB", "simSwap": "NOT_CHECKED", "deviceSwap": "NOT_SWAPPED", "steps": steps, "attemptsLeft": 5, "resendsLeft": 3, "resendAt": nil, "codeExpiresAt": nil,
		"charged": 5, "createdAt": iso(time.Hour), "endedAt": nil, "transactionId": nil}
}

// TestPages renders every page of the console signed in, against fakeAPI: each shows its
// heading, with no CSP violation, no markup from the data turned into elements, no serious
// or critical axe violation; each is kept as out/console-<page>.png.
func TestPages(t *testing.T) {
	root, gateway, browser := setUp(t)
	answers := fakeAnswers(time.Now())

	pages := []struct{ path, heading, shot string }{
		{"/console", "Overview", "overview"},
		{"/console/verifications", "Verifications", "verifications"},
		{"/console/verifications/v1", "Verification", "verification"},
		{"/console/workflows", "Workflows", "workflows"},
		{"/console/workflows/wf1", "Workflow", "workflow"},
		{"/console/keys", "Keys and SDK tokens", "keys"},
		{"/console/web-origins", "Web origins", "web-origins"},
		{"/console/webhooks", "Webhooks", "webhooks"},
		{"/console/webhooks/w1", "Webhook endpoint", "webhook"},
		{"/console/connect", "Connect", "connect"},
		{"/console/reveal", "Reveal", "reveal"},
		{"/console/sandbox-sms", "Sandbox SMS", "sandbox-sms"},
		{"/console/ledger", "Ledger", "ledger"},
		{"/console/team", "Team", "team"},
		{"/console/passkeys", "Your passkeys", "passkeys"},
		{"/console/sessions", "Sessions", "sessions"},
		{"/console/audit-log", "Audit log", "audit-log"},
		{"/console/settings", "Settings", "settings"},
		{"/console/nothing-here", "No such page", ""},
	}
	api := newFakeAPI(answers)
	tab := api.tab(t, browser, harness.ContextOptions{Width: 1280, Height: 900})
	for _, p := range pages {
		t.Run(p.path, func(t *testing.T) {
			var title string
			var csp []string
			var images, loading int
			tab.Goto(t, gateway+p.path)
			tab.WaitVisible(t, `main h1`)
			tab.Poll(t, `!document.querySelector('.state-loading')`, nil, 10*time.Second)
			heading := tab.Text(t, `main h1`)
			tab.Eval(t, `document.title`, &title)
			tab.Eval(t, `window.__csp`, &csp)
			tab.Eval(t, `document.querySelectorAll('img').length`, &images)
			tab.Eval(t, `document.querySelectorAll('.state-error').length`, &loading)
			if heading != p.heading {
				t.Errorf("heading %q, want %q", heading, p.heading)
			}
			if len(csp) > 0 {
				t.Errorf("CSP violations: %v", csp)
			}
			if images > 0 || strings.Contains(title, "owned") {
				t.Errorf("markup from the API became elements: %d img, title %q", images, title)
			}
			if loading > 0 {
				text, _ := tab.TextErr(`main`)
				t.Errorf("an error state: %s", text)
			}
			axe(t, tab, root)
			if p.shot != "" {
				screenshot(t, tab, root, "console-"+p.shot+".png")
			}
		})
	}
	// From the keyboard alone: the first Tab reaches the skip link; a key is created and its
	// secret shown once, with an Idempotency-Key sent (the document says CreateApiKey honours
	// one), and none on a read.
	t.Run("keyboard and a created key", func(t *testing.T) {
		var focused string
		tab.Goto(t, gateway+"/console/keys")
		tab.WaitVisible(t, `main h1`)
		tab.Press(t, "Tab")
		tab.Eval(t, `document.activeElement.className`, &focused)
		tab.Type(t, `form.inline-form input`, "CI")
		tab.Press(t, "Enter")
		tab.WaitVisible(t, `.secret-value`)
		secret := tab.Text(t, `.secret-value`)
		if focused != "skip-link" {
			t.Errorf("the first Tab focuses %q, not the skip link", focused)
		}
		if secret != fakeKey {
			t.Errorf("secret shown %q", secret)
		}
		screenshot(t, tab, root, "console-key-created.png")
		if keys := api.requests("POST /v1/api/me/api-keys"); len(keys) != 1 || len(keys[0].idempotencyKey) < 32 {
			t.Errorf("Idempotency-Key of the create: %+v", keys)
		}
		for _, r := range api.requests("GET /v1/api/me/api-keys") {
			if r.idempotencyKey != "" {
				t.Errorf("a read sent Idempotency-Key %q", r.idempotencyKey)
			}
		}
	})
	// The history's filters: each control sends its query parameter, and "Any" sends none.
	t.Run("verification filters", func(t *testing.T) {
		pick := func(label, value string) string {
			return fmt.Sprintf(`(() => { const l = [...document.querySelectorAll('form.filters label')].find(l => l.textContent === %q);
  const s = document.getElementById(l.htmlFor); s.value = %q; s.dispatchEvent(new Event('change', {bubbles: true})); return s.value; })()`, label, value)
		}
		// The list's request follows each pick within a render and a fetch; under make test's
		// load (every package at once on two cores) that has taken over five seconds.
		const listWait = 20 * time.Second
		before := len(api.requests("GET /v1/api/verifications"))
		var picked []string
		var options []string
		tab.Goto(t, gateway+"/console/verifications")
		tab.WaitVisible(t, `main h1`)
		tab.Poll(t, `!document.querySelector('.state-loading') && [...document.querySelectorAll('form.filters option')].some(o => o.value === 'etisalat')`, nil, 10*time.Second)
		tab.Eval(t, `[...document.querySelectorAll('form.filters option')].filter(o => o.value === 'du' || o.value === 'etisalat').map(o => o.textContent)`, &options)
		for _, f := range [][2]string{{"Reason", "NUMBER_MISMATCH"}, {"Operator", "etisalat"}, {"Method", "NETWORK_API"}, {"Outcome", "NOT_VERIFIED"}} {
			var v string
			tab.Eval(t, pick(f[0], f[1]), &v)
			picked = append(picked, v)
		}
		want := url.Values{"reason": {"NUMBER_MISMATCH"}, "operatorId": {"etisalat"}, "serviceType": {"NETWORK_API"}, "status": {"NOT_VERIFIED"}}
		deadline := time.Now().Add(listWait)
		var last url.Values
		for {
			reqs := api.requests("GET /v1/api/verifications")
			if len(reqs) > before {
				last = reqs[len(reqs)-1].query
			}
			match := last != nil
			for k, v := range want {
				match = match && last.Get(k) == v[0]
			}
			if match {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("picked %v; the list's last query %v, want %v", picked, last, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if len(options) != 2 || options[0] != "du (du)" || !strings.Contains(options[1], "(etisalat)") {
			t.Errorf("operator choices %q, want the operators the API lists", options)
		}
		screenshot(t, tab, root, "console-verifications-filtered.png")
		// Back to Any: no parameter at all.
		tab.Eval(t, pick("Reason", ""), nil)
		deadline = time.Now().Add(listWait)
		for {
			reqs := api.requests("GET /v1/api/verifications")
			if q := reqs[len(reqs)-1].query; !q.Has("reason") && q.Get("operatorId") == "etisalat" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after Any: the list's last query %v still filters by reason", reqs[len(reqs)-1].query)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	// On a phone's width every page fits: no sideways scroll of the page (wide tables scroll
	// inside their panel). A phone's touch and meta viewport belong to a context of its own.
	t.Run("a phone's width", func(t *testing.T) {
		phone := api.tab(t, browser, harness.ContextOptions{Width: 390, Height: 844, Mobile: true})
		for _, p := range pages {
			var overflow int
			phone.Goto(t, gateway+p.path)
			phone.WaitVisible(t, `main h1`)
			phone.Poll(t, `!document.querySelector('.state-loading')`, nil, 10*time.Second)
			phone.Eval(t, `document.documentElement.scrollWidth - window.innerWidth`, &overflow)
			if overflow > 0 {
				t.Errorf("%s is %d px wider than the screen", p.path, overflow)
			}
			if p.shot == "overview" {
				screenshot(t, phone, root, "console-overview-phone.png")
			}
		}
	})

	// The workflow policy: an ADMIN changes the default's code length, SIM-swap age, device-swap
	// mode and app name, the GB override's SIM-swap and device-swap ages, adds an override for
	// FR (codes by SMS only) and saves; the body keeps the rest of the GB override (its
	// device-swap mode) and what the page does not edit (the SMS allow-list and cap) as they
	// were, and leaves unset fields out (they take the level above).
	t.Run("workflow policy", func(t *testing.T) {
		tab.Goto(t, gateway+"/console/settings")
		tab.WaitVisible(t, `#workflow-policy form`)
		tab.Fill(t, `#workflow-policy input[name="codeLength"]`, "8")
		tab.Fill(t, `#workflow-policy input[name="simMaxAgeHours"]`, "48")
		tab.Fill(t, `#workflow-policy input[name="appName"]`, "Acme")
		tab.Fill(t, `#workflow-policy input[name="GB-simMaxAgeHours"]`, "24")
		tab.Fill(t, `#workflow-policy input[name="GB-deviceMaxAgeHours"]`, "12")
		var mode string
		tab.Eval(t, `(() => { const s = document.querySelector('#workflow-policy select[name="deviceSwap"]'); s.value = 'BLOCK';
  s.dispatchEvent(new Event('change', {bubbles: true})); return s.value; })()`, &mode)
		tab.Fill(t, `#workflow-policy .inline-form input`, "fr")
		tab.Click(t, `#workflow-policy .inline-form button`)
		tab.WaitVisible(t, `#workflow-policy select[name="FR-channels"]`)
		var v string
		tab.Eval(t, `(() => { const s = document.querySelector('#workflow-policy select[name="FR-channels"]'); s.value = 'SMS_OTP';
  s.dispatchEvent(new Event('change', {bubbles: true})); return s.value; })()`, &v)
		tab.Click(t, `#workflow-policy button[type="submit"]`)
		tab.Poll(t, `document.querySelector('#workflow-policy [role="status"]').textContent === 'Saved.'`, nil, 10*time.Second)
		puts := api.requests("PUT /v1/api/me/workflow-policy")
		if len(puts) != 1 {
			t.Fatalf("%d saves", len(puts))
		}
		var body map[string]any
		if err := json.Unmarshal([]byte(puts[0].body), &body); err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(body)
		want := `{"appName":"Acme","channels":["SILENT","SMS_OTP"],"codeLength":8,"countries":{"FR":{"channels":["SMS_OTP"]},` +
			`"GB":{"channels":["SMS_OTP"],"codeLength":8,"deviceSwap":{"maxAgeHours":12,"mode":"REPORT"},"simSwap":{"maxAgeHours":24,"mode":"BLOCK"}}},` +
			`"dailySmsCap":500,"deviceSwap":{"mode":"BLOCK"},"simSwap":{"maxAgeHours":48},"smsCountries":["GB","FR"]}`
		if string(got) != want {
			t.Errorf("saved %s\nwant  %s", got, want)
		}
		screenshot(t, tab, root, "console-workflow-policy.png")
	})

	// A MEMBER sees the ADMIN actions disabled (the server refuses them anyway).
	t.Run("a MEMBER", func(t *testing.T) {
		api.set("GET /v1/api/console/session", map[string]any{
			"person":      map[string]any{"id": "u2", "name": "Max Member", "email": "max@example.com"},
			"membership":  map[string]any{"clientId": "c1", "clientName": "Acme Shop", "role": "MEMBER"},
			"memberships": []any{map[string]any{"clientId": "c1", "clientName": "Acme Shop", "role": "MEMBER"}},
		})
		for _, p := range []struct{ path, enabled string }{
			{"/console/keys", `[...document.querySelectorAll('main button')].filter(b => !b.disabled).map(b => b.textContent)`},
			{"/console/team", `[...document.querySelectorAll('main button, main select')].filter(b => !b.disabled).map(b => b.textContent)`},
			{"/console/webhooks/w1", `[...document.querySelectorAll('main button')].filter(b => !b.disabled && !b.closest('form.filters')).map(b => b.textContent)`},
			{"/console/settings", `[...document.querySelectorAll('main button, main input')].filter(b => !b.disabled && !b.closest('fieldset:disabled')).map(b => b.textContent || b.name || b.id)`},
		} {
			var enabled []string
			tab.Goto(t, gateway+p.path)
			tab.WaitVisible(t, `main h1`)
			tab.Poll(t, `!document.querySelector('.state-loading')`, nil, 10*time.Second)
			tab.Eval(t, p.enabled, &enabled)
			if len(enabled) > 0 {
				t.Errorf("%s: a MEMBER may press %q", p.path, enabled)
			}
			if p.path == "/console/team" {
				screenshot(t, tab, root, "console-team-member.png")
			}
		}
	})
	api.checkAnswered(t)
}

// request is what the fake API saw of one call.
type request struct {
	idempotencyKey string
	body           string
	query          url.Values
}

// fakeAPI answers /v1/api in the browser: answers by "METHOD path", or hook first when set
// (handled false: fall back to answers). Every request is recorded.
type fakeAPI struct {
	mu      sync.Mutex
	answers map[string]any
	hook    func(key string, n int, body string) (status int, data any, handled bool)
	seen    map[string][]request
	unknown []string
}

func newFakeAPI(answers map[string]any) *fakeAPI {
	return &fakeAPI{answers: answers, seen: map[string][]request{}}
}

// tab is a tab of a context of its own whose /v1/api calls the fake API answers, with
// cspWatch in each page.
func (f *fakeAPI) tab(t *testing.T, b *harness.Browser, opts harness.ContextOptions) *harness.Page {
	t.Helper()
	c := b.NewContext(t, opts)
	c.AddInitScript(t, cspWatch)
	c.Route(t, "**/v1/api/**", f.answer)
	return c.NewPage(t)
}

// set changes an answer.
func (f *fakeAPI) set(key string, data any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[key] = data
}

func (f *fakeAPI) requests(key string) []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.seen[key]...)
}

func (f *fakeAPI) checkAnswered(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.unknown) > 0 {
		t.Errorf("calls the fake API does not answer: %v", f.unknown)
	}
}

// answer records a request of the page and answers it in the API's envelope.
func (f *fakeAPI) answer(q harness.RouteRequest) harness.RouteAnswer {
	u, _ := url.Parse(q.URL)
	key := q.Method + " " + u.Path
	r := request{query: u.Query(), idempotencyKey: q.Headers["idempotency-key"], body: q.PostData}
	f.mu.Lock()
	f.seen[key] = append(f.seen[key], r)
	n := len(f.seen[key])
	hook := f.hook
	f.mu.Unlock()

	status, data, handled := 200, any(nil), false
	if hook != nil {
		status, data, handled = hook(key, n, r.body)
	}
	if !handled {
		f.mu.Lock()
		var ok bool
		if data, ok = f.answers[key]; ok {
			status = 200
		} else {
			f.unknown = append(f.unknown, key)
			status, data = 404, apiError{"NOT_FOUND", "not in the fake API"}
		}
		f.mu.Unlock()
	}
	var body []byte
	if e, ok := data.(apiError); ok {
		body, _ = json.Marshal(map[string]any{"success": false, "data": nil,
			"messages": []any{map[string]any{"type": "ERROR", "code": e.code, "httpStatus": "ERROR", "message": e.message, "technical": false, "field": nil}}})
	} else {
		body, _ = json.Marshal(map[string]any{"success": true, "data": data,
			"messages": []any{map[string]any{"type": "SUCCESS", "httpStatus": "OK", "message": "ok", "technical": false}}})
	}
	return harness.RouteAnswer{Status: status, Headers: map[string]string{"Content-Type": "application/json"}, Body: string(body)}
}

// apiError is an error answer of the fake API.
type apiError struct{ code, message string }
