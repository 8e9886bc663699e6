package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/ratelimit"
	"github.com/mnvhq/mnv/services/platform/testkit/sandboxcamara"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/operatorapi"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
	"github.com/mnvhq/mnv/services/verification/internal/pumping"
	"github.com/mnvhq/mnv/services/verification/internal/store"
	"github.com/mnvhq/mnv/services/verification/internal/workflows"
)

// The workflow semantics of docs/api-decisions.md#workflows that issue 36 settled: what the
// answer's total holds, the daily SMS cap under bursts, a resend racing its own send, and the
// SIM-swap gate with the operator away.

// TestChargedIncludesTheSilentStep: a workflow's total is every charge it caused. The silent
// step shows its verification's charge (paid under the verification's own debit: the ledger
// is not asked again), an SMS step its own; an UNDETERMINED verification is free, so a Wi-Fi
// user's total is the SMS's alone.
func TestChargedIncludesTheSilentStep(t *testing.T) {
	balance := int64(95)
	tests := []struct {
		name        string
		outcome     workflows.SilentOutcome
		sms         bool // the workflow goes on to an SMS code, checked OK
		wantStatus  workflows.Status
		wantSilent  int64
		wantCharged int64
		wantDebits  int // the SMS steps' own debits: the silent step's is the verification's
	}{
		{"silent VERIFIED", workflows.SilentOutcome{Status: "VERIFIED", Charged: 5, BalanceAfter: &balance}, false, workflows.Verified, 5, 5, 0},
		{"silent NOT_VERIFIED", workflows.SilentOutcome{Status: "NOT_VERIFIED", Reason: "NUMBER_MISMATCH", Charged: 5, BalanceAfter: &balance}, false, workflows.NotVerified, 5, 5, 0},
		{"Wi-Fi, then SMS: UNDETERMINED is free", workflows.SilentOutcome{Status: "UNDETERMINED", Reason: "NO_NETWORK_IDENTITY"}, true, workflows.Verified, 0, 3, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, 100, workflows.Ports{})
			ctx := context.Background()
			w := e.start(t)
			o := tt.outcome
			o.VerificationID = uuid.NewString()
			w, err := e.svc.SilentResult(ctx, e.client, w.ID, o)
			if err != nil {
				t.Fatal(err)
			}
			if tt.sms {
				code := e.smsc.code(t, e.work(t)[0])
				if w, err = e.check(t, w.ID, code); err != nil {
					t.Fatal(err)
				}
			}
			w = e.get(t, w.ID) // as stored
			silent := w.Steps[0]
			if w.Status != tt.wantStatus || silent.Charged != tt.wantSilent || w.Charged() != tt.wantCharged || e.ledger.calls != tt.wantDebits {
				t.Fatalf("%s, silent step charged %d (%s), workflow %d, %d debits; want %s, %d, %d, %d",
					w.Status, silent.Charged, silent.ChargeStatus, w.Charged(), e.ledger.calls, tt.wantStatus, tt.wantSilent, tt.wantCharged, tt.wantDebits)
			}
			if tt.wantSilent > 0 && (silent.ChargeStatus != workflows.ChargeSettled || silent.BalanceAfter == nil || *silent.BalanceAfter != balance) {
				t.Fatalf("silent step charge %s, balance after %v", silent.ChargeStatus, silent.BalanceAfter)
			}
			if got := completedCharged(t, e); got != tt.wantCharged {
				t.Fatalf("verification.workflow.completed charged %d, want %d", got, tt.wantCharged)
			}
		})
	}
}

// completedCharged is the charged of the client's verification.workflow.completed event.
func completedCharged(t *testing.T, e *env) int64 {
	t.Helper()
	for _, raw := range e.events(t) {
		var a struct {
			Events []struct{ Type, Data string }
		}
		if err := json.Unmarshal([]byte(raw), &a); err != nil {
			t.Fatal(err)
		}
		for _, ev := range a.Events {
			if ev.Type != "verification.workflow.completed" {
				continue
			}
			var d struct{ Charged int64 }
			if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
				t.Fatal(err)
			}
			return d.Charged
		}
	}
	t.Fatal("no verification.workflow.completed event")
	return 0
}

// capGuard is the app's adapter (app.workflowGuard) over a real pumping guard on the test's
// database: the client's policy, its spend, the blocked prefixes. Set by is set once the
// environment (and its pool) exists.
type capGuard struct{ by pumping.ByID }

func (g *capGuard) Allow(ctx context.Context, r workflows.SMSRequest) error {
	return g.by.Check(ctx, pumping.Request{ClientID: r.ClientID, Number: r.Number, Country: r.Country, Sandbox: r.Sandbox, Addr: r.Address,
		SpentToday: r.SpentToday})
}

func (g *capGuard) Verified(ctx context.Context, number string) { g.by.Verified(ctx, number) }

// TestDailyCapUnderBurst: concurrent starts of a capped client send exactly what the cap
// allows: each start checks the spend and queues its step under the client's lock, so a step
// queued and not yet paid counts (at the client's last price) before its debit lands. The
// rest are BLOCKED SPEND_CAP, free; the ledger is charged for the sent ones only.
func TestDailyCapUnderBurst(t *testing.T) {
	tests := []struct {
		name     string
		cap      int64
		price    int64
		warm     int // SMS sent and paid, one by one, before the burst: the client's price known
		burst    int
		wantSent int // all SMS of the day, the warm ones included
	}{
		{"cap 4 at 1 credit, 20 at once", 4, 1, 0, 20, 4},
		// 3 paid before; 6, 9 pass (spend below 10), the next would start at 12.
		{"cap 10 at 3 credits, a send passes by its own price", 10, 3, 1, 20, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &capGuard{}
			e := newEnvConns(t, 1000, workflows.Ports{Guard: g}, int32(2*tt.burst+8))
			cfg := pumping.DefaultConfig()
			off := pumping.Limit{}
			cfg.PrefixLimit, cfg.NumberLimit, cfg.AddressLimit = off, off, off
			st := store.New(e.pool)
			guard, err := pumping.New(cfg, pumping.Ports{
				Blocks: st, Spend: st, Counters: pumping.NewLocalCounters(cfg.Window),
				PrefixLimiter: ratelimit.NewLocal(ratelimit.Limit(off)), NumberLimiter: ratelimit.NewLocal(ratelimit.Limit(off)),
			}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			g.by = pumping.ByID{Guard: guard, Clients: st}
			e.ledger.prices["SMS_OTP:GB"] = tt.price
			e.setPolicy(t, `{"channels":["SMS_OTP"],"smsCountries":["GB"],"dailySmsCap":`+jsonInt(tt.cap)+`}`)
			for range tt.warm {
				e.start(t)
				e.work(t)
			}
			ctx := context.Background()
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				started []workflows.Workflow
				errs    []error
			)
			for range tt.burst {
				wg.Add(1)
				go func() {
					defer wg.Done()
					w, err := e.svc.Start(ctx, workflows.StartRequest{ClientID: e.client, MobileNumber: gbNumber})
					mu.Lock()
					defer mu.Unlock()
					started, errs = append(started, w), append(errs, err)
				}()
			}
			wg.Wait()
			queued, capped := 0, 0
			for i, w := range started {
				if errs[i] != nil {
					t.Fatalf("start: %v", errs[i])
				}
				switch s := w.Steps[0]; {
				case s.Status == workflows.StepQueued:
					queued++
				case s.Status == workflows.StepBlocked && s.Reason == string(pumping.SpendCap) && w.Reason == workflows.ReasonBlocked:
					capped++
				default:
					t.Fatalf("a start ended %s %s, step %s %s", w.Status, w.Reason, s.Status, s.Reason)
				}
			}
			if queued != tt.wantSent-tt.warm || capped != tt.burst-queued {
				t.Fatalf("%d queued, %d capped; want %d queued, the rest capped", queued, capped, tt.wantSent-tt.warm)
			}
			e.work(t)
			if e.ledger.calls != tt.wantSent || e.ledger.net() != int64(tt.wantSent)*tt.price {
				t.Fatalf("%d debits, paid %d; want %d debits of %d", e.ledger.calls, e.ledger.net(), tt.wantSent, tt.price)
			}
			// Paid now, the day's spend refuses the next start as it did the burst's.
			if w := e.start(t); w.Steps[0].Reason != string(pumping.SpendCap) {
				t.Fatalf("a start after the burst: %s %s", w.Steps[0].Status, w.Steps[0].Reason)
			}
		})
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// pendingJobs are the SMS jobs waiting in River's table.
func pendingJobs(t *testing.T, e *env) []workflows.SMSJob {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT args FROM verification.river_job WHERE kind = $1 AND state = 'available' ORDER BY id`, workflows.SMSKind)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []workflows.SMSJob
	for rows.Next() {
		var raw []byte
		var a workflows.SMSArgs
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatal(err)
		}
		out = append(out, a.SMSJob)
	}
	return out
}

// TestResendWhileSending: a resend while the code in play is still QUEUED supersedes it only
// when its job has not begun (the job then finds it superseded, charging and sending nothing);
// once the job asked for the charge or made a submit, the resend is 429 "still being sent"
// with a Retry-After, and nothing changes: never a paid SMS left unsent, never two codes for
// one resend. Once the step is SENT, the resend works as always.
func TestResendWhileSending(t *testing.T) {
	tests := []struct {
		name string
		// stall runs the first job into the state under test (nil: the job has not begun).
		stall    func(e *env)
		wantBusy bool
	}{
		{"the job has not begun: superseded", nil, false},
		{"the charge is pending (accounts away)", func(e *env) { e.ledger.down = true }, true},
		{"paid, a submit whose outcome was lost", func(e *env) { e.smsc.fail = true }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, 100, workflows.Ports{})
			// The lost submit's retry sends at once rather than holding for a receipt (the
			// hold has its own tests): the resend is refused while in doubt either way.
			e.svc = e.svc.WithInDoubtHold(0)
			e.setPolicy(t, `{"channels":["SMS_OTP"],"resendCooldownSeconds":0}`)
			ctx := context.Background()
			w := e.start(t)
			if tt.stall != nil {
				tt.stall(e)
				jobs := pendingJobs(t, e)
				if err := e.svc.SendSMS(ctx, jobs[0]); err == nil {
					t.Fatal("the stalled job succeeded")
				}
			}
			got, err := e.svc.Resend(ctx, e.client, w.ID)
			if !tt.wantBusy {
				if err != nil || steps(got) != "SMS_OTP:SUPERSEDED SMS_OTP:QUEUED" {
					t.Fatalf("resend: %v %s", err, steps(got))
				}
				return
			}
			f := fault.Find(err, fault.RateLimited)
			if f == nil || f.RetryAfter <= 0 || !errors.Is(err, workflows.ErrCodeSending) {
				t.Fatalf("resend while sending: %v", err)
			}
			if w := e.get(t, w.ID); steps(w) != "SMS_OTP:QUEUED" || w.Code.Resends != 0 {
				t.Fatalf("the refused resend changed the workflow: %s, %d resends", steps(w), w.Code.Resends)
			}
			// The job's retry finishes the send; then a resend is a resend.
			e.ledger.down, e.smsc.fail = false, false
			e.work(t)
			if got, err = e.svc.Resend(ctx, e.client, w.ID); err != nil || steps(got) != "SMS_OTP:SENT SMS_OTP:QUEUED" {
				t.Fatalf("resend once sent: %v %s", err, steps(got))
			}
			e.work(t)
			if e.ledger.net() != 6 || len(e.smsc.sent) != 2 {
				t.Fatalf("paid %d for %d messages; want two paid, two sent", e.ledger.net(), len(e.smsc.sent))
			}
		})
	}
}

// TestSIMSwapWithTheFakeOperator: the SIM-swap gate through the operator API client and the
// fake operator. Under BLOCK a check that gets no answer (the operator erroring or unreachable)
// fails the workflow closed, SIM_SWAP_UNKNOWN, nothing queued; the answer says the check was
// not made (UNAVAILABLE, no time). FALLBACK goes on to the code, REPORT to the silent step.
func TestSIMSwapWithTheFakeOperator(t *testing.T) {
	tests := []struct {
		name       string
		mode       string
		line       sandboxcamara.Line
		down       bool // the operator is not listening
		wantStatus workflows.Status
		wantReason string
		wantSteps  string
		wantSIM    workflows.SwapResult
	}{
		{"block, the operator erring", "BLOCK", sandboxcamara.Line{Status5xx: http.StatusServiceUnavailable}, false, workflows.Failed, workflows.ReasonSIMSwapUnknown, "", workflows.SwapUnavailable},
		{"block, the operator unreachable", "BLOCK", sandboxcamara.Line{}, true, workflows.Failed, workflows.ReasonSIMSwapUnknown, "", workflows.SwapUnavailable},
		{"block, not served", "BLOCK", sandboxcamara.Line{NotServed: true}, false, workflows.Failed, workflows.ReasonSIMSwapUnknown, "", workflows.SwapUnavailable},
		{"block, swapped an hour ago", "BLOCK", sandboxcamara.Line{SIMChange: time.Now().Add(-time.Hour)}, false, workflows.Failed, workflows.ReasonSIMSwapped, "", workflows.SwapSwapped},
		{"block, no recent swap", "BLOCK", sandboxcamara.Line{SIMChange: time.Now().Add(-2000 * time.Hour)}, false, workflows.InProgress, "", "SILENT:PENDING", workflows.SwapNotSwapped},
		{"fallback, the operator erring", "FALLBACK", sandboxcamara.Line{Status5xx: http.StatusBadGateway}, false, workflows.InProgress, "", "SMS_OTP:QUEUED", workflows.SwapUnavailable},
		{"report, the operator erring", "REPORT", sandboxcamara.Line{Status5xx: http.StatusBadGateway}, false, workflows.InProgress, "", "SILENT:PENDING", workflows.SwapUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secret := "swap-" + uuid.NewString() // made at run time: no literal looks like a credential
			fake, err := sandboxcamara.Start("127.0.0.1:0", sandboxcamara.Options{Clients: []sandboxcamara.Client{{ID: "mnv", Secret: secret}}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fake.Close() })
			fake.SetLine(gbNumber, tt.line)
			op := operators.Operator{ID: "op-gb", Country: "GB", Methods: []operators.Method{operators.MethodHeaderEnrichment}, Swap: &operators.Swap{
				DiscoveryURL: fake.DiscoveryURL(), APIRoot: fake.URL, Purpose: operators.DefaultSwapPurpose, SIMSwapVersion: "v2",
				Registration: operators.Registration{ClientID: "mnv", ClientAuth: operators.ClientSecretBasic, ClientSecret: secret}, Grant: operators.GrantClientCredentials,
			}}
			sw, err := operatorapi.NewSwaps([]operators.Operator{op}, &http.Client{Timeout: 2 * time.Second}, operatorapi.SwapOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tt.down {
				fake.Close()
			}
			e := newEnv(t, 100, workflows.Ports{SIMSwap: operatorapi.SIMSwapGate{Swaps: sw}})
			e.setPolicy(t, `{"smsCountries":["GB"],"simSwap":{"mode":"`+tt.mode+`","maxAgeHours":24}}`)
			w := e.start(t)
			if w.Status != tt.wantStatus || w.Reason != tt.wantReason || steps(w) != tt.wantSteps || w.SIMSwap != tt.wantSIM {
				t.Fatalf("got %s %q [%s] %s", w.Status, w.Reason, steps(w), w.SIMSwap)
			}
			if (tt.wantSIM == workflows.SwapUnavailable) != w.SIMCheckedAt.IsZero() {
				t.Fatalf("simCheckedAt %v with %s", w.SIMCheckedAt, w.SIMSwap)
			}
			if stored := e.get(t, w.ID); stored.Status != w.Status || stored.Reason != w.Reason || stored.SIMSwap != w.SIMSwap {
				t.Fatalf("stored %s %s %s", stored.Status, stored.Reason, stored.SIMSwap)
			}
			if tt.wantStatus == workflows.Failed && (len(pendingJobs(t, e)) != 0 || e.ledger.calls != 0) {
				t.Fatal("a failed start queued or charged an SMS")
			}
		})
	}
}

// TestAppNameInTheSMS: the policy's app name (the country's over the default part's) is in the
// text the SMS centre gets; a workflow keeps the name it started with.
func TestAppNameInTheSMS(t *testing.T) {
	tests := []struct {
		name, policy, locale, want string
	}{
		{"no name", `{"channels":["SMS_OTP"]}`, "en-GB", " is your verification code."},
		{"the default part's", `{"channels":["SMS_OTP"],"appName":"Acme"}`, "en-GB", " is your Acme verification code."},
		{"the country's", `{"channels":["SMS_OTP"],"appName":"Acme","countries":{"GB":{"appName":"Acme UK"}}}`, "fr-FR", " est votre code de vérification Acme UK."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, 100, workflows.Ports{})
			e.setPolicy(t, tt.policy)
			if _, err := e.svc.Start(context.Background(), workflows.StartRequest{ClientID: e.client, MobileNumber: gbNumber, Locale: tt.locale}); err != nil {
				t.Fatal(err)
			}
			e.setPolicy(t, `{"channels":["SMS_OTP"],"appName":"Changed"}`) // after the start: not this workflow's
			step := e.work(t)[0]
			if text := e.smsc.sent[step].Text; !strings.Contains(text, tt.want) {
				t.Fatalf("text %q, want it to contain %q", text, tt.want)
			}
		})
	}
}

// TestPageAddress: on the page's routes the browser's address (as the gateway resolved it) is
// the workflow's end-user address when its start gave none, so the pumping guard's budget per
// address applies to the page's resends, and to an SMS a page's read begins (a silent step
// timed out); an address the start gave is kept; an IPv6 address is kept by its /64.
func TestPageAddress(t *testing.T) {
	tests := []struct {
		name, start, page, want string // "" none
	}{
		{"the page's, when the start gave none", "", "198.51.100.7", "198.51.100.7"},
		{"the start's is kept", "203.0.113.9", "198.51.100.7", "203.0.113.9"},
		{"an IPv6 page by its /64", "", "2001:db8:5:6:7:8:9:a", "2001:db8:5:6::"},
		{"no address anywhere", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked []workflows.SMSRequest
			e := newEnv(t, 100, workflows.Ports{Guard: guard{asked: &asked}})
			e.setPolicy(t, `{"silentTimeoutSeconds":5,"resendCooldownSeconds":0}`)
			ctx := context.Background()
			tr, err := store.New(e.pool).InsertTransaction(ctx, domain.Transaction{ID: uuid.NewString(), ClientID: e.client, ServiceCode: "VERIFY", MetadataID: "m",
				Features: []string{"VERIFY"}, Operators: principal.DefaultOperators(), Status: domain.TransactionPending, ExpiresAt: time.Now().Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			req := workflows.StartRequest{ClientID: e.client, MobileNumber: gbNumber, TransactionID: &tr.ID}
			if tt.start != "" {
				req.EndUserAddress = netip.MustParseAddr(tt.start)
			}
			if _, err := e.svc.Start(ctx, req); err != nil {
				t.Fatal(err)
			}
			var page netip.Addr
			if tt.page != "" {
				page = netip.MustParseAddr(tt.page)
			}
			// The silent step times out while the page reads: the SMS it begins is the page's.
			e.advance(10 * time.Second)
			w, err := e.svc.GetOfTransaction(ctx, e.client, tr.ID, page)
			if err != nil || steps(w) != "SILENT:TIMED_OUT SMS_OTP:QUEUED" {
				t.Fatalf("read: %v %s", err, steps(w))
			}
			if _, err := e.svc.ResendOfTransaction(ctx, e.client, tr.ID, page); err != nil {
				t.Fatal(err)
			}
			var want netip.Addr
			if tt.want != "" {
				want = netip.MustParseAddr(tt.want)
			}
			if len(asked) != 2 || asked[0].Address != want || asked[1].Address != want {
				t.Fatalf("the guard was asked %+v, want two sends from %v", asked, want)
			}
			if got := e.get(t, w.ID); got.Address != want {
				t.Fatalf("stored address %v, want %v", got.Address, want)
			}
		})
	}
}
