package gateway_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// workflowRoute is one route of the workflows as a backend, or the console, calls it.
type workflowRoute struct {
	method, path, body string
	// ofWorkflow: the path names a workflow of the client (another client's caller is 404).
	ofWorkflow bool
	// session: the route takes the console's session as well as an API key; the others are a
	// backend's acts on its workflow (its silent step's blob, its user's code, a resend), for
	// which a cookie is no credential at all (401).
	session bool
}

func (r workflowRoute) write() bool    { return r.method != http.MethodGet }
func (r workflowRoute) String() string { return r.method + " " + r.path }

// TestWorkflowRoutesRefuseAttacks: every workflow route through the gateway to the real
// services, against each way in that must not work: no credential (401); an SDK token, an
// app's credential and never a backend's (401); another client's API key, or its key naming
// this client (401); another client's key or console session on this client's workflow (404,
// as if it did not exist) and on /me (its own only); a MEMBER's key or session writing the
// policy (403); this client's console session from anywhere but the console's own origin on a
// route that changes something (403: the gateway's cross-origin check, Sec-Fetch-Site else
// Origin against Host, which the same session from the console passes); the web transaction
// routes from any page but the client's, whatever credential rides along (403). A replayed
// Idempotency-Key on the start, concurrently too, answers the same workflow, charged once.
func TestWorkflowRoutesRefuseAttacks(t *testing.T) {
	f := start2(t)
	features := []accountsv1.Feature{accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX}
	ownIdP, otherIdP := startIdP(t), startIdP(t)
	c, _ := ssoClientOf(t, f, ownIdP, 10, features...)
	other, _ := ssoClientOf(t, f, otherIdP, 10, features...)
	const number, shop, mallory = "+971501234567", "https://shop.example", "https://mallory.example"
	person := func(sub, group string) *idpUser {
		return &idpUser{MockUser: mockoidc.MockUser{Subject: sub, Email: sub + "@example.com", EmailVerified: true, Groups: []string{group}}, authTime: time.Now()}
	}
	cookie := func(b *browser) string { return principal.SessionCookie + "=" + b.cookies[principal.SessionCookie] }
	ownAdmin := cookie(signIn(t, f.stack, ownIdP, c.ID, person("boss", "mnv-admins")))
	ownMember := cookie(signIn(t, f.stack, ownIdP, c.ID, person("dev", "engineering")))
	otherAdmin := cookie(signIn(t, f.stack, otherIdP, other.ID, person("rival", "mnv-admins")))
	f.data(t, call{method: "PUT", path: "/v1/api/me/web-origins", headers: meHeaders(c), body: `{"origins":["` + shop + `"]}`})
	f.data(t, call{method: "PUT", path: "/v1/api/me/web-origins", headers: meHeaders(other), body: `{"origins":["https://other.example"]}`})
	token := f.data(t, call{method: "POST", path: "/v1/api/me/sdk-tokens", headers: meHeaders(c), body: `{"label":"app"}`})["sdkToken"].(string)
	memberKey := f.data(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: meHeaders(c), body: `{"name":"reader","role":"MEMBER"}`})["apiKey"].(string)

	startBody := `{"mobileNumber":"` + number + `"}`
	id := f.data(t, call{method: "POST", path: "/v1/api/workflows", headers: keyHeaders(c), body: startBody})["workflowId"].(string)
	open := func(h map[string]string) string {
		return f.data(t, call{method: "POST", path: "/v1/api/opportunity", headers: h,
			body: `{"serviceCode":"VERIFY","metadataId":"signup-1"}`})["transactionId"].(string)
	}
	tx, foreignTx := open(keyHeaders(c)), open(keyHeaders(other))
	f.data(t, call{method: "POST", path: "/v1/api/workflows", headers: keyHeaders(c), body: `{"mobileNumber":"` + number + `","transactionId":"` + tx + `"}`})
	f.data(t, call{method: "POST", path: "/v1/api/workflows", headers: keyHeaders(other), body: `{"mobileNumber":"` + number + `","transactionId":"` + foreignTx + `"}`})

	routes := []workflowRoute{
		{method: "POST", path: "/v1/api/workflows", body: startBody, session: true},
		{method: "GET", path: "/v1/api/workflows", session: true},
		{method: "GET", path: "/v1/api/workflows/" + id, ofWorkflow: true, session: true},
		{method: "POST", path: "/v1/api/workflows/" + id + "/silent", body: `{"encryptedMobileNumber":"x","operatorId":"sandbox","serviceType":"HEADER_ENRICHMENT"}`, ofWorkflow: true},
		{method: "POST", path: "/v1/api/workflows/" + id + "/code", body: `{"code":"123456"}`, ofWorkflow: true},
		{method: "POST", path: "/v1/api/workflows/" + id + "/resend", body: `{}`, ofWorkflow: true},
		{method: "GET", path: "/v1/api/me/workflow-policy", session: true},
		{method: "PUT", path: "/v1/api/me/workflow-policy", body: `{"channels":["SILENT","SMS_OTP"]}`, session: true},
		{method: "GET", path: "/v1/api/me/usage/workflows", session: true},
		{method: "GET", path: "/v1/api/me/sandbox/sms", session: true},
	}
	send := func(r workflowRoute, h map[string]string) answer {
		return f.do(t, call{method: r.method, path: r.path, headers: h, body: r.body})
	}
	sessionFrom := func(cookie string, h map[string]string) map[string]string {
		return with(h, "Cookie", cookie)
	}
	fromConsole := map[string]string{"Sec-Fetch-Site": "same-origin"}
	workflowsOf := func(h map[string]string) float64 {
		return f.data(t, call{method: "GET", path: "/v1/api/workflows", headers: h})["totalItems"].(float64)
	}
	before := workflowsOf(keyHeaders(c))

	type attack struct {
		name string
		// applies says whether the attack is one on r; headers are what the attacker sends.
		applies func(r workflowRoute) bool
		headers map[string]string
		want    []int
		// cookie: the attacker's credential is a session cookie, which a route that takes none
		// answers 401 (no API key) before anything else.
		cookie bool
	}
	every := func(workflowRoute) bool { return true }
	attacks := []attack{
		{"no credential", every, nil, []int{http.StatusUnauthorized}, false},
		{"the client's SDK token", every, map[string]string{"X-SDK-TOKEN": token, "X-CLIENT-ID": c.ID}, []int{http.StatusUnauthorized}, false},
		{"another client's key naming this client", every, map[string]string{"X-API-KEY": other.APIKey, "X-CLIENT-ID": c.ID}, []int{http.StatusUnauthorized, http.StatusForbidden}, false},
		{"another client's key", workflowRoute.ofWorkflowOnly, keyHeaders(other), []int{http.StatusNotFound}, false},
		{"another client's console session", workflowRoute.ofWorkflowOnly, sessionFrom(otherAdmin, fromConsole), []int{http.StatusNotFound}, true},
		{"a MEMBER's key writing the policy", workflowRoute.writesPolicy, map[string]string{"X-API-KEY": memberKey}, []int{http.StatusForbidden}, false},
		{"a MEMBER's console session writing the policy", workflowRoute.writesPolicy, sessionFrom(ownMember, fromConsole), []int{http.StatusForbidden}, true},
		{"the client's session from another site", workflowRoute.write, sessionFrom(ownAdmin, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": mallory}), []int{http.StatusForbidden}, true},
		{"the client's session from a sibling site", workflowRoute.write, sessionFrom(ownAdmin, map[string]string{"Sec-Fetch-Site": "same-site"}), []int{http.StatusForbidden}, true},
		{"the client's session from another Origin, no Sec-Fetch-Site", workflowRoute.write, sessionFrom(ownAdmin, map[string]string{"Origin": mallory}), []int{http.StatusForbidden}, true},
	}
	for _, a := range attacks {
		for _, r := range routes {
			if !a.applies(r) {
				continue
			}
			want := a.want
			if a.cookie && !r.session {
				want = []int{http.StatusUnauthorized}
			}
			t.Run(a.name+"/"+r.String(), func(t *testing.T) {
				if got := send(r, a.headers); !slices.Contains(want, got.status) {
					t.Errorf("%s by %s: %d %s, want %v", r, a.name, got.status, got.body, want)
				}
			})
		}
	}
	// Nothing the attacks sent started, moved or changed anything of the client's.
	if n := workflowsOf(keyHeaders(c)); n != before {
		t.Errorf("the attacks started %v workflows", n-before)
	}
	if w := f.data(t, call{method: "GET", path: "/v1/api/workflows/" + id, headers: keyHeaders(c)}); w["status"] != "IN_PROGRESS" || stepsOf(w) != "SILENT:PENDING" {
		t.Errorf("the workflow after the attacks: %v", w)
	}
	if p := f.data(t, call{method: "GET", path: "/v1/api/me/workflow-policy", headers: meHeaders(c)}); len(p["policy"].(map[string]any)["channels"].([]any)) != 0 {
		t.Errorf("the policy after the attacks: %v", p)
	}

	// Another client's caller on /me reads its own: none of this client's workflows, steps or
	// messages, by key or by session.
	for name, h := range map[string]map[string]string{"key": keyHeaders(other), "session": sessionFrom(otherAdmin, fromConsole)} {
		if d := f.data(t, call{method: "GET", path: "/v1/api/workflows", headers: h}); d["totalItems"] != float64(1) {
			t.Errorf("another client's %s lists %v workflows, want its own 1", name, d["totalItems"])
		}
		if d := f.data(t, call{method: "GET", path: "/v1/api/me/usage/workflows", headers: h}); d["totals"].(map[string]any)["count"] != float64(1) {
			t.Errorf("another client's %s counts %v steps, want its own 1", name, d["totals"])
		}
		if a := f.do(t, call{method: "GET", path: "/v1/api/me/sandbox/sms", headers: h}); a.status != http.StatusNotFound && a.status != http.StatusOK {
			t.Errorf("another client's %s on the sandbox SMS: %d %s", name, a.status, a.body)
		}
	}

	// The same session from the console passes the gateway on every route that takes one
	// (what refused it above was where it came from); an ADMIN's writes the policy.
	for _, r := range routes {
		if !r.session {
			continue
		}
		a := send(r, sessionFrom(ownAdmin, fromConsole))
		if a.status == http.StatusUnauthorized || a.status == http.StatusForbidden || (r.method == "PUT" && a.status != http.StatusOK) {
			t.Errorf("%s by the client's ADMIN from the console: %d %s", r, a.status, a.body)
		}
	}

	// What the gateway checks is where a browser says the request comes from, as net/http's
	// CrossOriginProtection does: a request that says neither (Sec-Fetch-Site, Origin) is not a
	// browser's, and is taken; a browser sends one on every cross-site write, and the cookie is
	// SameSite=Strict besides.
	if a := send(routes[0], sessionFrom(ownAdmin, nil)); a.status != http.StatusOK {
		t.Errorf("a start by the client's session saying no origin: %d %s", a.status, a.body)
	}

	// The web transaction routes: no credential, bound to the client's web origins; a key or a
	// session riding along opens nothing.
	web := []workflowRoute{
		{method: "GET", path: "/v1/api/web/transactions/%s/workflow"},
		{method: "POST", path: "/v1/api/web/transactions/%s/code", body: `{"code":"0000000000"}`},
		{method: "POST", path: "/v1/api/web/transactions/%s/resend", body: `{}`},
	}
	for _, r := range web {
		for _, a := range []struct {
			name    string
			tx      string
			headers map[string]string
		}{
			{"no Origin", tx, nil},
			{"the attacker's page", tx, map[string]string{"Origin": mallory}},
			{"the attacker's page with the client's key", tx, with(keyHeaders(c), "Origin", mallory)},
			{"the attacker's page with the client's session", tx, sessionFrom(ownAdmin, map[string]string{"Origin": mallory, "Sec-Fetch-Site": "cross-site"})},
			{"another client's page on this client's transaction", tx, map[string]string{"Origin": "https://other.example"}},
			{"this client's page on another client's transaction", foreignTx, map[string]string{"Origin": shop}},
		} {
			r := workflowRoute{method: r.method, path: fmt.Sprintf(r.path, a.tx), body: r.body}
			if got := send(r, a.headers); got.status != http.StatusForbidden || got.headers.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("%s from %s: %d %s, want 403 without a CORS grant", r, a.name, got.status, got.body)
			}
		}
	}
	if a := send(workflowRoute{method: "GET", path: "/v1/api/web/transactions/" + tx + "/workflow"}, map[string]string{"Origin": shop}); a.status != http.StatusOK {
		t.Errorf("the client's page reading its workflow: %d %s", a.status, a.body)
	}

	// The usage's filters through the gateway: a channel's steps alone, and 400 naming the
	// field for a channel or a country that is none.
	silentOnly := f.data(t, call{method: "GET", path: "/v1/api/me/usage/workflows?channel=SILENT&country=AE", headers: meHeaders(c)})
	all := f.data(t, call{method: "GET", path: "/v1/api/me/usage/workflows", headers: meHeaders(c)})
	if n, m := silentOnly["totals"].(map[string]any)["count"].(float64), all["totals"].(map[string]any)["count"].(float64); n == 0 || n > m {
		t.Errorf("the silent steps in AE: %v of %v", n, m)
	}
	for q, field := range map[string]string{"channel=FAX": "channel", "country=ae": "country", "country=GBR": "country"} {
		if a := f.do(t, call{method: "GET", path: "/v1/api/me/usage/workflows?" + q, headers: meHeaders(c)}); a.status != http.StatusBadRequest || !strings.Contains(string(a.body), `"field":"`+field+`"`) {
			t.Errorf("usage with %s: %d %s, want 400 on %s", q, a.status, a.body, field)
		}
	}

	// A replayed start, concurrently and then again: one workflow, charged once. A start
	// charges nothing itself (its silent step waits for the blob), so what the replays must not
	// do is start workflows that would each be charged: the one they share takes one verify's
	// price when its blob comes, as a workflow started once does.
	balance := func() float64 {
		return f.data(t, call{method: "GET", path: "/v1/api/clients", headers: keyHeaders(c)})["balance"].(float64)
	}
	startOnce := func(key string) answer {
		return f.do(t, call{method: "POST", path: "/v1/api/workflows", headers: with(keyHeaders(c), "Idempotency-Key", key), body: startBody})
	}
	verifySilent := func(id string) {
		t.Helper()
		a := f.do(t, call{method: "POST", path: "/v1/api/workflows/" + id + "/silent", headers: keyHeaders(c),
			body: `{"encryptedMobileNumber":"` + f.sdkSession(t, c, token, number) + `","operatorId":"sandbox","serviceType":"HEADER_ENRICHMENT"}`})
		if a.status != http.StatusOK || workflowOf(t, a)["status"] != "VERIFIED" {
			t.Fatalf("the silent step: %d %s", a.status, a.body)
		}
	}
	b0, n0 := balance(), workflowsOf(keyHeaders(c))
	// The price of one: a workflow started once.
	single := startOnce("once")
	if single.status != http.StatusOK {
		t.Fatalf("a start: %d %s", single.status, single.body)
	}
	verifySilent(workflowOf(t, single)["workflowId"].(string))
	price := b0 - balance()
	if price <= 0 {
		t.Fatalf("a verified workflow took %v credits", price)
	}
	b1 := balance()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		answers []answer
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := startOnce("replayed")
			mu.Lock()
			answers = append(answers, a)
			mu.Unlock()
		}()
	}
	wg.Wait()
	answers = append(answers, startOnce("replayed"))
	ids := map[string]bool{}
	for _, a := range answers {
		switch a.status {
		case http.StatusOK:
			ids[workflowOf(t, a)["workflowId"].(string)] = true
		case http.StatusConflict: // the first still in flight: the house's answer to a concurrent replay
		default:
			t.Errorf("a replayed start: %d %s", a.status, a.body)
		}
	}
	last := answers[len(answers)-1]
	if len(ids) != 1 || last.status != http.StatusOK || last.headers.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replayed starts answered workflows %v, the last %d %v", ids, last.status, last.headers)
	}
	if n := workflowsOf(keyHeaders(c)); n != n0+2 {
		t.Errorf("%v workflows started under two keys, want 2", n-n0)
	}
	verifySilent(workflowOf(t, last)["workflowId"].(string))
	if spent := b1 - balance(); spent != price {
		t.Errorf("the replayed start's workflow took %v credits, want one verify's %v", spent, price)
	}
}

func (r workflowRoute) ofWorkflowOnly() bool { return r.ofWorkflow }
func (r workflowRoute) writesPolicy() bool   { return r.method == "PUT" }
