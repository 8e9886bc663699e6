package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/app/apptest"
	"github.com/mnvhq/mnv/services/platform/outbox"
	"github.com/mnvhq/mnv/services/platform/testkit/sandboxcamara"
	verificationapp "github.com/mnvhq/mnv/services/verification/app"
	"github.com/mnvhq/mnv/tests/harness"
)

// workflowOf reads the workflow of an answer (data is the workflow).
func workflowOf(t *testing.T, a answer) map[string]any {
	t.Helper()
	var env struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(a.body, &env); err != nil {
		t.Fatalf("%s: %v", a.body, err)
	}
	return env.Data
}

func stepsOf(w map[string]any) string {
	var out []string
	steps, _ := w["steps"].([]any)
	for _, s := range steps {
		m := s.(map[string]any)
		out = append(out, m["channel"].(string)+":"+m["status"].(string))
	}
	return strings.Join(out, " ")
}

// TestWorkflows drives the workflow routes through the gateway to the real verification and
// accounts services: the silent step through the sandbox operator, a Wi-Fi phone falling back
// to an SMS code, the policy's roles, and the attacks: no credential, another client's
// workflow, a MEMBER writing the policy, brute force of a code, a replayed Idempotency-Key.
func TestWorkflows(t *testing.T) {
	f := start2(t)
	c := f.accounts.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX)
	other := f.accounts.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX)
	const number = "+971501234567"
	startBody := `{"mobileNumber":"` + number + `","locale":"ar-AE"}`

	// No credential: 401, nothing started.
	if a := f.do(t, call{method: "POST", path: "/v1/api/workflows", body: startBody}); a.status != http.StatusUnauthorized {
		t.Fatalf("no credential: %d %s", a.status, a.body)
	}
	// A malformed number: 400 on the field.
	if a := f.do(t, call{method: "POST", path: "/v1/api/workflows", headers: keyHeaders(c), body: `{"mobileNumber":"0501234567"}`}); a.status != http.StatusBadRequest || !strings.Contains(string(a.body), "mobileNumber") {
		t.Fatalf("bad number: %d %s", a.status, a.body)
	}

	// Start, replayed with the same Idempotency-Key: one workflow.
	idem := with(keyHeaders(c), "Idempotency-Key", "start-1")
	first := f.do(t, call{method: "POST", path: "/v1/api/workflows", headers: idem, body: startBody})
	if first.status != http.StatusOK {
		t.Fatalf("start: %d %s", first.status, first.body)
	}
	w := workflowOf(t, first)
	id, _ := w["workflowId"].(string)
	if w["status"] != "IN_PROGRESS" || stepsOf(w) != "SILENT:PENDING" || w["mobileNumber"] != "+97150*****67" || w["country"] != "AE" {
		t.Fatalf("started: %s", first.body)
	}
	again := f.do(t, call{method: "POST", path: "/v1/api/workflows", headers: idem, body: startBody})
	if again.status != http.StatusOK || workflowOf(t, again)["workflowId"] != id || again.headers.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replayed start: %d %s %v", again.status, again.body, again.headers)
	}

	// Another client's workflow id: 404 on every route, the workflow unchanged.
	for _, cl := range []call{
		{method: "GET", path: "/v1/api/workflows/" + id},
		{method: "POST", path: "/v1/api/workflows/" + id + "/code", body: `{"code":"123456"}`},
		{method: "POST", path: "/v1/api/workflows/" + id + "/resend", body: `{}`},
		{method: "POST", path: "/v1/api/workflows/" + id + "/silent", body: `{"encryptedMobileNumber":"x","operatorId":"sandbox","serviceType":"HEADER_ENRICHMENT"}`},
	} {
		cl.headers = keyHeaders(other)
		if a := f.do(t, cl); a.status != http.StatusNotFound {
			t.Errorf("%s %s by another client: %d %s", cl.method, cl.path, a.status, a.body)
		}
	}

	// The silent step through the sandbox operator: the network vouches for the number.
	token := f.data(t, call{method: "POST", path: "/v1/api/me/sdk-tokens", headers: meHeaders(c), body: `{"label":"app"}`})["sdkToken"].(string)
	blob := f.sdkSession(t, c, token, number)
	a := f.do(t, call{method: "POST", path: "/v1/api/workflows/" + id + "/silent", headers: keyHeaders(c),
		body: `{"encryptedMobileNumber":"` + blob + `","operatorId":"sandbox","serviceType":"HEADER_ENRICHMENT"}`})
	if a.status != http.StatusOK {
		t.Fatalf("silent: %d %s", a.status, a.body)
	}
	w = workflowOf(t, a)
	if w["status"] != "VERIFIED" || w["decidedBy"] != "SILENT" || stepsOf(w) != "SILENT:VERIFIED" {
		t.Fatalf("silent verified: %s", a.body)
	}
	// Its total is what its verification was charged (under the verification's own debit),
	// shown on the silent step too.
	silent := w["steps"].([]any)[0].(map[string]any)
	v := f.data(t, call{method: "GET", path: "/v1/api/verifications/" + silent["verificationId"].(string), headers: keyHeaders(c)})
	if vc, _ := v["charged"].(float64); vc <= 0 || w["charged"] != vc || silent["charged"] != vc {
		t.Fatalf("a workflow decided by its silent step: charged %v, its step %v, its verification %v", w["charged"], silent["charged"], v["charged"])
	}

	// A phone on Wi-Fi: no network identity, the SMS step takes over.
	wifi := workflowOf(t, f.do(t, call{method: "POST", path: "/v1/api/workflows", headers: keyHeaders(c), body: startBody}))
	a = f.do(t, call{method: "POST", path: "/v1/api/workflows/" + wifi["workflowId"].(string) + "/silent", headers: keyHeaders(c),
		body: `{"encryptedMobileNumber":"` + f.sdkSession(t, c, token, "") + `","operatorId":"sandbox","serviceType":"HEADER_ENRICHMENT"}`})
	if w := workflowOf(t, a); a.status != http.StatusOK || w["status"] != "IN_PROGRESS" || stepsOf(w) != "SILENT:UNDETERMINED SMS_OTP:QUEUED" ||
		w["attemptsLeft"] != float64(5) || w["codeExpiresAt"] == nil {
		t.Fatalf("wi-fi: %d %s", a.status, a.body)
	}
	if strings.Contains(string(a.body), `"code"`) {
		t.Fatalf("the answer names a code: %s", a.body)
	}
	// A resend within the cooldown: 429 with Retry-After.
	if a := f.do(t, call{method: "POST", path: "/v1/api/workflows/" + wifi["workflowId"].(string) + "/resend", headers: keyHeaders(c), body: `{}`}); a.status != http.StatusTooManyRequests || a.headers.Get("Retry-After") == "" {
		t.Fatalf("resend in the cooldown: %d %s", a.status, a.body)
	}

	// The policy: read by a MEMBER, written by an ADMIN only, validated.
	member := f.data(t, call{method: "POST", path: "/v1/api/me/api-keys", headers: meHeaders(c), body: `{"name":"reader","role":"MEMBER"}`})["apiKey"].(string)
	got := f.data(t, call{method: "GET", path: "/v1/api/me/workflow-policy", headers: map[string]string{"X-API-KEY": member}})
	if eff, _ := got["effective"].(map[string]any); eff == nil || eff["codeLength"] != float64(6) || eff["maxAttempts"] != float64(5) {
		t.Fatalf("the default policy: %v", got)
	}
	// Codes of 10 digits in AE: three guesses below hit the code once in 3e9 runs.
	policy := `{"channels":["SMS_OTP"],"maxAttempts":3,"countries":{"AE":{"codeLength":10}}}`
	if a := f.do(t, call{method: "PUT", path: "/v1/api/me/workflow-policy", headers: map[string]string{"X-API-KEY": member}, body: policy}); a.status != http.StatusForbidden {
		t.Fatalf("a MEMBER wrote the policy: %d %s", a.status, a.body)
	}
	if a := f.do(t, call{method: "PUT", path: "/v1/api/me/workflow-policy", headers: meHeaders(c), body: `{"codeLength":12}`}); a.status != http.StatusBadRequest || !strings.Contains(string(a.body), "codeLength") {
		t.Fatalf("an invalid policy: %d %s", a.status, a.body)
	}
	if a := f.do(t, call{method: "PUT", path: "/v1/api/me/workflow-policy", headers: meHeaders(c), body: `{"countries":{"XX":{"codeLength":6}}}`}); a.status != http.StatusBadRequest {
		t.Fatalf("an unknown country: %d %s", a.status, a.body)
	}
	if a := f.do(t, call{method: "PUT", path: "/v1/api/me/workflow-policy", headers: meHeaders(c), body: policy}); a.status != http.StatusOK {
		t.Fatalf("the ADMIN's policy: %d %s", a.status, a.body)
	}
	got = f.data(t, call{method: "GET", path: "/v1/api/me/workflow-policy", headers: map[string]string{"X-API-KEY": member}})
	if p := got["policy"].(map[string]any); p["maxAttempts"] != float64(3) || p["countries"].(map[string]any)["AE"].(map[string]any)["codeLength"] != float64(10) {
		t.Fatalf("the policy read back: %v", got)
	}
	if p := f.data(t, call{method: "GET", path: "/v1/api/me/workflow-policy", headers: meHeaders(other)}); p["policy"].(map[string]any)["maxAttempts"] != nil {
		t.Fatalf("another client reads this client's policy: %v", p)
	}

	// Brute force of a code through the backend: FAILED after maxAttempts, nothing more taken.
	bf := workflowOf(t, f.do(t, call{method: "POST", path: "/v1/api/workflows", headers: keyHeaders(c), body: startBody}))
	bfID := bf["workflowId"].(string)
	if stepsOf(bf) != "SMS_OTP:QUEUED" {
		t.Fatalf("the policy's channels: %v", bf)
	}
	guesses := []string{"0000000000", "1111111111", "2222222222"}
	for i, g := range guesses {
		a := f.do(t, call{method: "POST", path: "/v1/api/workflows/" + bfID + "/code", headers: keyHeaders(c), body: `{"code":"` + g + `"}`})
		w := workflowOf(t, a)
		want := "IN_PROGRESS"
		if i == len(guesses)-1 {
			want = "FAILED"
		}
		if a.status != http.StatusOK || w["status"] != want || w["attemptsLeft"] != float64(len(guesses)-1-i) {
			t.Fatalf("guess %d: %d %s", i+1, a.status, a.body)
		}
	}
	if w := f.data(t, call{method: "GET", path: "/v1/api/workflows/" + bfID, headers: keyHeaders(c)}); w["status"] != "FAILED" || w["reason"] != "TOO_MANY_ATTEMPTS" {
		t.Fatalf("after the guesses: %v", w)
	}
	if a := f.do(t, call{method: "POST", path: "/v1/api/workflows/" + bfID + "/code", headers: keyHeaders(c), body: `{"code":"3333333333"}`}); a.status != http.StatusConflict {
		t.Fatalf("a guess after the last: %d %s", a.status, a.body)
	}

	// Usage: the client's steps by channel, country and status, read by a MEMBER.
	u := f.data(t, call{method: "GET", path: "/v1/api/me/usage/workflows", headers: map[string]string{"X-API-KEY": member}})
	totals := u["totals"].(map[string]any)
	byDim := map[string]map[string]float64{}
	for _, b := range totals["breakdowns"].([]any) {
		b := b.(map[string]any)
		m := map[string]float64{}
		for _, k := range b["buckets"].([]any) {
			k := k.(map[string]any)
			m[k["value"].(string)] = k["count"].(float64)
		}
		byDim[b["dimension"].(string)] = m
	}
	// Steps: the silent verified one, the Wi-Fi one's silent and SMS, the brute-forced SMS.
	if totals["count"] != float64(4) || byDim["channel"]["SILENT"] != 2 || byDim["channel"]["SMS_OTP"] != 2 || byDim["country"]["AE"] != 4 ||
		byDim["status"]["VERIFIED"] != 1 || byDim["status"]["FAILED"] != 1 {
		t.Fatalf("usage: %v", totals)
	}
	// Two workflows ended (the silent one verified, the brute-forced one failed), every step
	// change an event, each as docs/events.schema.json says.
	if seen := checkWorkflowEvents(t, f); seen["verification.workflow.completed"] != 2 || seen["verification.step"] < 6 {
		t.Fatalf("workflow events: %v", seen)
	}

	// The list (the console's): paged, filtered, masked, the client's own only, read by a MEMBER.
	list := func(h map[string]string, query string) (ids []string, total float64) {
		t.Helper()
		d := f.data(t, call{method: "GET", path: "/v1/api/workflows" + query, headers: h})
		for _, it := range d["items"].([]any) {
			w := it.(map[string]any)
			if w["mobileNumber"] == number || len(w["steps"].([]any)) == 0 {
				t.Fatalf("a listed workflow: %v", w)
			}
			ids = append(ids, w["workflowId"].(string))
		}
		return ids, d["totalItems"].(float64)
	}
	member2 := map[string]string{"X-API-KEY": member, "X-CLIENT-ID": c.ID}
	if _, total := list(member2, ""); total != 3 {
		t.Fatalf("the client's workflows: %v", total)
	}
	if ids, total := list(member2, "?status=FAILED&channel=SMS_OTP&country=AE"); total != 1 || ids[0] != bfID {
		t.Fatalf("the failed SMS workflow: %v %v", ids, total)
	}
	if ids, total := list(member2, "?size=1&page=1"); total != 3 || len(ids) != 1 {
		t.Fatalf("a page of one: %v %v", ids, total)
	}
	if _, total := list(keyHeaders(other), ""); total != 0 {
		t.Fatalf("another client sees %v workflows", total)
	}
	if a := f.do(t, call{method: "GET", path: "/v1/api/workflows?channel=FAX", headers: member2}); a.status != http.StatusBadRequest {
		t.Fatalf("an unknown channel: %d %s", a.status, a.body)
	}
}

// TestWorkflowCodeOnThePage: the end user types the code on the client's page, which checks it
// through the browser transaction the workflow was started for, bound to the client's web
// origins like a capture. Attacks: another page's origin, no origin, another client's
// transaction, brute force through the page (FAILED after the policy's attempts).
func TestWorkflowCodeOnThePage(t *testing.T) {
	f := start2(t)
	const shop, mallory = "https://shop.example", "https://mallory.example"
	c := f.accounts.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX)
	f.data(t, call{method: "PUT", path: "/v1/api/me/web-origins", headers: meHeaders(c), body: `{"origins":["https://shop.example"]}`})
	other := f.accounts.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX)
	f.data(t, call{method: "PUT", path: "/v1/api/me/web-origins", headers: meHeaders(other), body: `{"origins":["https://other.example"]}`})
	// Codes of 10 digits: three guesses below hit the code once in 3e9 runs.
	f.data(t, call{method: "PUT", path: "/v1/api/me/workflow-policy", headers: meHeaders(c), body: `{"channels":["SMS_OTP"],"maxAttempts":3,"codeLength":10}`})
	open := func(cl apptest.Client) string {
		return f.data(t, call{method: "POST", path: "/v1/api/opportunity", headers: keyHeaders(cl),
			body: `{"serviceCode":"VERIFY","metadataId":"signup-1"}`})["transactionId"].(string)
	}
	tr, foreign, bare := open(c), open(other), open(c)
	startFor := func(tx string) answer {
		return f.do(t, call{method: "POST", path: "/v1/api/workflows", headers: keyHeaders(c),
			body: `{"mobileNumber":"+971501234567","transactionId":"` + tx + `"}`})
	}
	if a := startFor(foreign); a.status != http.StatusBadRequest || !strings.Contains(string(a.body), "transactionId") {
		t.Fatalf("a workflow for another client's transaction: %d %s", a.status, a.body)
	}
	a := startFor(tr)
	if w := workflowOf(t, a); a.status != http.StatusOK || w["transactionId"] != tr || stepsOf(w) != "SMS_OTP:QUEUED" {
		t.Fatalf("start: %d %s", a.status, a.body)
	}
	if a := startFor(tr); a.status != http.StatusConflict {
		t.Fatalf("a second workflow for the transaction: %d %s", a.status, a.body)
	}

	page := func(tx, origin, code string) answer {
		h := map[string]string{}
		if origin != "" {
			h["Origin"] = origin
		}
		return f.do(t, call{method: "POST", path: "/v1/api/web/transactions/" + tx + "/code", headers: h, body: `{"code":"` + code + `"}`})
	}
	for name, a := range map[string]answer{
		"no Origin":                    page(tr, "", "0000000000"),
		"the attacker's page":          page(tr, mallory, "0000000000"),
		"another client's transaction": page(foreign, shop, "0000000000"),
		"an unknown transaction":       page("00000000-0000-4000-8000-000000000000", shop, "0000000000"),
	} {
		if a.status != http.StatusForbidden || a.headers.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: %d %s, want 403 without a CORS grant", name, a.status, a.body)
		}
	}
	if a := page(bare, shop, "0000000000"); a.status != http.StatusNotFound {
		t.Fatalf("a transaction without a workflow: %d %s", a.status, a.body)
	}
	// The page reads whether a code is expected, and asks for another, on the same binding.
	read := func(tx, origin string) answer {
		return f.do(t, call{method: "GET", path: "/v1/api/web/transactions/" + tx + "/workflow", headers: map[string]string{"Origin": origin}})
	}
	resend := func(tx, origin string) answer {
		return f.do(t, call{method: "POST", path: "/v1/api/web/transactions/" + tx + "/resend", headers: map[string]string{"Origin": origin}, body: `{}`})
	}
	for name, a := range map[string]answer{
		"a read from the attacker's page":   read(tr, mallory),
		"a resend from the attacker's page": resend(tr, mallory),
		"a read of another client's":        read(foreign, shop),
	} {
		if a.status != http.StatusForbidden || a.headers.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: %d %s, want 403 without a CORS grant", name, a.status, a.body)
		}
	}
	if a := read(bare, shop); a.status != http.StatusNotFound {
		t.Fatalf("a read of a transaction without a workflow: %d %s", a.status, a.body)
	}
	if got := endUserAddress(t, f, tr); got != "" {
		t.Fatalf("the workflow has an end-user address %q before any page's call reached it", got)
	}
	a = read(tr, shop)
	if w := dataOf(t, a); a.status != http.StatusOK || w["status"] != "IN_PROGRESS" || w["codeExpected"] != true || w["channel"] != "SMS_OTP" ||
		w["attemptsLeft"] != float64(3) || w["codeExpiresAt"] == nil || a.headers.Get("Access-Control-Allow-Origin") != shop {
		t.Fatalf("the page's read: %d %s", a.status, a.body)
	}
	if strings.Contains(string(a.body), "mobileNumber") || strings.Contains(string(a.body), "steps") {
		t.Fatalf("the page's read says more than the page needs: %s", a.body)
	}
	// The start gave no endUserIp: the page's address, as the gateway resolved it (the test's
	// loopback socket, no trusted proxy), became the workflow's end-user address, the pumping
	// budget's key for the SMS the page's calls begin.
	if got := endUserAddress(t, f, tr); got != "127.0.0.1" {
		t.Fatalf("the workflow's end-user address after the page's read: %q, want the page's", got)
	}
	if a := resend(tr, shop); a.status != http.StatusTooManyRequests || a.headers.Get("Retry-After") == "" {
		t.Fatalf("a resend on the page in the cooldown: %d %s", a.status, a.body)
	}
	// The refused calls above spent no attempt.
	for i, guess := range []string{"1111111111", "2222222222", "3333333333"} {
		a := page(tr, shop, guess)
		w := workflowOf(t, a)
		want := "IN_PROGRESS"
		if i == 2 {
			want = "FAILED"
		}
		if a.status != http.StatusOK || w["status"] != want || w["attemptsLeft"] != float64(2-i) || a.headers.Get("Access-Control-Allow-Origin") != shop {
			t.Fatalf("guess %d on the page: %d %s %v", i+1, a.status, a.body, a.headers)
		}
		if strings.Contains(string(a.body), "mobileNumber") {
			t.Fatalf("the page learns the number: %s", a.body)
		}
	}
	if a := page(tr, shop, "4444444444"); a.status != http.StatusConflict {
		t.Fatalf("a guess after the last: %d %s", a.status, a.body)
	}
	if a := read(tr, shop); a.status != http.StatusOK || dataOf(t, a)["status"] != "FAILED" || dataOf(t, a)["codeExpected"] == true {
		t.Fatalf("the page's read of the failed workflow: %d %s", a.status, a.body)
	}
	if a := resend(tr, shop); a.status != http.StatusConflict {
		t.Fatalf("a resend after the last guess: %d %s", a.status, a.body)
	}
	// The workflow's events: its SMS step queued, then failed, and the workflow failed.
	if seen := checkWorkflowEvents(t, f); seen["verification.step"] < 2 || seen["verification.workflow.completed"] != 1 {
		t.Fatalf("workflow events: %v", seen)
	}
}

// endUserAddress is the end-user address verification keeps on the workflow of a browser
// transaction ("" for none), read from its own database.
func endUserAddress(t *testing.T, f *full, transactionID string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.ver.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var addr *string
	if err := conn.QueryRow(ctx, `SELECT host(end_user_address) FROM verification.workflows WHERE transaction_id = $1`, transactionID).Scan(&addr); err != nil {
		t.Fatal(err)
	}
	if addr == nil {
		return ""
	}
	return *addr
}

// checkWorkflowEvents validates every workflow event verification wrote (its outbox jobs, in
// its own database) against docs/events.schema.json, and answers how many there were by type.
func checkWorkflowEvents(t *testing.T, f *full) map[string]int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.ver.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT args FROM verification.river_job WHERE kind = $1 ORDER BY id`, outbox.Kind)
	if err != nil {
		t.Fatal(err)
	}
	raws, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, raw := range raws {
		var a outbox.Args
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatal(err)
		}
		for _, ev := range outbox.Events(a.Events) {
			if !strings.HasPrefix(ev.Type, "verification.step") && ev.Type != "verification.workflow.completed" {
				continue
			}
			body, err := ev.Body()
			if err != nil {
				t.Fatal(err)
			}
			if err := harness.ValidateEvent(string(body)); err != nil {
				t.Errorf("event %s does not match docs/events.schema.json: %v", body, err)
			}
			seen[ev.Type]++
		}
	}
	return seen
}

// TestWorkflowSwapChecks: a workflow's SIM-swap and device-swap checks through the gateway, the
// real services and a fake operator offering both CAMARA APIs: the answer, the workflow read
// back and the events carry each check's result and time. A line whose device moved an hour
// ago, its SIM unchanged, fails under a device-swap BLOCK (DEVICE_SWAPPED) while the SIM check,
// reported, says NOT_SWAPPED; a clean line goes on with both NOT_SWAPPED.
func TestWorkflowSwapChecks(t *testing.T) {
	secret := "swap-" + uuid.NewString() // made at run time: no literal looks like a credential
	fake, err := sandboxcamara.Start("127.0.0.1:0", sandboxcamara.Options{Clients: []sandboxcamara.Client{{ID: "mnv", Secret: secret}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	const moved, clean = "+447400900667", "+447400900668"
	fake.SetLine(moved, sandboxcamara.Line{DeviceChange: time.Now().Add(-time.Hour)})
	dir := t.TempDir()
	registry := filepath.Join(dir, "operators.yaml")
	if err := os.WriteFile(filepath.Join(dir, "swap.secret"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(registry, []byte(`operators:
  - id: sandbox
    name: mnv sandbox
    country: ZZ
    methods: [HEADER_ENRICHMENT]
    sandbox: true
    headerEnrichment: {trustedRanges: ["127.0.0.0/8"], numberHeader: X-Mnv-Sandbox-Msisdn}
    swap:
      discoveryUrl: `+fake.DiscoveryURL()+`
      apiRoot: `+fake.URL+`
      clientId: mnv
      clientAuth: client_secret_basic
      clientSecretFile: swap.secret
      grant: client_credentials
      simSwap: v2
      deviceSwap: v1
`), 0o600); err != nil {
		t.Fatal(err)
	}
	f := startEditing(t, apptest.Logger(t), func(c *verificationapp.Config) { c.OperatorsFile = registry })
	c := f.accounts.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX)
	f.data(t, call{method: "PUT", path: "/v1/api/me/workflow-policy", headers: meHeaders(c),
		body: `{"smsCountries":["GB"],"simSwap":{"mode":"REPORT"},"deviceSwap":{"mode":"BLOCK","maxAgeHours":24}}`})
	// A device-swap age out of range is 400 on its field.
	if a := f.do(t, call{method: "PUT", path: "/v1/api/me/workflow-policy", headers: meHeaders(c), body: `{"deviceSwap":{"maxAgeHours":2401}}`}); a.status != http.StatusBadRequest || !strings.Contains(string(a.body), "deviceSwap.maxAgeHours") {
		t.Fatalf("a device-swap age of 2401 hours: %d %s", a.status, a.body)
	}
	eff := f.data(t, call{method: "GET", path: "/v1/api/me/workflow-policy", headers: meHeaders(c)})["effective"].(map[string]any)
	if d, _ := eff["deviceSwap"].(map[string]any); d["mode"] != "BLOCK" || d["maxAgeHours"] != float64(24) {
		t.Fatalf("the effective device swap: %v", eff["deviceSwap"])
	}
	for _, tt := range []struct {
		number, status, reason, steps, sim, device string
	}{
		{moved, "FAILED", "DEVICE_SWAPPED", "", "NOT_SWAPPED", "SWAPPED"},
		{clean, "IN_PROGRESS", "", "SILENT:PENDING", "NOT_SWAPPED", "NOT_SWAPPED"},
	} {
		a := f.do(t, call{method: "POST", path: "/v1/api/workflows", headers: keyHeaders(c), body: `{"mobileNumber":"` + tt.number + `"}`})
		if a.status != http.StatusOK {
			t.Fatalf("start %s: %d %s", tt.number, a.status, a.body)
		}
		started := workflowOf(t, a)
		read := f.data(t, call{method: "GET", path: "/v1/api/workflows/" + started["workflowId"].(string), headers: keyHeaders(c)})
		for name, w := range map[string]map[string]any{"started": started, "read back": read} {
			reason, _ := w["reason"].(string)
			if w["status"] != tt.status || reason != tt.reason || stepsOf(w) != tt.steps || w["simSwap"] != tt.sim || w["deviceSwap"] != tt.device ||
				w["simCheckedAt"] == nil || w["deviceCheckedAt"] == nil {
				t.Fatalf("%s %s: %v", tt.number, name, w)
			}
		}
	}
	// The failed workflow's completion and every step change, as docs/events.schema.json says
	// (which asks for deviceSwap and deviceCheckedAt).
	if seen := checkWorkflowEvents(t, f); seen["verification.workflow.completed"] != 1 || seen["verification.step"] != 1 {
		t.Fatalf("workflow events: %v", seen)
	}
}
