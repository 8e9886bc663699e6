package workflows_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/metricstest"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/outbox"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/store"
	"github.com/mnvhq/mnv/services/verification/internal/verificationtest"
	"github.com/mnvhq/mnv/services/verification/internal/workflows"
)

// ledger stands in for accounts' ledger (another service): a price per variant, once per
// reference, refused when the balance is short, refunds by reference.
type ledger struct {
	mu       sync.Mutex
	balance  int64
	prices   map[string]int64 // by variant; "" the kind's
	debits   map[string]int64 // reference → amount
	refunded map[string]bool
	calls    int
	down     bool
}

func newLedger(balance int64) *ledger {
	return &ledger{balance: balance, prices: map[string]int64{"": 2, "SMS_OTP:GB": 3}, debits: map[string]int64{}, refunded: map[string]bool{}}
}

func (l *ledger) Debit(_ context.Context, c money.Charge) (money.Charged, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.down {
		return money.Charged{}, money.Unknown("debit", errors.New("connection refused"), true)
	}
	if c.Kind != money.KindVerificationStep || !strings.HasPrefix(c.Reference, "workflow-step:") {
		return money.Charged{}, fmt.Errorf("unexpected charge %+v", c)
	}
	if a, ok := l.debits[c.Reference]; ok {
		return money.Charged{Amount: a, BalanceAfter: l.balance, Replayed: true}, nil
	}
	price, ok := l.prices[c.Variant]
	if !ok {
		price = l.prices[""]
	}
	if l.balance < price {
		return money.Charged{}, money.ErrInsufficientBalance
	}
	l.balance -= price
	l.debits[c.Reference] = price
	return money.Charged{EntryID: uuid.NewString(), Amount: price, BalanceAfter: l.balance}, nil
}

func (l *ledger) Refund(_ context.Context, r money.Refund) (money.Refunded, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.debits[r.Reference]
	if !ok {
		return money.Refunded{}, money.ErrNothingToRefund
	}
	if !l.refunded[r.Reference] {
		l.refunded[r.Reference] = true
		l.balance += a
	}
	return money.Refunded{Amount: a, BalanceAfter: l.balance}, nil
}

func (l *ledger) Balance(context.Context, string) (int64, error) { return l.balance, nil }

// net is what the client paid in all: debits less refunds.
func (l *ledger) net() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for ref, a := range l.debits {
		if !l.refunded[ref] {
			n += a
		}
	}
	return n
}

// smsc stands in for an operator's SMS centre (an outside system): it keeps what it was sent,
// once per message id, and refuses or fails on demand.
type smsc struct {
	mu     sync.Mutex
	sent   map[string]workflows.Message
	calls  int
	refuse bool
	fail   bool
	// notSent fails as a provider that knows nothing left (workflows.ErrNotSent).
	notSent bool
	// answerLost takes the message and fails as if its answer were lost (the outcome unknown).
	answerLost bool
	// during runs in Send after the message is taken, before its answer (a receipt overtaking it).
	during func(m workflows.Message)
}

func (s *smsc) Send(_ context.Context, m workflows.Message) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	switch {
	case s.refuse:
		return nil, fmt.Errorf("submit_sm: ESME_RINVDSTADR: %w", workflows.ErrRefused)
	case s.fail:
		return nil, errors.New("connection reset")
	case s.notSent:
		return nil, fmt.Errorf("no session: %w", workflows.ErrNotSent)
	}
	if s.sent == nil {
		s.sent = map[string]workflows.Message{}
	}
	s.sent[m.ID] = m
	if s.answerLost {
		return nil, errors.New("connection reset with the submit in flight")
	}
	if s.during != nil {
		s.mu.Unlock()
		s.during(m)
		s.mu.Lock()
	}
	return []string{"smsc-" + m.ID}, nil
}

// message is what the SMSC took for a step.
func (s *smsc) message(stepID string) workflows.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent[stepID]
}

var codeRE = regexp.MustCompile(`^([0-9]{4,10}) `)

// code is the code the SMSC received for a step.
func (s *smsc) code(t *testing.T, stepID string) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.sent[stepID]
	if !ok {
		t.Fatalf("no SMS sent for step %s", stepID)
	}
	c := codeRE.FindStringSubmatch(m.Text)
	if c == nil {
		t.Fatalf("no code in %q", m.Text)
	}
	return c[1]
}

type swapper struct {
	swapped bool
	err     error
	asked   int
}

func (s *swapper) Check(context.Context, string, time.Duration) (bool, time.Time, error) {
	s.asked++
	return s.swapped, time.Now(), s.err
}

// guard is a pumping guard that refuses with a reason (when set) and records what it was
// asked and the numbers counted as converted.
type guard struct {
	refuse   string
	asked    *[]workflows.SMSRequest
	verified *[]string
}

type refusal string

func (r refusal) Error() string { return "refused: " + string(r) }
func (r refusal) Code() string  { return string(r) }

func (g guard) Allow(_ context.Context, r workflows.SMSRequest) error {
	if g.asked != nil {
		*g.asked = append(*g.asked, r)
	}
	if g.refuse != "" {
		return refusal(g.refuse)
	}
	return nil
}

func (g guard) Verified(_ context.Context, number string) {
	if g.verified != nil {
		*g.verified = append(*g.verified, number)
	}
}

type env struct {
	reg    *prometheus.Registry
	pool   *pgxpool.Pool
	svc    *workflows.Service
	ledger *ledger
	smsc   *smsc
	logs   *bytes.Buffer
	client string
	now    time.Time
	clock  sync.Mutex
}

const gbNumber = "+447400123456"

func newEnv(t *testing.T, balance int64, ports workflows.Ports) *env {
	t.Helper()
	return newEnvConns(t, balance, ports, 8)
}

// newEnvConns is newEnv with a pool of conns connections (a test of concurrent starts).
func newEnvConns(t *testing.T, balance int64, ports workflows.Ports, conns int32) *env {
	t.Helper()
	pool := verificationtest.Database(t, conns)
	queue, err := jobs.New(pool, jobs.Options{Schema: "verification"})
	if err != nil {
		t.Fatal(err)
	}
	keys := verificationtest.NewKeys(t)
	stores := pg.NewStores(pool, func(db pg.DB) workflows.Store { return store.New(db).WithJobs(queue) })
	e := &env{pool: pool, ledger: newLedger(balance), logs: &bytes.Buffer{}, client: uuid.NewString(), now: time.Now().UTC()}
	if ports.SMS == nil {
		e.smsc = &smsc{}
		ports.SMS = e.smsc
	}
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(e.logs), zap.DebugLevel)
	e.reg = prometheus.NewRegistry()
	m, err := workflows.NewMetrics(e.reg)
	if err != nil {
		t.Fatal(err)
	}
	e.svc = workflows.New(stores.Pool(), stores, keys.Vault, keys.Keyring, e.ledger, ports, zap.New(core)).WithMetrics(m)
	e.svc.Now = func() time.Time { e.clock.Lock(); defer e.clock.Unlock(); return e.now }
	return e
}

func (e *env) advance(d time.Duration) { e.clock.Lock(); e.now = e.now.Add(d); e.clock.Unlock() }

func (e *env) setPolicy(t *testing.T, j string) {
	t.Helper()
	p, err := workflows.ParsePolicy([]byte(j))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.SetPolicy(context.Background(), e.client, p, "key:test"); err != nil {
		t.Fatal(err)
	}
}

func (e *env) start(t *testing.T) workflows.Workflow {
	t.Helper()
	w, err := e.svc.Start(context.Background(), workflows.StartRequest{ClientID: e.client, MobileNumber: gbNumber, Locale: "en-GB"})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// work runs the SMS jobs waiting in River's table, as the worker would, each twice (River runs
// a job at least once): it answers the step ids worked.
func (e *env) work(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	rows, err := e.pool.Query(ctx, `SELECT id, args FROM verification.river_job WHERE kind = $1 AND state = 'available' ORDER BY id`, workflows.SMSKind)
	if err != nil {
		t.Fatal(err)
	}
	type job struct {
		id   int64
		args []byte
	}
	var js []job
	for rows.Next() {
		var j job
		if err := rows.Scan(&j.id, &j.args); err != nil {
			t.Fatal(err)
		}
		js = append(js, j)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, j := range js {
		var a workflows.SMSArgs
		if err := json.Unmarshal(j.args, &a); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := e.svc.SendSMS(ctx, a.SMSJob); err != nil {
				t.Fatalf("SendSMS: %v", err)
			}
		}
		if _, err := e.pool.Exec(ctx, `UPDATE verification.river_job SET state = 'completed', finalized_at = now() WHERE id = $1`, j.id); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, a.StepID)
	}
	return steps
}

func (e *env) get(t *testing.T, id string) workflows.Workflow {
	t.Helper()
	w, err := e.svc.Get(context.Background(), e.client, id)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (e *env) check(t *testing.T, id, code string) (workflows.Workflow, error) {
	t.Helper()
	return e.svc.CheckCode(context.Background(), e.client, id, code)
}

// eventTypes lists the events written for the client, in order, with their data.
func (e *env) events(t *testing.T) []string {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT args::text FROM verification.river_job WHERE kind = 'event.forward' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func wrong(code string) string {
	b := []byte(code)
	b[0] = '0' + (b[0]-'0'+1)%10
	return string(b)
}

func steps(w workflows.Workflow) string {
	var b strings.Builder
	for _, s := range w.Steps {
		fmt.Fprintf(&b, "%s:%s ", s.Channel, s.Status)
	}
	return strings.TrimSpace(b.String())
}

// TestWiFiUserFallsBackToSMS: the silent step undetermined (a phone on Wi-Fi), an SMS is
// queued, sent once, delivered, a wrong code costs an attempt, the right one verifies; one
// charge for the one SMS, the code in no log, event, job argument or stored column.
func TestWiFiUserFallsBackToSMS(t *testing.T) {
	e := newEnv(t, 100, workflows.Ports{})
	ctx := context.Background()
	w := e.start(t)
	if w.Status != workflows.InProgress || steps(w) != "SILENT:PENDING" || w.Country != "GB" || w.Masked != "+4474******56" {
		t.Fatalf("started %+v", w)
	}
	w, err := e.svc.SilentResult(ctx, e.client, w.ID, workflows.SilentOutcome{Status: "UNDETERMINED", Reason: "NO_NETWORK_IDENTITY", VerificationID: uuid.NewString()})
	if err != nil {
		t.Fatal(err)
	}
	if steps(w) != "SILENT:UNDETERMINED SMS_OTP:QUEUED" || w.Status != workflows.InProgress {
		t.Fatalf("after the silent step: %s %s", steps(w), w.Status)
	}
	worked := e.work(t)
	if len(worked) != 1 || e.smsc.calls != 1 {
		t.Fatalf("jobs %v, SMSC called %d times; want one job, one send", worked, e.smsc.calls)
	}
	sms := e.smsc.sent[worked[0]]
	if sms.To != gbNumber || sms.ID != worked[0] {
		t.Fatalf("sent %+v", sms)
	}
	code := e.smsc.code(t, worked[0])
	if len(code) != 6 {
		t.Fatalf("code of %d digits", len(code))
	}
	w = e.get(t, w.ID)
	if steps(w) != "SILENT:UNDETERMINED SMS_OTP:SENT" || w.Charged() != 3 {
		t.Fatalf("after the send: %s, charged %d", steps(w), w.Charged())
	}
	var sealed []byte
	if err := e.pool.QueryRow(ctx, `SELECT code_sealed FROM verification.workflows WHERE client_id = $1 AND id = $2`, e.client, w.ID).Scan(&sealed); err != nil || sealed != nil {
		t.Fatalf("the sealed code stayed after the send (%v)", err)
	}
	if err := e.svc.Receipt(ctx, "smsc-"+worked[0], workflows.ReceiptDelivered); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Receipt(ctx, "smsc-unknown", workflows.ReceiptDelivered); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("receipt of an unknown message: %v", err)
	}
	w, err = e.check(t, w.ID, wrong(code))
	if err != nil || w.Status != workflows.InProgress || w.AttemptsLeft() != 4 || steps(w) != "SILENT:UNDETERMINED SMS_OTP:DELIVERED" {
		t.Fatalf("wrong code: %v %s %d %s", err, w.Status, w.AttemptsLeft(), steps(w))
	}
	w, err = e.check(t, w.ID, code)
	if err != nil || w.Status != workflows.Verified || w.DecidedBy != workflows.SMSOTP || w.Reason != workflows.ReasonCodeMatched {
		t.Fatalf("right code: %v %+v", err, w)
	}
	// Single use: the same code again finds the workflow final.
	if _, err := e.check(t, w.ID, code); fault.Find(err, fault.Conflict) == nil {
		t.Fatalf("the code checked twice: %v", err)
	}
	if e.ledger.calls != 1 || e.ledger.net() != 3 || w.Charged() != 3 {
		t.Fatalf("debits %d, paid %d, workflow charged %d; want one debit of 3", e.ledger.calls, e.ledger.net(), w.Charged())
	}
	evs := e.events(t)
	var types []string
	for _, ev := range evs {
		var a outbox.Args
		if err := json.Unmarshal([]byte(ev), &a); err != nil {
			t.Fatal(err)
		}
		for _, x := range a.Events {
			var data map[string]any
			if err := json.Unmarshal([]byte(x.Data), &data); err != nil {
				t.Fatal(err)
			}
			types = append(types, x.Type+":"+fmt.Sprint(data["status"]))
		}
	}
	want := "verification.step:PENDING verification.step:UNDETERMINED verification.step:QUEUED verification.step:SENT verification.step:DELIVERED verification.step:VERIFIED verification.workflow.completed:VERIFIED"
	if strings.Join(types, " ") != want {
		t.Errorf("events:\n%s\nwant\n%s", strings.Join(types, " "), want)
	}
	series := metricstest.Gather(t, e.reg)
	for name, want := range map[string]float64{
		`mnv_verification_workflow_steps_total{channel=SMS_OTP,status=VERIFIED}`:    1,
		`mnv_verification_workflow_steps_total{channel=SILENT,status=UNDETERMINED}`: 1,
		`mnv_verification_workflow_steps_total{channel=SMS_OTP,status=SENT}`:        1,
		`mnv_verification_workflows_total{decided_by=SMS_OTP,status=VERIFIED}`:      1,
		`mnv_verification_workflow_sms_total{outcome=sent}`:                         1,
		`mnv_verification_workflow_code_checks_total{outcome=mismatch}`:             1,
		`mnv_verification_workflow_code_checks_total{outcome=matched}`:              1,
	} {
		if series[name] != want {
			t.Errorf("%s = %v, want %v", name, series[name], want)
		}
	}
	// The code in nothing kept or logged: logs, events, job arguments, the stored columns.
	var rows strings.Builder
	for _, q := range []string{
		`SELECT coalesce(string_agg(args::text, ' '), '') FROM verification.river_job`,
		`SELECT coalesce(string_agg(w::text, ' '), '') FROM verification.workflows w`,
		`SELECT coalesce(string_agg(s::text, ' '), '') FROM verification.workflow_steps s`,
	} {
		var s string
		if err := e.pool.QueryRow(ctx, q).Scan(&s); err != nil {
			t.Fatal(err)
		}
		rows.WriteString(s)
	}
	answer, _ := json.Marshal(w)
	for what, text := range map[string]string{"logs": e.logs.String(), "database": rows.String(), "answer": string(answer)} {
		if strings.Contains(text, code) {
			t.Errorf("the code %s appears in the %s", "[code]", what)
		}
	}
}

// TestCodeNeverLogged: a whole workflow with a provider that fails, refuses and logs, at debug
// level, leaves no code in zap's output.
func TestCodeNeverLogged(t *testing.T) {
	e := newEnv(t, 100, workflows.Ports{})
	e.setPolicy(t, `{"channels":["SMS_OTP"],"resendCooldownSeconds":0}`)
	w := e.start(t)
	e.smsc.fail = true
	ctx := context.Background()
	rows, _ := e.pool.Query(ctx, `SELECT args FROM verification.river_job WHERE kind = $1`, workflows.SMSKind)
	var args [][]byte
	for rows.Next() {
		var a []byte
		_ = rows.Scan(&a)
		args = append(args, a)
	}
	var a workflows.SMSArgs
	_ = json.Unmarshal(args[0], &a)
	if err := e.svc.SendSMS(ctx, a.SMSJob); err == nil {
		t.Fatal("a failing SMSC did not fail the job")
	}
	e.smsc.fail = false
	if err := e.svc.SendSMS(ctx, a.SMSJob); err == nil {
		t.Fatal("the step in doubt was not held")
	}
	e.advance(workflows.DefaultInDoubtHold) // no receipt came within the hold
	if err := e.svc.SendSMS(ctx, a.SMSJob); err != nil {
		t.Fatal(err)
	}
	code := e.smsc.code(t, a.StepID)
	for range 3 {
		_, _ = e.check(t, w.ID, wrong(code))
	}
	if _, err := e.svc.Resend(ctx, e.client, w.ID); err != nil {
		t.Fatal(err)
	}
	e.smsc.refuse = true
	e.work(t)
	if !strings.Contains(e.logs.String(), "sms refused") {
		t.Fatalf("nothing logged, the test proves nothing:\n%s", e.logs.String())
	}
	if strings.Contains(e.logs.String(), code) {
		t.Fatalf("the code was logged:\n%s", e.logs.String())
	}
}

// TestBruteForceFails: N wrong codes fail the workflow; the right code after that is refused.
func TestBruteForceFails(t *testing.T) {
	e := newEnv(t, 100, workflows.Ports{})
	e.setPolicy(t, `{"channels":["SMS_OTP"],"maxAttempts":3,"codeLength":4}`)
	w := e.start(t)
	if steps(w) != "SMS_OTP:QUEUED" {
		t.Fatalf("started %s", steps(w))
	}
	code := e.smsc.code(t, e.work(t)[0])
	for i := range 3 {
		got, err := e.check(t, w.ID, wrong(code))
		if err != nil {
			t.Fatal(err)
		}
		if i < 2 && got.Status != workflows.InProgress || i == 2 && (got.Status != workflows.Failed || got.Reason != workflows.ReasonTooManyAttempts) {
			t.Fatalf("attempt %d: %s %s", i+1, got.Status, got.Reason)
		}
	}
	if _, err := e.check(t, w.ID, code); fault.Find(err, fault.Conflict) == nil {
		t.Fatalf("the right code after the last attempt: %v", err)
	}
	if _, err := e.svc.Resend(context.Background(), e.client, w.ID); fault.Find(err, fault.Conflict) == nil {
		t.Fatalf("a resend of a failed workflow: %v", err)
	}
	// Malformed input counts as an attempt like any wrong code.
	w2 := e.start(t)
	e.work(t)
	if _, err := e.check(t, w2.ID, ""); fault.Find(err, fault.InvalidArgument) == nil {
		t.Fatalf("an empty code: %v", err)
	}
	for _, typed := range []string{"1", "12", "abcd"} {
		if _, err := e.check(t, w2.ID, typed); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.get(t, w2.ID); got.Status != workflows.Failed {
		t.Fatalf("after 3 malformed codes: %s", got.Status)
	}
}

// TestConcurrentChecks: two checks of the right code at once, one success; many wrong codes at
// once, every one counted.
func TestConcurrentChecks(t *testing.T) {
	e := newEnv(t, 100, workflows.Ports{})
	e.setPolicy(t, `{"channels":["SMS_OTP"],"maxAttempts":10}`)
	for round := range 5 {
		w := e.start(t)
		code := e.smsc.code(t, e.work(t)[0])
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = e.check(t, w.ID, code)
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			} else if fault.Find(err, fault.Conflict) == nil {
				t.Fatal(err)
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: %d checks of one code succeeded (%v)", round, ok, errs)
		}
	}
	w := e.start(t)
	code := e.smsc.code(t, e.work(t)[0])
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.check(t, w.ID, wrong(code)); err != nil && fault.Find(err, fault.Conflict) == nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got := e.get(t, w.ID)
	if got.Status != workflows.Failed || got.Code.Attempts != 10 {
		t.Fatalf("10 concurrent wrong codes: %s after %d attempts", got.Status, got.Code.Attempts)
	}
}

// TestResend: the cooldown answers 429 with the time left; a resend makes a new code and the
// old one stops matching; attempts are not reset; the cap answers 409.
func TestResend(t *testing.T) {
	e := newEnv(t, 100, workflows.Ports{})
	e.setPolicy(t, `{"channels":["SMS_OTP"],"resendCooldownSeconds":30,"maxResends":1}`)
	ctx := context.Background()
	w := e.start(t)
	first := e.smsc.code(t, e.work(t)[0])
	if _, err := e.check(t, w.ID, wrong(first)); err != nil {
		t.Fatal(err)
	}
	e.advance(10 * time.Second)
	_, err := e.svc.Resend(ctx, e.client, w.ID)
	if f := fault.Find(err, fault.RateLimited); f == nil || f.RetryAfter != 20*time.Second {
		t.Fatalf("resend in the cooldown: %v", err)
	}
	e.advance(20 * time.Second)
	w, err = e.svc.Resend(ctx, e.client, w.ID)
	if err != nil || w.ResendsLeft() != 0 || w.Code.Attempts != 1 {
		t.Fatalf("resend: %v, %d left, %d attempts", err, w.ResendsLeft(), w.Code.Attempts)
	}
	second := e.smsc.code(t, e.work(t)[0])
	e.advance(time.Minute)
	if _, err := e.svc.Resend(ctx, e.client, w.ID); fault.Find(err, fault.Conflict) == nil {
		t.Fatalf("resend past the cap: %v", err)
	}
	if first != second {
		if got, _ := e.check(t, w.ID, first); got.Status != workflows.InProgress {
			t.Fatalf("the replaced code: %s", got.Status)
		}
	}
	if got, err := e.check(t, w.ID, second); err != nil || got.Status != workflows.Verified {
		t.Fatalf("the new code: %v %s", err, got.Status)
	}
	if e.ledger.calls != 2 || e.ledger.net() != 6 {
		t.Fatalf("two SMS, %d debits, paid %d", e.ledger.calls, e.ledger.net())
	}
}

// TestResendBeforeTheFirstWasSent: the first job, run after a resend replaced its code, sends
// nothing and charges nothing.
func TestResendBeforeTheFirstWasSent(t *testing.T) {
	e := newEnv(t, 100, workflows.Ports{})
	e.setPolicy(t, `{"channels":["SMS_OTP"],"resendCooldownSeconds":0}`)
	w := e.start(t)
	if _, err := e.svc.Resend(context.Background(), e.client, w.ID); err != nil {
		t.Fatal(err)
	}
	if worked := e.work(t); len(worked) != 2 || e.smsc.calls != 1 || e.ledger.calls != 1 {
		t.Fatalf("%d jobs, %d sends, %d debits; want 2, 1, 1", len(worked), e.smsc.calls, e.ledger.calls)
	}
	if got := steps(e.get(t, w.ID)); got != "SMS_OTP:SUPERSEDED SMS_OTP:SENT" {
		t.Fatalf("steps %s", got)
	}
}

// TestRefusedSMSCostsNothing: an SMS the SMSC refuses is refunded and fails the workflow.
func TestRefusedSMSCostsNothing(t *testing.T) {
	e := newEnv(t, 100, workflows.Ports{})
	e.setPolicy(t, `{"channels":["SMS_OTP"]}`)
	e.smsc.refuse = true
	w := e.start(t)
	e.work(t)
	w = e.get(t, w.ID)
	if w.Status != workflows.Failed || w.Reason != workflows.ReasonUndeliverable || steps(w) != "SMS_OTP:UNDELIVERABLE" ||
		w.Steps[0].ChargeStatus != workflows.ChargeVoided || w.Charged() != 0 {
		t.Fatalf("refused: %s %s %s %s %d", w.Status, w.Reason, steps(w), w.Steps[0].ChargeStatus, w.Charged())
	}
	if e.ledger.net() != 0 || e.ledger.balance != 100 {
		t.Fatalf("paid %d, balance %d", e.ledger.net(), e.ledger.balance)
	}
}

// TestPumpingInputs: what the pumping guard reads of a client comes from its policy (allow-list,
// own cap), and its day's SMS spend is its settled SMS steps' charges: a sent SMS counts, a
// refused one (voided, refunded) does not, another client's never does; the sum is what the
// ledger fake holds for the client.
func TestPumpingInputs(t *testing.T) {
	e := newEnv(t, 100, workflows.Ports{})
	ctx := context.Background()
	st := store.New(e.pool)
	e.setPolicy(t, `{"channels":["SMS_OTP"],"smsCountries":["GB","FR"],"dailySmsCap":40}`)
	c, err := st.PumpingClient(ctx, e.client)
	if err != nil || c.ID != e.client || !slices.Equal(c.Countries, []string{"GB", "FR"}) || c.DailyCap != 40 || c.Sandbox {
		t.Fatalf("pumping client %+v %v", c, err)
	}
	if c, err := st.PumpingClient(ctx, uuid.NewString()); err != nil || len(c.Countries) != 0 || c.DailyCap != 0 {
		t.Fatalf("a client without a policy: %+v %v", c, err)
	}
	e.start(t)
	e.work(t) // sent: settled
	e.smsc.refuse = true
	e.start(t)
	e.work(t) // refused: voided
	spent, err := st.SpentToday(ctx, e.client)
	if err != nil || spent != 3 || spent != e.ledger.net() {
		t.Fatalf("spent today %d (%v), ledger %d; want the one sent SMS's 3", spent, err, e.ledger.net())
	}
	if spent, err := st.SpentToday(ctx, uuid.NewString()); err != nil || spent != 0 {
		t.Fatalf("another client spent %d %v", spent, err)
	}
}

// TestChargeRefusedSendsNothing: a balance too low ends the step REJECTED, nothing sent; with
// accounts away the job retries and sends once it is back, charged once.
func TestChargeRefusedSendsNothing(t *testing.T) {
	e := newEnv(t, 1, workflows.Ports{})
	e.setPolicy(t, `{"channels":["SMS_OTP"]}`)
	w := e.start(t)
	e.work(t)
	w = e.get(t, w.ID)
	if e.smsc.calls != 0 || w.Status != workflows.Failed || w.Reason != "INSUFFICIENT_BALANCE" || steps(w) != "SMS_OTP:REJECTED" {
		t.Fatalf("refused charge: %d sends, %s %s %s", e.smsc.calls, w.Status, w.Reason, steps(w))
	}

	e2 := newEnv(t, 100, workflows.Ports{})
	e2.setPolicy(t, `{"channels":["SMS_OTP"]}`)
	w = e2.start(t)
	var a workflows.SMSArgs
	if err := e2.pool.QueryRow(context.Background(), `SELECT args FROM verification.river_job WHERE kind = $1`, workflows.SMSKind).Scan(&a); err != nil {
		t.Fatal(err)
	}
	e2.ledger.down = true
	if err := e2.svc.SendSMS(context.Background(), a.SMSJob); !errors.Is(err, fault.ErrUnavailable) || e2.smsc.calls != 0 {
		t.Fatalf("accounts away: %v, %d sends", err, e2.smsc.calls)
	}
	e2.ledger.down = false
	e2.work(t)
	if e2.smsc.calls != 1 || e2.ledger.net() != 3 || e2.get(t, w.ID).Charged() != 3 {
		t.Fatalf("after accounts came back: %d sends, paid %d", e2.smsc.calls, e2.ledger.net())
	}
}

// TestTimeouts: a silent step past its timeout moves on when the workflow is read; an expired
// code expires the workflow; an SMS step past its timeout expires it.
func TestTimeouts(t *testing.T) {
	e := newEnv(t, 100, workflows.Ports{})
	e.setPolicy(t, `{"silentTimeoutSeconds":10,"codeTtlSeconds":60,"smsTimeoutSeconds":120}`)
	w := e.start(t)
	e.advance(11 * time.Second)
	if got := steps(e.get(t, w.ID)); got != "SILENT:TIMED_OUT SMS_OTP:QUEUED" {
		t.Fatalf("after the silent timeout: %s", got)
	}
	code := e.smsc.code(t, e.work(t)[0])
	e.advance(61 * time.Second)
	got, err := e.check(t, w.ID, code)
	if err != nil || got.Status != workflows.Expired || got.Reason != workflows.ReasonCodeExpired {
		t.Fatalf("an expired code: %v %s %s", err, got.Status, got.Reason)
	}

	w = e.start(t)
	e.advance(11 * time.Second)
	e.get(t, w.ID)
	e.work(t)
	e.advance(121 * time.Second)
	if got := e.get(t, w.ID); got.Status != workflows.Expired || got.Reason != workflows.ReasonStepTimedOut {
		t.Fatalf("after the SMS timeout: %s %s", got.Status, got.Reason)
	}
}

// TestSweep: deadlines pass with nobody reading the workflow; the sweep moves them on and
// expires them, with their events, and leaves the others.
func TestSweep(t *testing.T) {
	e := newEnv(t, 100, workflows.Ports{})
	e.setPolicy(t, `{"silentTimeoutSeconds":10,"smsTimeoutSeconds":120}`)
	ctx := context.Background()
	w := e.start(t)
	done := e.start(t)
	if _, err := e.svc.SilentResult(ctx, e.client, done.ID, workflows.SilentOutcome{Status: "VERIFIED"}); err != nil {
		t.Fatal(err)
	}
	if n, err := e.svc.SweepOnce(ctx); err != nil || n != 0 {
		t.Fatalf("nothing due: %d %v", n, err)
	}
	e.advance(11 * time.Second)
	if n, err := e.svc.SweepOnce(ctx); err != nil || n != 1 {
		t.Fatalf("the silent step due: %d %v", n, err)
	}
	if got := steps(e.get(t, w.ID)); got != "SILENT:TIMED_OUT SMS_OTP:QUEUED" {
		t.Fatalf("after the sweep: %s", got)
	}
	e.work(t)
	e.advance(121 * time.Second)
	if n, err := e.svc.SweepOnce(ctx); err != nil || n != 1 {
		t.Fatalf("the SMS step due: %d %v", n, err)
	}
	if n, err := e.svc.SweepOnce(ctx); err != nil || n != 0 {
		t.Fatalf("swept twice: %d %v", n, err)
	}
	got := e.get(t, w.ID)
	if got.Status != workflows.Expired || got.Reason != workflows.ReasonStepTimedOut {
		t.Fatalf("after the SMS timeout: %s %s", got.Status, got.Reason)
	}
	completed := 0
	for _, ev := range e.events(t) {
		completed += strings.Count(ev, `verification.workflow.completed`)
	}
	if completed != 2 {
		t.Fatalf("%d completed events, want 2 (one verified, one expired)", completed)
	}
}

// TestUsage: a client's steps per day by channel, country and status, with the settled
// charges; another client's are not counted.
func TestUsage(t *testing.T) {
	e := newEnv(t, 100, workflows.Ports{})
	ctx := context.Background()
	w := e.start(t) // SILENT, then SMS
	if _, err := e.svc.SilentResult(ctx, e.client, w.ID, workflows.SilentOutcome{Status: "UNDETERMINED"}); err != nil {
		t.Fatal(err)
	}
	code := e.smsc.code(t, e.work(t)[0])
	if _, err := e.check(t, w.ID, code); err != nil {
		t.Fatal(err)
	}
	v := e.start(t)
	if _, err := e.svc.SilentResult(ctx, e.client, v.ID, workflows.SilentOutcome{Status: "VERIFIED"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Start(ctx, workflows.StartRequest{ClientID: uuid.NewString(), MobileNumber: gbNumber}); err != nil {
		t.Fatal(err)
	}
	rep, err := e.svc.Usage(ctx, e.client, nil, nil, workflows.UsageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, b := range rep.Totals.Breakdowns {
		for _, k := range b.Buckets {
			got[b.Dimension+"="+k.Value] = fmt.Sprintf("%d/%d", k.Count, k.Charged)
		}
	}
	want := map[string]string{
		"channel=SILENT": "2/0", "channel=SMS_OTP": "1/3", "country=GB": "3/3",
		"status=UNDETERMINED": "1/0", "status=VERIFIED": "2/3",
	}
	if rep.Totals.Count != 3 || rep.Totals.Charged != 3 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("usage: %d steps, %d charged, %v; want 3, 3, %v", rep.Totals.Count, rep.Totals.Charged, got, want)
	}
	if last := rep.Days[len(rep.Days)-1]; last.Count != 3 {
		t.Fatalf("today: %d steps", last.Count)
	}
	if _, err := e.svc.Usage(ctx, e.client, ptrS("2026-02-01"), ptrS("2025-01-01"), workflows.UsageFilter{}); fault.Find(err, fault.InvalidArgument) == nil {
		t.Fatalf("a reversed range: %v", err)
	}
}

func ptrS(s string) *string { return &s }

// TestTransactionPage: a workflow started for a browser transaction takes its code by the
// transaction; one workflow per transaction; another client's transaction is unknown.
func TestTransactionPage(t *testing.T) {
	e := newEnv(t, 100, workflows.Ports{})
	e.setPolicy(t, `{"channels":["SMS_OTP"]}`)
	ctx := context.Background()
	open := func(clientID string) string {
		tr, err := store.New(e.pool).InsertTransaction(ctx, domain.Transaction{ID: uuid.NewString(), ClientID: clientID, ServiceCode: "VERIFY", MetadataID: "m",
			Features: []string{"VERIFY"}, Operators: principal.DefaultOperators(), Status: domain.TransactionPending, ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return tr.ID
	}
	tr, foreign := open(e.client), open(uuid.NewString())
	start := func(tx string) (workflows.Workflow, error) {
		return e.svc.Start(ctx, workflows.StartRequest{ClientID: e.client, MobileNumber: gbNumber, TransactionID: &tx})
	}
	for _, bad := range []string{foreign, uuid.NewString(), "nope"} {
		if _, err := start(bad); fault.Find(err, fault.InvalidArgument) == nil || fault.Find(err, fault.InvalidArgument).Field != "transactionId" {
			t.Fatalf("start for transaction %s: %v, want 400 on transactionId", bad, err)
		}
	}
	w, err := start(tr)
	if err != nil || w.TransactionID != tr {
		t.Fatalf("start: %v %q", err, w.TransactionID)
	}
	if _, err := start(tr); !errors.Is(err, workflows.ErrTransactionTaken) {
		t.Fatalf("a second workflow for the transaction: %v", err)
	}
	if got := e.get(t, w.ID); got.TransactionID != tr {
		t.Fatalf("stored transaction %q", got.TransactionID)
	}
	code := e.smsc.code(t, e.work(t)[0])
	if _, err := e.svc.CheckCodeOfTransaction(ctx, e.client, foreign, code); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("by another transaction: %v", err)
	}
	if _, err := e.svc.GetOfTransaction(ctx, e.client, foreign, netip.Addr{}); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("read by another transaction: %v", err)
	}
	if _, err := e.svc.ResendOfTransaction(ctx, e.client, "nope", netip.Addr{}); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("resend by a malformed transaction: %v", err)
	}
	// The page reads that a code is in play, as its backend would.
	if got, err := e.svc.GetOfTransaction(ctx, e.client, tr, netip.Addr{}); err != nil || got.Status != workflows.InProgress || got.Code.StepID == "" || got.Current().Channel != workflows.SMSOTP {
		t.Fatalf("read on the page: %v %s %q", err, got.Status, got.Code.StepID)
	}
	got, err := e.svc.CheckCodeOfTransaction(ctx, e.client, tr, wrong(code))
	if err != nil || got.Status != workflows.InProgress || got.AttemptsLeft() != 4 {
		t.Fatalf("a wrong code on the page: %v %s %d", err, got.Status, got.AttemptsLeft())
	}
	// The attempts and the resend cooldown are the workflow's: the backend's check counts
	// against the page's, and the page's resend waits like the backend's.
	if got, err := e.check(t, w.ID, wrong(code)); err != nil || got.AttemptsLeft() != 3 {
		t.Fatalf("a wrong code by the backend: %v %d", err, got.AttemptsLeft())
	}
	if _, err := e.svc.ResendOfTransaction(ctx, e.client, tr, netip.Addr{}); fault.Find(err, fault.RateLimited) == nil {
		t.Fatalf("a resend on the page in the cooldown: %v", err)
	}
	e.advance(31 * time.Second)
	if got, err := e.svc.ResendOfTransaction(ctx, e.client, tr, netip.Addr{}); err != nil || got.Code.Resends != 1 || got.AttemptsLeft() != 3 {
		t.Fatalf("a resend on the page: %v %+v", err, got.Code)
	}
	code = e.smsc.code(t, e.work(t)[0])
	if got, err := e.svc.CheckCodeOfTransaction(ctx, e.client, tr, code); err != nil || got.Status != workflows.Verified {
		t.Fatalf("the code on the page: %v %s", err, got.Status)
	}
}

// TestEndedWorkflowsLoseTheirNumber: the retention drops the sealed number of workflows ended
// long enough ago, never of one in progress; an ended workflow still reads without it.
func TestEndedWorkflowsLoseTheirNumber(t *testing.T) {
	e := newEnv(t, 100, workflows.Ports{})
	ctx := context.Background()
	old, recent, running := e.start(t), e.start(t), e.start(t)
	for _, w := range []workflows.Workflow{old, recent} {
		if _, err := e.svc.SilentResult(ctx, e.client, w.ID, workflows.SilentOutcome{Status: "VERIFIED"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.pool.Exec(ctx, `UPDATE verification.workflows SET ended_at = now() - interval '40 days' WHERE id = $1`, old.ID); err != nil {
		t.Fatal(err)
	}
	// A workflow in progress never loses its number, whatever its age.
	if _, err := e.pool.Exec(ctx, `UPDATE verification.workflows SET created_at = now() - interval '40 days' WHERE id = $1`, running.ID); err != nil {
		t.Fatal(err)
	}
	n, err := store.New(e.pool).DropWorkflowNumbers(ctx, 30*24*time.Hour, 10)
	if err != nil || n != 1 {
		t.Fatalf("dropped %d (%v), want 1", n, err)
	}
	var kept []string
	rows, err := e.pool.Query(ctx, `SELECT id::text FROM verification.workflows WHERE number_sealed IS NOT NULL AND number_hash IS NOT NULL ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	if kept, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(kept) != 2 || slices.Contains(kept, old.ID) {
		t.Fatalf("numbers kept by %v; want the recent and the running one", kept)
	}
	if got := e.get(t, old.ID); got.Status != workflows.Verified || got.Masked != old.Masked {
		t.Fatalf("the ended workflow reads %s %s", got.Status, got.Masked)
	}
	if _, err := e.check(t, old.ID, "123456"); fault.Find(err, fault.Conflict) == nil {
		t.Fatalf("a check of the ended workflow: %v", err)
	}
}

// TestSilentDecides: the network's answer decides when it is definite, free of any SMS.
func TestSilentDecides(t *testing.T) {
	e := newEnv(t, 100, workflows.Ports{})
	ctx := context.Background()
	for status, want := range map[string]workflows.Status{"VERIFIED": workflows.Verified, "NOT_VERIFIED": workflows.NotVerified} {
		w := e.start(t)
		got, err := e.svc.SilentResult(ctx, e.client, w.ID, workflows.SilentOutcome{Status: status})
		if err != nil || got.Status != want || got.DecidedBy != workflows.Silent {
			t.Fatalf("%s: %v %s %s", status, err, got.Status, got.DecidedBy)
		}
		if _, err := e.svc.SilentResult(ctx, e.client, w.ID, workflows.SilentOutcome{Status: status}); fault.Find(err, fault.Conflict) == nil {
			t.Fatalf("a second silent outcome: %v", err)
		}
	}
	if len(e.work(t)) != 0 || e.ledger.calls != 0 {
		t.Fatal("an SMS for a workflow the network decided")
	}
}

// TestForeignWorkflowIsNotFound: another client's workflow id is 404 on every route.
func TestForeignWorkflowIsNotFound(t *testing.T) {
	e := newEnv(t, 100, workflows.Ports{})
	w := e.start(t)
	other := uuid.NewString()
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"get":    func() error { _, err := e.svc.Get(ctx, other, w.ID); return err },
		"check":  func() error { _, err := e.svc.CheckCode(ctx, other, w.ID, "123456"); return err },
		"resend": func() error { _, err := e.svc.Resend(ctx, other, w.ID); return err },
		"silent": func() error {
			_, err := e.svc.SilentResult(ctx, other, w.ID, workflows.SilentOutcome{Status: "VERIFIED"})
			return err
		},
		"malformed id": func() error { _, err := e.svc.Get(ctx, e.client, "nope"); return err },
	} {
		if err := call(); !errors.Is(err, fault.ErrNotFound) {
			t.Errorf("%s: %v, want 404", name, err)
		}
	}
	if got := e.get(t, w.ID); got.Status != workflows.InProgress || steps(got) != "SILENT:PENDING" {
		t.Fatalf("the owner's workflow changed: %s", steps(got))
	}
}

// TestSIMSwapAndGuard: the policy's SIM-swap modes and the pumping guard.
func TestSIMSwapAndGuard(t *testing.T) {
	cases := []struct {
		name, policy string
		swap         *swapper
		guard        workflows.PumpingGuard
		wantStatus   workflows.Status
		wantReason   string
		wantSteps    string
		wantSIM      workflows.SwapResult
	}{
		{"block, swapped", `{"simSwap":{"mode":"BLOCK"}}`, &swapper{swapped: true}, nil, workflows.Failed, workflows.ReasonSIMSwapped, "", workflows.SwapSwapped},
		{"block, not swapped", `{"simSwap":{"mode":"BLOCK"}}`, &swapper{}, nil, workflows.InProgress, "", "SILENT:PENDING", workflows.SwapNotSwapped},
		{"fallback, swapped: no silent step", `{"simSwap":{"mode":"FALLBACK"}}`, &swapper{swapped: true}, nil, workflows.InProgress, "", "SMS_OTP:QUEUED", workflows.SwapSwapped},
		{"report, swapped", `{"simSwap":{"mode":"REPORT"}}`, &swapper{swapped: true}, nil, workflows.InProgress, "", "SILENT:PENDING", workflows.SwapSwapped},
		// BLOCK fails closed when the check has no answer: no code to a SIM that may be swapped.
		{"block, operator away", `{"simSwap":{"mode":"BLOCK"}}`, &swapper{err: errors.New("503")}, nil, workflows.Failed, workflows.ReasonSIMSwapUnknown, "", workflows.SwapUnavailable},
		{"block, not configured", `{"simSwap":{"mode":"BLOCK"}}`, nil, nil, workflows.Failed, workflows.ReasonSIMSwapUnknown, "", workflows.SwapNotOffered},
		{"fallback, operator away: no silent step", `{"simSwap":{"mode":"FALLBACK"}}`, &swapper{err: errors.New("503")}, nil, workflows.InProgress, "", "SMS_OTP:QUEUED", workflows.SwapUnavailable},
		{"report, operator away", `{"simSwap":{"mode":"REPORT"}}`, &swapper{err: errors.New("503")}, nil, workflows.InProgress, "", "SILENT:PENDING", workflows.SwapUnavailable},
		{"off: never asked", `{}`, &swapper{swapped: true}, nil, workflows.InProgress, "", "SILENT:PENDING", workflows.SwapNotChecked},
		{"swapped, only the silent channel", `{"channels":["SILENT"],"simSwap":{"mode":"FALLBACK"}}`, &swapper{swapped: true}, nil, workflows.Failed, workflows.ReasonNoChannelLeft, "", workflows.SwapSwapped},
		{"the guard refuses the SMS", `{"channels":["SMS_OTP"]}`, nil, guard{refuse: "PREMIUM_PREFIX"}, workflows.Failed, workflows.ReasonBlocked, "SMS_OTP:BLOCKED", workflows.SwapNotChecked},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ports := workflows.Ports{Guard: tc.guard}
			if tc.swap != nil {
				ports.SIMSwap = tc.swap
			}
			e := newEnv(t, 100, ports)
			e.setPolicy(t, tc.policy)
			w := e.start(t)
			if w.Status != tc.wantStatus || w.Reason != tc.wantReason || steps(w) != tc.wantSteps || w.SIMSwap != tc.wantSIM {
				t.Fatalf("got %s %q [%s] %s", w.Status, w.Reason, steps(w), w.SIMSwap)
			}
			if got := e.get(t, w.ID); got.Status != w.Status || got.SIMSwap != w.SIMSwap {
				t.Fatalf("stored %s %s", got.Status, got.SIMSwap)
			}
			if tc.guard != nil && (len(e.work(t)) != 0 || e.ledger.calls != 0) {
				t.Fatal("a blocked SMS was queued or charged")
			}
			if tc.guard != nil && w.Steps[0].Reason != "PREMIUM_PREFIX" {
				t.Fatalf("the blocked step's reason %q, want the guard's", w.Steps[0].Reason)
			}
		})
	}
}

// TestGuardSeesTheStart: the guard of an SMS step begun after the start (the silent step timed
// out by the sweep) is asked with the start's sandbox flag and end user's address (an IPv6
// address by its /64), and a code checked OK is counted as its prefix's conversion once.
func TestGuardSeesTheStart(t *testing.T) {
	var asked []workflows.SMSRequest
	var verified []string
	e := newEnv(t, 100, workflows.Ports{Guard: guard{asked: &asked, verified: &verified}})
	ctx := context.Background()
	w, err := e.svc.Start(ctx, workflows.StartRequest{
		ClientID: e.client, MobileNumber: gbNumber, Sandbox: true, EndUserAddress: netip.MustParseAddr("2001:db8:1:2:aaaa::7"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 0 {
		t.Fatal("the guard was asked before any SMS")
	}
	e.advance(2 * time.Minute)
	if _, err := e.svc.SweepOnce(ctx); err != nil {
		t.Fatal(err)
	}
	want := workflows.SMSRequest{ClientID: e.client, Number: gbNumber, Country: "GB", Sandbox: true, Address: netip.MustParseAddr("2001:db8:1:2::")}
	if len(asked) != 1 || asked[0].SpentToday == nil {
		t.Fatalf("asked %+v, want one request that reads the spend in its transaction", asked)
	}
	if got := asked[0]; got.ClientID != want.ClientID || got.Number != want.Number || got.Country != want.Country ||
		got.Sandbox != want.Sandbox || got.Address != want.Address {
		t.Fatalf("asked %+v, want %+v", got, want)
	}
	code := e.smsc.code(t, e.work(t)[0])
	wrong := "000000"
	if code == wrong {
		wrong = "111111"
	}
	if _, err := e.check(t, w.ID, wrong); err != nil {
		t.Fatal(err)
	}
	if len(verified) != 0 {
		t.Fatalf("a wrong code counted as converted: %v", verified)
	}
	if got, err := e.check(t, w.ID, code); err != nil || got.Status != workflows.Verified {
		t.Fatalf("right code: %v %v", got.Status, err)
	}
	if _, err := e.check(t, w.ID, code); !errors.Is(err, workflows.ErrFinal) {
		t.Fatalf("second check: %v", err)
	}
	if len(verified) != 1 || verified[0] != gbNumber {
		t.Fatalf("conversions counted %v, want the number once", verified)
	}
}

// TestPolicyStoredAndResolved: a policy is validated before it is stored, read back as written,
// and a workflow takes its number's country's override.
func TestPolicyStoredAndResolved(t *testing.T) {
	e := newEnv(t, 100, workflows.Ports{})
	ctx := context.Background()
	if p, err := e.svc.Policy(ctx, e.client); err != nil || p.Channels != nil {
		t.Fatalf("no policy: %+v %v", p, err)
	}
	bad, _ := workflows.ParsePolicy([]byte(`{"codeLength":12}`))
	if _, err := e.svc.SetPolicy(ctx, e.client, bad, "key:x"); fault.Find(err, fault.InvalidArgument) == nil {
		t.Fatalf("an invalid policy stored: %v", err)
	}
	e.setPolicy(t, `{"codeLength":8,"countries":{"GB":{"channels":["SMS_OTP"],"codeLength":5}}}`)
	p, err := e.svc.Policy(ctx, e.client)
	if err != nil || *p.CodeLength != 8 || *p.Countries["GB"].CodeLength != 5 {
		t.Fatalf("read back %+v %v", p, err)
	}
	w := e.start(t)
	if steps(w) != "SMS_OTP:QUEUED" || w.Policy.CodeLength != 5 {
		t.Fatalf("GB workflow: %s, code length %d", steps(w), w.Policy.CodeLength)
	}
	if code := e.smsc.code(t, e.work(t)[0]); len(code) != 5 {
		t.Fatalf("code of %d digits", len(code))
	}
	// An edit applies to the next workflows only.
	e.setPolicy(t, `{"codeLength":4}`)
	if got := e.get(t, w.ID); got.Policy.CodeLength != 5 {
		t.Fatal("an edit changed a running workflow")
	}
	// Another client reads its own (none).
	if p, _ := e.svc.Policy(ctx, uuid.NewString()); p.CodeLength != nil {
		t.Fatal("another client's policy read")
	}
	if _, err := e.svc.Start(ctx, workflows.StartRequest{ClientID: e.client, MobileNumber: "07700900123"}); fault.Find(err, fault.InvalidArgument) == nil {
		t.Fatalf("a national number started: %v", err)
	}
}

// TestList: the console's list, newest first with its steps, filtered by status, channel and
// country, paged; another client's workflows are not in it.
func TestList(t *testing.T) {
	e := newEnv(t, 100, workflows.Ports{})
	ctx := context.Background()
	silent := e.start(t) // SILENT pending
	if _, err := e.svc.SilentResult(ctx, e.client, silent.ID, workflows.SilentOutcome{Status: "VERIFIED"}); err != nil {
		t.Fatal(err)
	}
	e.advance(time.Second)
	e.setPolicy(t, `{"channels":["SMS_OTP"]}`)
	sms := e.start(t)
	if _, err := e.svc.Start(ctx, workflows.StartRequest{ClientID: uuid.NewString(), MobileNumber: gbNumber}); err != nil {
		t.Fatal(err)
	}
	ptr := func(s string) *string { return &s }
	for _, tt := range []struct {
		name string
		f    workflows.ListFilter
		want []string
	}{
		{"all, newest first", workflows.ListFilter{}, []string{sms.ID, silent.ID}},
		{"verified", workflows.ListFilter{Status: ptr("VERIFIED")}, []string{silent.ID}},
		{"in progress", workflows.ListFilter{Status: ptr("IN_PROGRESS")}, []string{sms.ID}},
		{"a step by SMS", workflows.ListFilter{Channel: ptr("SMS_OTP")}, []string{sms.ID}},
		{"a silent step", workflows.ListFilter{Channel: ptr("SILENT")}, []string{silent.ID}},
		{"GB", workflows.ListFilter{Country: ptr("GB")}, []string{sms.ID, silent.ID}},
		{"FR", workflows.ListFilter{Country: ptr("FR")}, nil},
	} {
		items, total, err := e.svc.List(ctx, e.client, tt.f, 10, 0)
		var got []string
		for _, w := range items {
			got = append(got, w.ID)
		}
		if err != nil || total != int64(len(tt.want)) || strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("%s: %v, %d %v; want %v", tt.name, err, total, got, tt.want)
		}
	}
	items, total, err := e.svc.List(ctx, e.client, workflows.ListFilter{}, 1, 1)
	if err != nil || total != 2 || len(items) != 1 || items[0].ID != silent.ID {
		t.Fatalf("the second page of one: %v %d %v", err, total, items)
	}
	w := items[0]
	if len(w.Steps) != 1 || w.Steps[0].Channel != workflows.Silent || w.Steps[0].Status != workflows.StepVerified || w.DecidedBy != workflows.Silent || w.Masked == "" || w.Masked == gbNumber {
		t.Fatalf("the listed workflow: %+v", w)
	}
	items, _, _ = e.svc.List(ctx, e.client, workflows.ListFilter{Status: ptr("IN_PROGRESS")}, 10, 0)
	if len(items) != 1 || items[0].Code.StepID == "" || items[0].Code.ExpiresAt.IsZero() || items[0].Current().Channel != workflows.SMSOTP {
		t.Fatalf("the listed workflow with a code in play: %+v", items)
	}
}

// TestSendInDoubt: an attempt whose submit had an unknown outcome makes the next one in doubt
// (flagged in the log and the metric, and sent again); one the provider knows never left does not.
func TestSendInDoubt(t *testing.T) {
	for _, tc := range []struct {
		name         string
		fail         func(*smsc, bool)
		inDoubt      float64
		attemptsKept int
	}{
		{"outcome unknown", func(s *smsc, on bool) { s.fail = on }, 1, 2},
		{"known not sent", func(s *smsc, on bool) { s.notSent = on }, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 100, workflows.Ports{})
			e.setPolicy(t, `{"channels":["SMS_OTP"]}`)
			w := e.start(t)
			ctx := context.Background()
			var raw []byte
			if err := e.pool.QueryRow(ctx, `SELECT args FROM verification.river_job WHERE kind = $1`, workflows.SMSKind).Scan(&raw); err != nil {
				t.Fatal(err)
			}
			var a workflows.SMSArgs
			if err := json.Unmarshal(raw, &a); err != nil {
				t.Fatal(err)
			}
			tc.fail(e.smsc, true)
			if err := e.svc.SendSMS(ctx, a.SMSJob); err == nil {
				t.Fatal("a failing SMSC did not fail the job")
			}
			tc.fail(e.smsc, false)
			if tc.inDoubt > 0 {
				// In doubt: held for a receipt (none comes here), then sent again.
				var held *workflows.HeldError
				if err := e.svc.SendSMS(ctx, a.SMSJob); !errors.As(err, &held) || held.Wait != workflows.DefaultInDoubtHold {
					t.Fatalf("a step in doubt: %v, want held %s", err, workflows.DefaultInDoubtHold)
				}
				e.advance(workflows.DefaultInDoubtHold)
			}
			if err := e.svc.SendSMS(ctx, a.SMSJob); err != nil {
				t.Fatal(err)
			}
			got := e.get(t, w.ID)
			if got := got.Step(a.StepID); got.Status != workflows.StepSent || got.SendAttempts != tc.attemptsKept {
				t.Errorf("step %s with %d attempts, want SENT with %d", got.Status, got.SendAttempts, tc.attemptsKept)
			}
			series := metricstest.Gather(t, e.reg)
			if got := series[`mnv_verification_workflow_sms_total{outcome=in_doubt}`]; got != tc.inDoubt {
				t.Errorf("in_doubt = %v, want %v", got, tc.inDoubt)
			}
			if logged := strings.Contains(e.logs.String(), "sms in doubt"); logged != (tc.inDoubt > 0) {
				t.Errorf("in doubt logged: %v, want %v:\n%s", logged, tc.inDoubt > 0, e.logs.String())
			}
			// A job run again after the send changes nothing and sends nothing.
			calls := e.smsc.calls
			if err := e.svc.SendSMS(ctx, a.SMSJob); err != nil || e.smsc.calls != calls {
				t.Errorf("a rerun after the send: err %v, %d more calls", err, e.smsc.calls-calls)
			}
		})
	}
}

// inbox is a sandbox SMS centre holding what the fake SMSC was sent, plus a message of no
// workflow of ours.
type inbox struct{ s *smsc }

func (i inbox) Sent() []workflows.SandboxMessage {
	i.s.mu.Lock()
	defer i.s.mu.Unlock()
	out := []workflows.SandboxMessage{{ProviderIDs: []string{"someone-else"}, From: "x", Text: "not ours"}}
	for id, m := range i.s.sent {
		out = append(out, workflows.SandboxMessage{ProviderIDs: []string{"smsc-" + id}, From: "mnv", Text: m.Text, At: time.Now()})
	}
	return out
}

// TestSandboxSMS: a client reads the sandbox SMS centre's messages of its own workflows only,
// with the number masked; without a sandbox the route is not there.
func TestSandboxSMS(t *testing.T) {
	e := newEnv(t, 100, workflows.Ports{})
	e.setPolicy(t, `{"channels":["SMS_OTP"]}`)
	ctx := context.Background()
	if _, err := e.svc.SandboxSMS(ctx, e.client); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("without a sandbox: %v, want not found", err)
	}
	e.svc.WithSandbox(inbox{e.smsc})
	w := e.start(t)
	steps := e.work(t)
	got, err := e.svc.SandboxSMS(ctx, e.client)
	if err != nil {
		t.Fatal(err)
	}
	code := e.smsc.code(t, steps[0])
	if len(got) != 1 || got[0].WorkflowID != w.ID || got[0].StepID != steps[0] || !strings.HasPrefix(got[0].Text, code) ||
		got[0].Masked != w.Masked || strings.Contains(got[0].Masked, gbNumber[4:]) {
		t.Fatalf("sandbox SMS %+v", got)
	}
	if other, err := e.svc.SandboxSMS(ctx, uuid.NewString()); err != nil || len(other) != 0 {
		t.Fatalf("another client reads %+v, %v", other, err)
	}
}

// smsJob is the one SMS job waiting in River's table.
func (e *env) smsJob(t *testing.T) workflows.SMSJob {
	t.Helper()
	var raw []byte
	if err := e.pool.QueryRow(context.Background(), `SELECT args FROM verification.river_job WHERE kind = $1 ORDER BY id DESC LIMIT 1`, workflows.SMSKind).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var a workflows.SMSArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatal(err)
	}
	return a.SMSJob
}

// sealed reports whether the workflow still keeps its code sealed for the sender.
func (e *env) sealed(t *testing.T, id string) bool {
	t.Helper()
	var sealed bool
	if err := e.pool.QueryRow(context.Background(), `SELECT code_sealed IS NOT NULL FROM verification.workflows WHERE id = $1`, id).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	return sealed
}

// TestInDoubtSettledByReceipt: a step whose submit reached the SMSC but whose answer was lost
// is in doubt; the SMSC's receipt, whose message id no step recorded, is matched to it by the
// attempt's reference it echoes, or by the start of the text when it echoes none, and the step
// is settled: the held job sends nothing again. A receipt of another number, another attempt
// or another code matches nothing, and the step is sent again once the hold has passed.
func TestInDoubtSettledByReceipt(t *testing.T) {
	digits := strings.TrimPrefix(gbNumber, "+")
	for _, tc := range []struct {
		name    string
		receipt func(m workflows.Message) workflows.DeliveryReceipt
		status  string // the receipt's status; "" for DELIVERED
		match   bool
	}{
		{"by reference", func(m workflows.Message) workflows.DeliveryReceipt {
			return workflows.DeliveryReceipt{To: digits, Reference: m.Reference, HasReference: true, Text: "garbled"}
		}, "", true},
		{"by reference, undeliverable, number with +", func(m workflows.Message) workflows.DeliveryReceipt {
			return workflows.DeliveryReceipt{To: gbNumber, Reference: m.Reference, HasReference: true}
		}, workflows.ReceiptUndeliverable, true},
		{"by text when no reference", func(m workflows.Message) workflows.DeliveryReceipt {
			return workflows.DeliveryReceipt{To: digits, Text: m.Text[:20]}
		}, "", true},
		{"another number", func(m workflows.Message) workflows.DeliveryReceipt {
			return workflows.DeliveryReceipt{To: "447400123457", Reference: m.Reference, HasReference: true, Text: m.Text[:20]}
		}, "", false},
		{"another attempt's reference", func(m workflows.Message) workflows.DeliveryReceipt {
			return workflows.DeliveryReceipt{To: digits, Reference: m.Reference + 1, HasReference: true, Text: m.Text[:20]}
		}, "", false},
		{"another code's text", func(m workflows.Message) workflows.DeliveryReceipt {
			return workflows.DeliveryReceipt{To: digits, Text: wrong(m.Text[:6]) + m.Text[6:20]}
		}, "", false},
		{"no reference and no text", func(workflows.Message) workflows.DeliveryReceipt {
			return workflows.DeliveryReceipt{To: digits}
		}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 100, workflows.Ports{})
			e.setPolicy(t, `{"channels":["SMS_OTP"]}`)
			w := e.start(t)
			job := e.smsJob(t)
			ctx := context.Background()
			e.smsc.answerLost = true
			if err := e.svc.SendSMS(ctx, job); err == nil {
				t.Fatal("a lost answer did not fail the job")
			}
			e.smsc.answerLost = false
			m := e.smsc.message(job.StepID)
			if m.Reference != workflows.MessageReference(job.StepID, 1) {
				t.Fatalf("reference %#x, want the first attempt's", m.Reference)
			}
			// The job's retry finds the step in doubt and holds it.
			var held *workflows.HeldError
			if err := e.svc.SendSMS(ctx, job); !errors.As(err, &held) {
				t.Fatalf("retry in doubt: %v, want held", err)
			}
			r := tc.receipt(m)
			r.ProviderID, r.Status = "smsc-lost-"+job.StepID, tc.status
			if r.Status == "" {
				r.Status = workflows.ReceiptDelivered
			}
			err := e.svc.ReceiptInDoubt(ctx, r)
			if tc.match != (err == nil) || (!tc.match && !errors.Is(err, fault.ErrNotFound)) {
				t.Fatalf("ReceiptInDoubt = %v, want a match: %v", err, tc.match)
			}
			e.advance(workflows.DefaultInDoubtHold)
			calls := e.smsc.calls
			if err := e.svc.SendSMS(ctx, job); err != nil {
				t.Fatal(err)
			}
			gw := e.get(t, w.ID)
			got := gw.Step(job.StepID)
			series := metricstest.Gather(t, e.reg)
			if tc.match {
				want := workflows.StepDelivered
				if r.Status == workflows.ReceiptUndeliverable {
					want = workflows.StepUndeliverable
				}
				if e.smsc.calls != calls || got.Status != want || got.SendAttempts != 1 || e.sealed(t, w.ID) {
					t.Fatalf("after the hold: %d more sends, step %s with %d attempts, sealed %v; want none, %s, 1, false",
						e.smsc.calls-calls, got.Status, got.SendAttempts, e.sealed(t, w.ID), want)
				}
				// The receipt's id is the step's now: a later receipt of it takes the normal path.
				if _, _, step, err := store.New(e.pool).FindMessage(ctx, r.ProviderID); err != nil || step != job.StepID {
					t.Fatalf("FindMessage = %s, %v", step, err)
				}
				if series[`mnv_verification_workflow_sms_total{outcome=in_doubt_resolved}`] != 1 || series[`mnv_verification_workflow_sms_total{outcome=in_doubt}`] != 0 {
					t.Fatalf("metrics %v", series)
				}
				if !strings.Contains(e.logs.String(), "sms in doubt settled by a delivery receipt") {
					t.Fatalf("not logged:\n%s", e.logs.String())
				}
			} else {
				if e.smsc.calls != calls+1 || got.Status != workflows.StepSent || got.SendAttempts != 2 {
					t.Fatalf("after the hold: %d more sends, step %s with %d attempts; want 1, SENT, 2", e.smsc.calls-calls, got.Status, got.SendAttempts)
				}
				if series[`mnv_verification_workflow_sms_total{outcome=in_doubt_resolved}`] != 0 || series[`mnv_verification_workflow_sms_total{outcome=in_doubt}`] != 1 {
					t.Fatalf("metrics %v", series)
				}
			}
			if code := m.Text[:6]; strings.Contains(e.logs.String(), code) || strings.Contains(e.logs.String(), digits) {
				t.Fatalf("the code or the number was logged:\n%s", e.logs.String())
			}
		})
	}
}

// TestReceiptOvertakesItsAnswer: a receipt that comes, and is matched as in doubt, before the
// submit's answer is recorded converges with that record: one message id, the step DELIVERED,
// one send, no error.
func TestReceiptOvertakesItsAnswer(t *testing.T) {
	e := newEnv(t, 100, workflows.Ports{})
	e.setPolicy(t, `{"channels":["SMS_OTP"]}`)
	w := e.start(t)
	job := e.smsJob(t)
	ctx := context.Background()
	var overtook error
	e.smsc.during = func(m workflows.Message) {
		overtook = e.svc.ReceiptInDoubt(ctx, workflows.DeliveryReceipt{ProviderID: "smsc-" + m.ID, Status: workflows.ReceiptDelivered,
			To: m.To, Reference: m.Reference, HasReference: true})
	}
	if err := e.svc.SendSMS(ctx, job); err != nil {
		t.Fatal(err)
	}
	if overtook != nil {
		t.Fatalf("the overtaking receipt: %v", overtook)
	}
	// River runs a job at least once: again, nothing more.
	if err := e.svc.SendSMS(ctx, job); err != nil {
		t.Fatal(err)
	}
	gw := e.get(t, w.ID)
	got := gw.Step(job.StepID)
	var ids int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM verification.workflow_messages WHERE step_id = $1`, job.StepID).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	if got.Status != workflows.StepDelivered || got.SendAttempts != 1 || e.smsc.calls != 1 || ids != 1 || e.sealed(t, w.ID) {
		t.Fatalf("step %s, %d attempts, %d sends, %d ids, sealed %v", got.Status, got.SendAttempts, e.smsc.calls, ids, e.sealed(t, w.ID))
	}
	// The normal path's receipt of the same id changes nothing more.
	if err := e.svc.Receipt(ctx, "smsc-"+job.StepID, workflows.ReceiptDelivered); err != nil {
		t.Fatal(err)
	}
}

// TestInDoubtHoldNeverOutlastsTheCode: the hold of a step in doubt takes at most half of what
// is left of its code's life, a hold of 0 sends again at once, and each doubt has its own hold.
func TestInDoubtHoldNeverOutlastsTheCode(t *testing.T) {
	for _, tc := range []struct {
		name string
		hold time.Duration
		want time.Duration // 0: sent at once
	}{
		{"a hold longer than the code", 10 * time.Minute, 30 * time.Second}, // a 60 s code
		{"a short hold", 5 * time.Second, 5 * time.Second},
		{"no hold", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 100, workflows.Ports{})
			e.svc = e.svc.WithInDoubtHold(tc.hold)
			e.setPolicy(t, `{"channels":["SMS_OTP"],"codeTtlSeconds":60}`)
			e.start(t)
			job := e.smsJob(t)
			ctx := context.Background()
			e.smsc.fail = true
			_ = e.svc.SendSMS(ctx, job)
			e.smsc.fail = false
			err := e.svc.SendSMS(ctx, job)
			var held *workflows.HeldError
			switch {
			case tc.want == 0 && err != nil:
				t.Fatalf("no hold: %v", err)
			case tc.want > 0 && (!errors.As(err, &held) || held.Wait != tc.want):
				t.Fatalf("%v, want held %s", err, tc.want)
			}
			if tc.want > 0 {
				// Held again before the end (the hold runs from the first look, not each one).
				e.advance(tc.want - time.Second)
				if err := e.svc.SendSMS(ctx, job); !errors.As(err, &held) || held.Wait != time.Second {
					t.Fatalf("a second look: %v, want held 1s", err)
				}
				// The send after the hold loses its outcome too: its doubt is held in its turn,
				// not sent again at once.
				e.advance(time.Second)
				e.smsc.fail = true
				_ = e.svc.SendSMS(ctx, job)
				e.smsc.fail = false
				if err := e.svc.SendSMS(ctx, job); !errors.As(err, &held) {
					t.Fatalf("the second doubt: %v, want held", err)
				}
			}
			if e.smsc.calls != 2 {
				t.Fatalf("%d sends, want 2", e.smsc.calls)
			}
		})
	}
}

func TestTextMatches(t *testing.T) {
	const text = "123456 is your verification code. It expires in 5 minutes."
	for _, tc := range []struct {
		name, got, text string
		want            bool
	}{
		{"the first 20 characters", text[:20], text, true},
		{"fewer", "123456 is", text, true},
		{"the code alone", "123456", text, true},
		{"another code", "123457 is your verif", text, false},
		{"a part of the code", "12345", text, false},
		{"other words", "123456 est votre cod", text, false},
		{"empty", "", text, false},
		{"longer than the text", text + "!", text, false},
		{"German, GSM's ä read as Latin-1", "123456 ist Ihr Best\xe4", "123456 ist Ihr Bestätigungscode.", true},
		{"UCS-2 octets", "\x001\x002\x003", "123456 هو رمز التحقق", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := workflows.TextMatches(tc.got, tc.text, "123456"); got != tc.want {
				t.Fatalf("TextMatches(%q) = %v, want %v", tc.got, got, tc.want)
			}
		})
	}
}
