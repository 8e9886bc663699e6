package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	mathrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/redistest"
	"github.com/mnvhq/mnv/services/platform/testkit/sandboxcamara"
	"github.com/mnvhq/mnv/tests/harness"
)

// workflowAnswer is what these tests read of a workflow.
type workflowAnswer struct {
	WorkflowID   string          `json:"workflowId"`
	Status       string          `json:"status"`
	Reason       *string         `json:"reason"`
	SIMSwap      string          `json:"simSwap"`
	SIMCheckedAt *string         `json:"simCheckedAt"`
	Charged      json.RawMessage `json:"charged"`
	Steps        []struct {
		Channel string  `json:"channel"`
		Status  string  `json:"status"`
		Reason  *string `json:"reason"`
	} `json:"steps"`
}

// steps is "CHANNEL:STATUS[:REASON] …".
func (w workflowAnswer) steps() string {
	var out []string
	for _, s := range w.Steps {
		x := s.Channel + ":" + s.Status
		if s.Reason != nil {
			x += ":" + *s.Reason
		}
		out = append(out, x)
	}
	return strings.Join(out, " ")
}

// charged is the answer's charged as text (an int64 may come as a JSON string).
func (w workflowAnswer) charged() string { return strings.Trim(string(w.Charged), `"`) }

func (w workflowAnswer) reason() string {
	if w.Reason == nil {
		return ""
	}
	return *w.Reason
}

// guardSuite is TestWorkflowGuards' own suite: a Redis shared by the budgets and counts, a
// registry whose GB operator answers CAMARA SIM Swap from a fake (two-legged), verification's
// metrics scraped, webhooks to a loopback receiver, and a prefix budget of 3.
type guardSuite struct {
	s           *harness.Suite
	fake        *sandboxcamara.Fake
	metricsAddr string
	// run makes this run's prefixes its own: the prefix budgets and counts live in Redis
	// beyond the suite, keyed by prefix alone (10 digits here, MNV_PUMPING_PREFIX_DIGITS).
	run int
}

// number is the i-th (0–99) GB mobile number of prefix k (0–99) of this run: +44740 k run i,
// its prefix +44740 k run.
func (g guardSuite) number(k, i int) string { return fmt.Sprintf("+44740%02d%03d%02d", k, g.run, i) }

func startGuardSuite(t *testing.T) guardSuite {
	t.Helper()
	secret := crypto.NewSecret()
	fake, err := sandboxcamara.Start("127.0.0.1:0", sandboxcamara.Options{Clients: []sandboxcamara.Client{{ID: "mnv-e2e-swap", Secret: secret}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	dir := t.TempDir()
	registry := filepath.Join(dir, "operators.yaml")
	files := map[string]string{
		"swap.secret": secret + "\n",
		"operators.yaml": fmt.Sprintf(`operators:
  - id: gb-swap
    name: GB operator with SIM Swap
    country: GB
    methods: [HEADER_ENRICHMENT]
    headerEnrichment: {trustedRanges: ["192.0.2.0/24"], numberHeader: X-MSISDN}
    swap:
      discoveryUrl: %s
      apiRoot: %s
      clientId: mnv-e2e-swap
      clientAuth: client_secret_basic
      clientSecretFile: swap.secret
      grant: client_credentials
      simSwap: v2
`, fake.DiscoveryURL(), fake.URL),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	metricsAddr, err := harness.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	env := append(append(append([]string{}, mainEnv...), webhookEnv...), "MNV_REDIS_URL="+redistest.URL(t))
	s := ownSuite(t, harness.Options{Env: env, ProcessEnv: map[string][]string{"verification": {
		"MNV_OPERATORS_FILE=" + registry, "MNV_METRICS_ADDR=" + metricsAddr,
		"MNV_PUMPING_PREFIX_RATE=0.001", "MNV_PUMPING_PREFIX_BURST=3", "MNV_PUMPING_PREFIX_DIGITS=10",
	}}})
	return guardSuite{s: s, fake: fake, metricsAddr: metricsAddr, run: mathrand.IntN(1000)}
}

func (g guardSuite) client(t *testing.T, features string) harness.Client {
	t.Helper()
	c, err := g.s.CreateClient(context.Background(), 1000, "--features", features)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (g guardSuite) policy(t *testing.T, c harness.Client, policy string) {
	t.Helper()
	expect(t, g.s, http.StatusOK, "PUT", "/v1/api/me/workflow-policy", keyOf(c), policy)
}

func (g guardSuite) start(t *testing.T, c harness.Client, number string) workflowAnswer {
	t.Helper()
	var w workflowAnswer
	expect(t, g.s, http.StatusOK, "POST", "/v1/api/workflows", keyOf(c), `{"mobileNumber":"`+number+`"}`).decode(t, &w)
	return w
}

// metric is the sum of the series of name at verification's /metrics.
func (g guardSuite) metric(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + g.metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var total float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		total += v
	}
	return total
}

// TestWorkflowGuards: the attacks on a workflow's SMS step, through the real binaries,
// PostgreSQL and Redis: a recent SIM swap under each policy mode, a premium-prefix burst, a
// number outside the allow-list, a landline, a prefix spent by two clients, another client's
// workflow. No SMS is sent here: an allowed SMS step stays QUEUED (no SMS provider is wired),
// which is what the guards decide before.
func TestWorkflowGuards(t *testing.T) {
	g := startGuardSuite(t)

	t.Run("a recent SIM swap: each mode's outcome on the answer and the event", func(t *testing.T) {
		c := g.client(t, "VERIFY")
		rc := harness.StartReceiver(t)
		hook(t, g.s, rc, c, "/swap", harness.ReceiverConfig{})
		cases := []struct {
			mode, number string
			// want: the workflow's status, reason and steps right after the start.
			status, reason, steps string
			// event: the event that carries the check (the first of the workflow).
			event string
		}{
			{"BLOCK", g.number(1, 1), "FAILED", "SIM_SWAPPED", "", "verification.workflow.completed"},
			{"FALLBACK", g.number(1, 2), "IN_PROGRESS", "", "SMS_OTP:QUEUED", "verification.step"},
			{"REPORT", g.number(1, 3), "IN_PROGRESS", "", "SILENT:PENDING", "verification.step"},
		}
		for _, tc := range cases {
			t.Run(tc.mode, func(t *testing.T) {
				swappedAt := time.Now().Add(-2 * time.Hour)
				g.fake.SetLine(tc.number, sandboxcamara.Line{SIMChange: swappedAt})
				g.policy(t, c, `{"simSwap":{"mode":"`+tc.mode+`","maxAgeHours":24},"smsCountries":["GB"]}`)
				before := time.Now().Add(-time.Second)
				w := g.start(t, c, tc.number)
				if w.Status != tc.status || w.reason() != tc.reason || w.steps() != tc.steps || w.SIMSwap != "SWAPPED" {
					t.Fatalf("answer %s %q [%s] sim %s; want %s %q [%s] SWAPPED", w.Status, w.reason(), w.steps(), w.SIMSwap, tc.status, tc.reason, tc.steps)
				}
				if w.SIMCheckedAt == nil {
					t.Fatal("the answer has no simCheckedAt")
				}
				if at, err := time.Parse(time.RFC3339Nano, *w.SIMCheckedAt); err != nil || at.Before(before) || at.After(time.Now().Add(time.Second)) {
					t.Fatalf("simCheckedAt %q (%v): not the start's", *w.SIMCheckedAt, err)
				}
				var data struct {
					SIMSwap      string  `json:"simSwap"`
					SIMCheckedAt *string `json:"simCheckedAt"`
					Reason       *string `json:"reason"`
				}
				awaitEvent(t, rc, "/swap", tc.event, 30*time.Second, &data, field("workflowId", w.WorkflowID))
				if data.SIMSwap != "SWAPPED" || data.SIMCheckedAt == nil {
					t.Fatalf("%s carries simSwap %q, simCheckedAt %v", tc.event, data.SIMSwap, data.SIMCheckedAt)
				}
				if tc.mode == "BLOCK" && (data.Reason == nil || *data.Reason != "SIM_SWAPPED") {
					t.Fatalf("the completed event's reason %v", data.Reason)
				}
			})
		}
		// A line whose SIM did not change passes under BLOCK, checked.
		g.fake.SetLine(g.number(1, 4), sandboxcamara.Line{SIMChange: time.Now().Add(-30 * 24 * time.Hour)})
		g.policy(t, c, `{"simSwap":{"mode":"BLOCK","maxAgeHours":24},"smsCountries":["GB"]}`)
		if w := g.start(t, c, g.number(1, 4)); w.Status != "IN_PROGRESS" || w.SIMSwap != "NOT_SWAPPED" || w.SIMCheckedAt == nil {
			t.Fatalf("an old swap: %s %s %v", w.Status, w.SIMSwap, w.SIMCheckedAt)
		}
	})

	t.Run("a number outside the allow-list is refused with its reason", func(t *testing.T) {
		c := g.client(t, "VERIFY")
		// No list yet: no SMS anywhere.
		g.policy(t, c, `{"channels":["SMS_OTP"]}`)
		if w := g.start(t, c, g.number(2, 1)); w.Status != "FAILED" || w.reason() != "SMS_BLOCKED" || w.steps() != "SMS_OTP:BLOCKED:COUNTRY_NOT_ALLOWED" {
			t.Fatalf("empty list: %s %q [%s]", w.Status, w.reason(), w.steps())
		}
		g.policy(t, c, `{"channels":["SMS_OTP"],"smsCountries":["FR"]}`)
		if w := g.start(t, c, g.number(2, 2)); w.Status != "FAILED" || w.steps() != "SMS_OTP:BLOCKED:COUNTRY_NOT_ALLOWED" || w.charged() != "0" {
			t.Fatalf("GB, list FR: %s [%s] charged %s", w.Status, w.steps(), w.charged())
		}
		if w := g.start(t, c, "+33612345678"); w.Status != "IN_PROGRESS" || w.steps() != "SMS_OTP:QUEUED" {
			t.Fatalf("FR, list FR: %s [%s]", w.Status, w.steps())
		}
		// The list is validated.
		bad := callSuite(t, g.s, "PUT", "/v1/api/me/workflow-policy", keyOf(c), `{"smsCountries":["GB","GB"]}`)
		if bad.status != http.StatusBadRequest || bad.code() != "INVALID_ARGUMENT" {
			t.Fatalf("a duplicate country: %d %s", bad.status, bad.raw)
		}
	})

	t.Run("a landline is refused", func(t *testing.T) {
		c := g.client(t, "VERIFY")
		g.policy(t, c, `{"channels":["SMS_OTP"],"smsCountries":["GB"]}`)
		if w := g.start(t, c, "+442079460001"); w.Status != "FAILED" || w.steps() != "SMS_OTP:BLOCKED:NOT_MOBILE" {
			t.Fatalf("landline: %s [%s]", w.Status, w.steps())
		}
	})

	t.Run("the prefix budget is spent across clients", func(t *testing.T) {
		a, b := g.client(t, "VERIFY"), g.client(t, "VERIFY")
		for _, c := range []harness.Client{a, b} {
			g.policy(t, c, `{"channels":["SMS_OTP"],"smsCountries":["GB"]}`)
		}
		// The burst of 3 to +4474003…: two from a, one from b; then neither may send.
		for i, c := range []harness.Client{a, a, b} {
			if w := g.start(t, c, g.number(3, i)); w.steps() != "SMS_OTP:QUEUED" {
				t.Fatalf("send %d within the burst: %s [%s]", i+1, w.Status, w.steps())
			}
		}
		for i, c := range []harness.Client{b, a} {
			if w := g.start(t, c, g.number(3, 10+i)); w.steps() != "SMS_OTP:BLOCKED:PREFIX_VELOCITY" {
				t.Fatalf("send past the burst: %s [%s]", w.Status, w.steps())
			}
		}
		// Another prefix has its own budget.
		if w := g.start(t, b, g.number(4, 1)); w.steps() != "SMS_OTP:QUEUED" {
			t.Fatalf("another prefix: %s [%s]", w.Status, w.steps())
		}
	})

	t.Run("the address budget is per client and end-user address (an IPv6 address by its /64)", func(t *testing.T) {
		a, b := g.client(t, "VERIFY"), g.client(t, "VERIFY")
		for _, c := range []harness.Client{a, b} {
			g.policy(t, c, `{"channels":["SMS_OTP"],"smsCountries":["GB"]}`)
		}
		// Each start its own prefix (10–22), so only the address budget (burst 10) is shared.
		n := 0
		startFrom := func(c harness.Client, ip string) workflowAnswer {
			t.Helper()
			n++
			var w workflowAnswer
			body := fmt.Sprintf(`{"mobileNumber":"%s","endUserIp":"%s"}`, g.number(9+n, 1), ip)
			expect(t, g.s, http.StatusOK, "POST", "/v1/api/workflows", keyOf(c), body).decode(t, &w)
			return w
		}
		for i := range 10 {
			ip := "2001:db8:7:1::" + strconv.Itoa(i+1) // one /64, ten addresses
			if w := startFrom(a, ip); w.steps() != "SMS_OTP:QUEUED" {
				t.Fatalf("start %d within the burst: %s [%s]", i+1, w.Status, w.steps())
			}
		}
		if w := startFrom(a, "2001:db8:7:1:ffff::1"); w.steps() != "SMS_OTP:BLOCKED:ADDRESS_VELOCITY" {
			t.Fatalf("11th from the /64: %s [%s]", w.Status, w.steps())
		}
		if w := startFrom(a, "2001:db8:7:2::1"); w.steps() != "SMS_OTP:QUEUED" {
			t.Fatalf("another /64: %s [%s]", w.Status, w.steps())
		}
		if w := startFrom(b, "2001:db8:7:1::1"); w.steps() != "SMS_OTP:QUEUED" {
			t.Fatalf("another client from the same address: %s [%s]", w.Status, w.steps())
		}
		bad := callSuite(t, g.s, "POST", "/v1/api/workflows", keyOf(a), `{"mobileNumber":"+447419900001","endUserIp":"not-an-address"}`)
		if bad.status != http.StatusBadRequest {
			t.Fatalf("an endUserIp that is not an address: %d %s", bad.status, bad.raw)
		}
	})

	t.Run("another client's workflow is 404", func(t *testing.T) {
		owner, other := g.client(t, "VERIFY"), g.client(t, "VERIFY")
		g.policy(t, owner, `{"channels":["SMS_OTP"],"smsCountries":["GB"]}`)
		w := g.start(t, owner, g.number(5, 1))
		for _, r := range []struct{ method, path, body string }{
			{"GET", "/v1/api/workflows/" + w.WorkflowID, ""},
			{"POST", "/v1/api/workflows/" + w.WorkflowID + "/code", `{"code":"123456"}`},
			{"POST", "/v1/api/workflows/" + w.WorkflowID + "/resend", ""},
		} {
			expect(t, g.s, http.StatusNotFound, r.method, r.path, keyOf(other), r.body)
		}
		var again workflowAnswer
		expect(t, g.s, http.StatusOK, "GET", "/v1/api/workflows/"+w.WorkflowID, keyOf(owner), "").decode(t, &again)
		if again.Status != "IN_PROGRESS" || again.steps() != "SMS_OTP:QUEUED" {
			t.Fatalf("the owner's workflow after the other's calls: %s [%s]", again.Status, again.steps())
		}
	})

	// Last: it fills the prefix counts and the logs.
	t.Run("10,000 starts on a premium prefix: all refused, nothing spent, one block, one alert", func(t *testing.T) {
		// A sandbox client: its allow-list is not asked, so the premium rule is what refuses.
		c := g.client(t, "VERIFY,SANDBOX")
		g.policy(t, c, `{"channels":["SMS_OTP"]}`)
		_, ledgerBefore, err := ledgerCharges(t, g.s, c)
		if err != nil {
			t.Fatal(err)
		}
		blockedBefore := g.metric(t, "mnv_pumping_prefixes_blocked_total")
		const starts, workers = 10_000, 16
		premium := fmt.Sprintf("+88161%03d00", g.run) // the prefix: 10 digits
		var next atomic.Int64
		var mu sync.Mutex
		reasons := map[string]int{}
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= starts {
						return
					}
					// Iridium (+8816…), a hundred numbers under this run's prefix (a refused
					// start spends no number budget, so they repeat).
					r, err := send(g.s, "POST", "/v1/api/workflows", keyOf(c), fmt.Sprintf(`{"mobileNumber":"%s%02d"}`, premium, i%100))
					key := ""
					switch {
					case err != nil:
						key = "error: " + err.Error()
					case r.status != http.StatusOK:
						key = fmt.Sprintf("status %d %s", r.status, r.code())
					default:
						var w workflowAnswer
						if err := json.Unmarshal(r.env.Data, &w); err != nil {
							key = "undecodable"
						} else {
							key = w.Status + " " + w.reason() + " [" + w.steps() + "] charged " + w.charged()
						}
					}
					mu.Lock()
					reasons[key]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		want := "FAILED SMS_BLOCKED [SMS_OTP:BLOCKED:PREMIUM_PREFIX] charged 0"
		if len(reasons) != 1 || reasons[want] != starts {
			t.Fatalf("answers %v, want %d × %q", reasons, starts, want)
		}
		_, ledgerAfter, err := ledgerCharges(t, g.s, c)
		if err != nil {
			t.Fatal(err)
		}
		if ledgerAfter != ledgerBefore {
			t.Fatalf("the ledger moved: %d → %d", ledgerBefore, ledgerAfter)
		}
		conn, err := pgx.Connect(context.Background(), g.s.Databases["verification"])
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var rows, prefixRows int
		if err := conn.QueryRow(context.Background(),
			`SELECT count(*), count(*) FILTER (WHERE prefix = $1 AND reason = 'conversion' AND starts >= 200) FROM verification.blocked_prefixes`, premium).
			Scan(&rows, &prefixRows); err != nil {
			t.Fatal(err)
		}
		if rows != 1 || prefixRows != 1 {
			t.Fatalf("blocked prefixes: %d rows, %d of %s; want the one", rows, prefixRows, premium)
		}
		var charged int
		if err := conn.QueryRow(context.Background(),
			`SELECT count(*) FROM verification.workflow_steps WHERE client_id = $1 AND charge_status <> 'NONE'`, c.ID).Scan(&charged); err != nil {
			t.Fatal(err)
		}
		if charged != 0 {
			t.Fatalf("%d steps have a charge", charged)
		}
		if n := g.metric(t, "mnv_pumping_prefixes_blocked_total") - blockedBefore; n != 1 {
			t.Fatalf("mnv_pumping_prefixes_blocked_total rose by %v, want 1", n)
		}
		if n := strings.Count(g.s.Logs("verification"), "pumping: prefix blocked"); n != 1 {
			t.Fatalf("the warn line was written %d times, want once", n)
		}
		if n := g.metric(t, `mnv_pumping_refused_total{reason="PREMIUM_PREFIX"}`); n < starts {
			t.Fatalf("PREMIUM_PREFIX refusals counted %v, want at least %d", n, starts)
		}
	})
}
