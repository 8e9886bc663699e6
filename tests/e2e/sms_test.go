package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/tests/harness"
)

type workflow struct {
	WorkflowID   string `json:"workflowId"`
	Status       string `json:"status"`
	DecidedBy    string `json:"decidedBy"`
	Reason       string `json:"reason"`
	AttemptsLeft int    `json:"attemptsLeft"`
	Charged      int64  `json:"charged"`
	Steps        []struct {
		StepID  string `json:"stepId"`
		Channel string `json:"channel"`
		Status  string `json:"status"`
		Reason  string `json:"reason"`
		Charged int64  `json:"charged"`
	} `json:"steps"`
}

// smsStep is the workflow's last SMS step's id and status.
func (w workflow) smsStep() (id, status string) {
	for _, s := range w.Steps {
		if s.Channel == "SMS_OTP" {
			id, status = s.StepID, s.Status
		}
	}
	return id, status
}

// smsSuite is a suite whose verification sends its SMS to the Node test SMSC (an operator's SMS
// centre, npm's smpp): the real binaries, PostgreSQL and SMPP over TCP.
type smsSuite struct {
	*harness.Suite
	smsc *harness.SMSC
	db   *pgx.Conn
}

func startSMSSuite(t *testing.T, cfg harness.SMSCConfig, env ...string) *smsSuite {
	t.Helper()
	cfg.SystemID, cfg.Password = "mnv", fmt.Sprintf("p%07d", time.Now().UnixNano()%10000000)
	smsc := harness.StartSMSC(t, cfg)
	verificationEnv := append([]string{
		"MNV_SMPP_ADDR=" + smsc.Addr, "MNV_SMPP_SYSTEM_ID=" + cfg.SystemID, "MNV_SMPP_PASSWORD=" + cfg.Password, "MNV_SMPP_SOURCE=mnv",
		// These bursts test the channel, not the pumping controls (TestWorkflowGuards does):
		// their numbers share a prefix, which the prefix budget would rightly refuse.
		"MNV_PUMPING_PREFIX_RATE=0", "MNV_PUMPING_NUMBER_PER_HOUR=0", "MNV_PUMPING_DAILY_CAP=0",
		// A step in doubt waits this long for its receipt before it is sent again: longer than
		// a rebind plus the receipts' recorder's five seconds on an unknown id, shorter than the
		// default so the bursts that lose answers end sooner.
		"MNV_SMS_IN_DOUBT_HOLD=" + inDoubtHold.String(),
	}, env...)
	s, err := harness.Start(context.Background(), harness.Options{Env: mainEnv, ProcessEnv: map[string][]string{"verification": verificationEnv}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("process logs are in %s", s.LogDir)
		}
		s.Stop()
	})
	return &smsSuite{Suite: s, smsc: smsc, db: dbOf(t, s)}
}

// inDoubtHold is the suites' MNV_SMS_IN_DOUBT_HOLD.
const inDoubtHold = 10 * time.Second

func (s *smsSuite) client(t *testing.T, policy string) harness.Client {
	t.Helper()
	c, err := s.CreateClient(context.Background(), 10000, "--features", "VERIFY,SANDBOX")
	if err != nil {
		t.Fatal(err)
	}
	if r := callSuite(t, s.Suite, "PUT", "/v1/api/me/workflow-policy", meOf(c), policy); r.status != http.StatusOK {
		t.Fatalf("policy: %d %s", r.status, r.raw)
	}
	return c
}

func (s *smsSuite) start(t *testing.T, c harness.Client, number string) workflow {
	t.Helper()
	r := callSuite(t, s.Suite, "POST", "/v1/api/workflows", keyOf(c), fmt.Sprintf(`{"mobileNumber":%q,"locale":"en-GB"}`, number))
	if r.status != http.StatusOK {
		t.Fatalf("start: %d %s", r.status, r.raw)
	}
	var w workflow
	r.decode(t, &w)
	return w
}

func (s *smsSuite) get(t *testing.T, c harness.Client, id string) workflow {
	t.Helper()
	r := callSuite(t, s.Suite, "GET", "/v1/api/workflows/"+id, keyOf(c), "")
	if r.status != http.StatusOK {
		t.Fatalf("get: %d %s", r.status, r.raw)
	}
	var w workflow
	r.decode(t, &w)
	return w
}

func (s *smsSuite) check(t *testing.T, c harness.Client, id, code string) (int, workflow) {
	t.Helper()
	r := callSuite(t, s.Suite, "POST", "/v1/api/workflows/"+id+"/code", keyOf(c), fmt.Sprintf(`{"code":%q}`, code))
	var w workflow
	if r.status == http.StatusOK {
		r.decode(t, &w)
	}
	return r.status, w
}

// eventually polls cond until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// to is the SMSC's submits to number (E.164), answered or not.
func (s *smsSuite) to(number string) []harness.SMSCSubmit {
	var out []harness.SMSCSubmit
	for _, m := range s.smsc.Received() {
		if "+"+m.Dest == number {
			out = append(out, m)
		}
	}
	return out
}

func accepted(ms []harness.SMSCSubmit) int {
	n := 0
	for _, m := range ms {
		if m.Accepted() {
			n++
		}
	}
	return n
}

// mayHaveTaken counts the submits the SMSC took or left unanswered: all but those it refused
// for now (throttled), which the client sends again within one attempt.
func mayHaveTaken(ms []harness.SMSCSubmit) int {
	n := 0
	for _, m := range ms {
		if m.Accepted() || !m.Answered {
			n++
		}
	}
	return n
}

var codeOf = regexp.MustCompile(`^([0-9]{4,10}) is your verification code`)

// code is the one-time code the SMSC took for number: what the handset would show.
func (s *smsSuite) code(t *testing.T, number string) string {
	t.Helper()
	var code string
	eventually(t, 20*time.Second, "an SMS to "+number, func() bool {
		for _, m := range s.to(number) {
			if m.Accepted() {
				if mm := codeOf.FindStringSubmatch(m.Text); mm != nil {
					code = mm[1]
					return true
				}
			}
		}
		return false
	})
	return code
}

// stepCharges are the ledger's debits of a client by reference prefix: workflow steps.
func (s *smsSuite) stepCharges(t *testing.T, clientID string) map[string]int64 {
	t.Helper()
	rows, err := s.db.Query(context.Background(), `SELECT reference, -amount FROM accounts.ledger WHERE client_id = $1 AND kind <> 'TOP_UP'`, clientID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var ref string
		var amount int64
		if err := rows.Scan(&ref, &amount); err != nil {
			t.Fatal(err)
		}
		out[ref] += amount
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sendAttempts is verification's count of submits of a step (docs/architecture.md#sms-over-smpp).
func (s *smsSuite) sendAttempts(t *testing.T, stepID string) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow(context.Background(), `SELECT send_attempts FROM verification.workflow_steps WHERE id = $1`, stepID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

const smsOnly = `{"channels":["SMS_OTP"],"maxAttempts":3,"resendCooldownSeconds":0}`

// TestSMSWorkflow: the SMS channel end to end, through the real binaries and the Node test
// SMSC.
func TestSMSWorkflow(t *testing.T) {
	undeliverable, refused := nextNumber(), nextNumber()
	s := startSMSSuite(t, harness.SMSCConfig{Undeliverable: []string{strings.TrimPrefix(undeliverable, "+")}, Refuse: []string{strings.TrimPrefix(refused, "+")}})
	// A code at the shortest lifetime a policy allows (60 s), started first and checked last, so
	// the other cases run while it ages.
	expiring := s.client(t, `{"channels":["SMS_OTP"],"codeTtlSeconds":60}`)
	expiringNumber := nextNumber()
	expired := s.start(t, expiring, expiringNumber)
	expiresAt := time.Now().Add(60 * time.Second)

	t.Run("Wi-Fi user: silent UNDETERMINED, SMS delivered, code checked, VERIFIED, charged the SMS only", func(t *testing.T) {
		c := s.client(t, `{"channels":["SILENT","SMS_OTP"],"maxAttempts":3}`)
		n := nextNumber()
		w := s.start(t, c, n)
		// On Wi-Fi the SDK's session reaches mnv without the operator's number header.
		sess := openSession(t, s.Suite, c, sdkToken(t, s.Suite, c), nil)
		if sess.Status != "NO_NETWORK_IDENTITY" {
			t.Fatalf("session %+v", sess)
		}
		r := callSuite(t, s.Suite, "POST", "/v1/api/workflows/"+w.WorkflowID+"/silent", keyOf(c),
			fmt.Sprintf(`{"encryptedMobileNumber":%q,"operatorId":"sandbox","serviceType":"HEADER_ENRICHMENT"}`, *sess.EncryptedMobileNumber))
		if r.status != http.StatusOK {
			t.Fatalf("silent: %d %s", r.status, r.raw)
		}
		r.decode(t, &w)
		if len(w.Steps) != 2 || w.Steps[0].Channel != "SILENT" || w.Steps[0].Status != "UNDETERMINED" || w.Steps[0].Charged != 0 {
			t.Fatalf("after the silent step: %+v", w)
		}
		code := s.code(t, n)
		stepID, _ := w.smsStep()
		eventually(t, 20*time.Second, "the receipt makes the step DELIVERED", func() bool {
			_, st := s.get(t, c, w.WorkflowID).smsStep()
			return st == "DELIVERED"
		})
		status, w := s.check(t, c, w.WorkflowID, code)
		if status != http.StatusOK || w.Status != "VERIFIED" || w.DecidedBy != "SMS_OTP" || w.Reason != "CODE_MATCHED" {
			t.Fatalf("check: %d %+v", status, w)
		}
		charges := s.stepCharges(t, c.ID)
		if len(charges) != 1 || charges["workflow-step:"+stepID] != w.Charged || w.Charged != w.Steps[1].Charged {
			t.Fatalf("ledger %v for a workflow charged %d (steps %+v)", charges, w.Charged, w.Steps)
		}
		if got := s.to(n); len(got) != 1 || !got[0].Accepted() || got[0].Source != "mnv" || got[0].RegisteredDelivery&1 != 1 {
			t.Fatalf("the SMSC has %+v", got)
		}
	})

	t.Run("wrong code N times: FAILED, and no further attempt or SMS", func(t *testing.T) {
		c := s.client(t, smsOnly)
		n := nextNumber()
		w := s.start(t, c, n)
		code := s.code(t, n)
		wrong := fmt.Sprintf("%0*d", len(code), 0)
		if wrong == code {
			wrong = fmt.Sprintf("%0*d", len(code), 1)
		}
		for i := range 3 {
			status, got := s.check(t, c, w.WorkflowID, wrong)
			if status != http.StatusOK || (i < 2 && got.Status != "IN_PROGRESS") || (i == 2 && (got.Status != "FAILED" || got.Reason != "TOO_MANY_ATTEMPTS")) {
				t.Fatalf("wrong code %d: %d %+v", i+1, status, got)
			}
		}
		if status, _ := s.check(t, c, w.WorkflowID, code); status != http.StatusConflict {
			t.Fatalf("the right code after the last attempt: %d, want 409", status)
		}
		if got := s.get(t, c, w.WorkflowID); got.Status != "FAILED" {
			t.Fatalf("the workflow is %s", got.Status)
		}
		if got := len(s.to(n)); got != 1 {
			t.Fatalf("%d SMS to the number, want 1", got)
		}
	})

	t.Run("receipt UNDELIV: the step UNDELIVERABLE", func(t *testing.T) {
		c := s.client(t, smsOnly)
		w := s.start(t, c, undeliverable)
		eventually(t, 20*time.Second, "the step UNDELIVERABLE", func() bool {
			_, st := s.get(t, c, w.WorkflowID).smsStep()
			return st == "UNDELIVERABLE"
		})
	})

	t.Run("the SMSC refuses for good: UNDELIVERABLE, not charged", func(t *testing.T) {
		c := s.client(t, smsOnly)
		w := s.start(t, c, refused)
		eventually(t, 20*time.Second, "the workflow FAILED", func() bool { return s.get(t, c, w.WorkflowID).Status == "FAILED" })
		got := s.get(t, c, w.WorkflowID)
		if _, st := got.smsStep(); st != "UNDELIVERABLE" || got.Charged != 0 {
			t.Fatalf("workflow %+v", got)
		}
		var net int64
		for _, v := range s.stepCharges(t, c.ID) {
			net += v // the debit and its refund
		}
		if net != 0 {
			t.Fatalf("a refused SMS cost %d", net)
		}
		if len(s.to(refused)) != 1 {
			t.Fatalf("%d submits of a refused message, want 1 (no retry of a refusal)", len(s.to(refused)))
		}
	})

	t.Run("brute force through the backend route: FAILED after N", func(t *testing.T) {
		c := s.client(t, smsOnly)
		n := nextNumber()
		w := s.start(t, c, n)
		code := s.code(t, n)
		tried, conflicts := 0, 0
		for guess := 0; guess < 50; guess++ {
			g := fmt.Sprintf("%0*d", len(code), guess)
			if g == code {
				continue
			}
			status, _ := s.check(t, c, w.WorkflowID, g)
			switch status {
			case http.StatusOK:
				tried++
			case http.StatusConflict:
				conflicts++
			default:
				t.Fatalf("guess %s: %d", g, status)
			}
		}
		if tried != 3 || conflicts == 0 {
			t.Fatalf("%d guesses counted, %d refused; want 3 and the rest 409", tried, conflicts)
		}
		if status, _ := s.check(t, c, w.WorkflowID, code); status != http.StatusConflict {
			t.Fatalf("the right code after brute force: %d", status)
		}
	})

	t.Run("another client's workflow is 404", func(t *testing.T) {
		owner, other := s.client(t, smsOnly), s.client(t, smsOnly)
		w := s.start(t, owner, nextNumber())
		for _, call := range []struct{ method, path, body string }{
			{"GET", "/v1/api/workflows/" + w.WorkflowID, ""},
			{"POST", "/v1/api/workflows/" + w.WorkflowID + "/code", `{"code":"123456"}`},
			{"POST", "/v1/api/workflows/" + w.WorkflowID + "/resend", `{}`},
		} {
			if r := callSuite(t, s.Suite, call.method, call.path, keyOf(other), call.body); r.status != http.StatusNotFound {
				t.Errorf("%s %s by another client: %d %s", call.method, call.path, r.status, r.raw)
			}
		}
	})

	t.Run("throttled burst: every message taken once", func(t *testing.T) {
		c := s.client(t, smsOnly)
		s.smsc.Throttle(15)
		numbers := s.burst(t, c, 30)
		s.everyTakenOnce(t, numbers)
	})

	t.Run("SMSC dropped mid-burst: every message taken once", func(t *testing.T) {
		c := s.client(t, smsOnly)
		s.smsc.DropAfter(10, "close")
		numbers := s.burst(t, c, 30)
		s.everyTakenOnce(t, numbers)
	})

	t.Run("SMSC reset mid-burst, receipts without a reference: every message taken once", func(t *testing.T) {
		// A reset can lose answers the SMSC wrote: those messages are in doubt. Their receipts
		// (sent again on the next bind, as an operator's SMSC does) settle them before the hold
		// ends (docs/architecture.md#sms-over-smpp); this SMSC echoes no reference, so they are
		// matched by the start of their text. What the SMSC never took is sent again.
		c := s.client(t, smsOnly)
		s.smsc.Post("/config", map[string]bool{"receiptReference": false})
		t.Cleanup(func() { s.smsc.Post("/config", map[string]bool{"receiptReference": true}) })
		s.smsc.DropAfter(10, "reset")
		settledBefore, _ := s.inDoubtLogged()
		numbers := s.burst(t, c, 30)
		s.everyTakenOnce(t, numbers)
		settled, _ := s.inDoubtLogged()
		t.Logf("%d steps in doubt settled by their receipt's text", settled-settledBefore)
	})

	t.Run("expired code: EXPIRED, and the right code no longer matches", func(t *testing.T) {
		code := s.code(t, expiringNumber)
		time.Sleep(time.Until(expiresAt.Add(time.Second)))
		status, w := s.check(t, expiring, expired.WorkflowID, code)
		if status != http.StatusOK || w.Status != "EXPIRED" || w.Reason != "CODE_EXPIRED" {
			t.Fatalf("the right code after its lifetime: %d %+v", status, w)
		}
		if status, _ := s.check(t, expiring, expired.WorkflowID, code); status != http.StatusConflict {
			t.Fatalf("a check of an expired workflow: %d, want 409", status)
		}
	})
}

// burst starts n SMS workflows at once and answers their steps by number.
func (s *smsSuite) burst(t *testing.T, c harness.Client, n int) map[string]string {
	t.Helper()
	numbers := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range n {
		num := nextNumber()
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := send(s.Suite, "POST", "/v1/api/workflows", keyOf(c), fmt.Sprintf(`{"mobileNumber":%q}`, num))
			if err != nil || r.status != http.StatusOK {
				t.Errorf("start: %v %d %s", err, r.status, r.raw)
				return
			}
			var w workflow
			r.decode(t, &w)
			id, _ := w.smsStep()
			mu.Lock()
			numbers[num] = id
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return numbers
}

// everyTakenOnce waits for the SMSC to take a message for every number and for every step to
// be settled (no longer QUEUED: its record or its receipt came, so no held job may still send),
// then holds that the SMSC took each exactly once, and that it read no more submits of a step
// than verification counted attempts of it (a submit the SMSC never took may be sent again).
// It answers how many steps were in doubt (an attempt counted beyond the first).
func (s *smsSuite) everyTakenOnce(t *testing.T, numbers map[string]string) (inDoubt int) {
	t.Helper()
	eventually(t, 90*time.Second, "every message taken and every step settled", func() bool {
		for n, stepID := range numbers {
			if accepted(s.to(n)) == 0 || s.stepStatus(t, stepID) == "QUEUED" {
				return false
			}
		}
		return true
	})
	time.Sleep(500 * time.Millisecond) // room for a double to show
	for n, stepID := range numbers {
		got := s.to(n)
		if accepted(got) != 1 {
			t.Errorf("%s: taken %d times", n, accepted(got))
		}
		attempts := s.sendAttempts(t, stepID)
		if sent := mayHaveTaken(got); sent > attempts {
			t.Errorf("%s: %d submits the SMSC took or left unanswered, %d attempts counted by verification", n, sent, attempts)
		}
		if attempts > 1 {
			inDoubt++
		}
	}
	return inDoubt
}

// stepStatus is a step's status as stored.
func (s *smsSuite) stepStatus(t *testing.T, stepID string) string {
	t.Helper()
	var st string
	if err := s.db.QueryRow(context.Background(), `SELECT status FROM verification.workflow_steps WHERE id = $1`, stepID).Scan(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestSMSBacklogSurvivesKill9: verification is killed with SIGKILL while a backlog of SMS jobs
// is being sent and started again: every message reaches the SMSC exactly once. A message the
// SMSC took but whose record the kill prevented is in doubt; its receipt, which the SMSC sends
// again on the next bind, settles it before the hold ends, so it is not sent again; one the
// SMSC never took is sent after the hold (docs/architecture.md#sms-over-smpp).
func TestSMSBacklogSurvivesKill9(t *testing.T) {
	// The jobs the kill left running are taken for abandoned after 31s (past the SMS job's
	// longest attempt), not two minutes.
	s := startSMSSuite(t, harness.SMSCConfig{ReceiptDelayMs: 50}, "MNV_JOBS_RESCUE_AFTER=31s")
	// Every other receipt carries no reference, so the steps in doubt are matched both by the
	// reference and by the start of the text.
	s.smsc.Post("/config", map[string]string{"receiptReference": "alternate"})
	c := s.client(t, smsOnly)
	numbers := s.burst(t, c, 60)
	eventually(t, 30*time.Second, "the first messages taken", func() bool {
		n := 0
		for _, m := range s.smsc.Received() {
			if m.Accepted() {
				n++
			}
		}
		return n >= 5
	})
	if err := s.Kill("verification", syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	taken := 0
	for _, m := range s.smsc.Received() {
		if m.Accepted() {
			taken++
		}
	}
	if taken >= len(numbers) {
		t.Fatalf("the backlog was gone before the kill (%d taken): the test proves nothing", taken)
	}
	if err := s.Restart("verification"); err != nil {
		t.Fatal(err)
	}
	inDoubt := s.everyTakenOnce(t, numbers)
	copies := map[int]int{} // copies the SMSC took of a message → how many messages
	for n := range numbers {
		copies[accepted(s.to(n))]++
	}
	// A receipt the SMSC sent again: one the kill left unanswered (sent again on the next bind),
	// or one answered with the temporary error (not recorded yet, sent again shortly after).
	unanswered, deferred := 0, 0
	for _, r := range s.smsc.Receipts() {
		switch {
		case r.Status == nil:
			unanswered++
		case !r.Acked:
			deferred++
		}
	}
	settled, resent := s.inDoubtLogged()
	logs := s.Logs("verification")
	t.Logf("%d of %d taken before the kill; copies the SMSC took per message %v; receipts sent again: %d left unanswered by the kill, %d deferred; %d steps in doubt settled by their receipt (%d by reference, %d by text), %d sent again after the hold (%d steps with more than one attempt)",
		taken, len(numbers), copies, unanswered, deferred, settled, strings.Count(logs, `"matched_by":"reference"`), strings.Count(logs, `"matched_by":"text"`), resent, inDoubt)
}

// inDoubtLogged counts verification's logs of steps in doubt settled by a receipt, and of those
// sent again after the hold.
func (s *smsSuite) inDoubtLogged() (settled, resent int) {
	logs := s.Logs("verification")
	return strings.Count(logs, "sms in doubt settled by a delivery receipt"), strings.Count(logs, "sms in doubt: ")
}
