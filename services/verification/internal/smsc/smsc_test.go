package smsc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/metricstest"
	"github.com/mnvhq/mnv/services/platform/smpp"
	"github.com/mnvhq/mnv/services/platform/testkit/sandboxsmsc"
	"github.com/mnvhq/mnv/services/verification/internal/otp"
	"github.com/mnvhq/mnv/services/verification/internal/workflows"
)

// receipts keeps what the provider recorded.
type receipts struct {
	mu      sync.Mutex
	got     map[string]string
	inDoubt []workflows.DeliveryReceipt
	// unknown answers every id as never recorded (a crash lost the submit's record).
	unknown bool
	// noStep answers every receipt in doubt as matching no step (another system's message).
	noStep bool
	// fail is how many calls fail as with the database away.
	fail int
	// calls counts Receipt's calls.
	calls int
}

var errDatabaseAway = errors.New("database away")

func (r *receipts) Receipt(_ context.Context, id, status string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.fail > 0 {
		r.fail--
		return errDatabaseAway
	}
	if r.unknown {
		return fault.ErrNotFound
	}
	r.got[id] = status
	return nil
}

func (r *receipts) ReceiptInDoubt(_ context.Context, d workflows.DeliveryReceipt) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inDoubt = append(r.inDoubt, d)
	if r.noStep {
		return fault.ErrNotFound
	}
	return nil
}

func (r *receipts) counts() (calls, inDoubt int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls, len(r.inDoubt)
}

func (r *receipts) of(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[id]
}

// TestSendAndReceipt: a message goes over a real SMPP bind (the sandbox SMSC), its receipt
// comes back to the workflows as DELIVERED, and the bind's counters say so.
func TestSendAndReceipt(t *testing.T) {
	password := fmt.Sprintf("pw%06d", time.Now().Nanosecond()%1000000)
	srv, err := sandboxsmsc.Listen("127.0.0.1:0", sandboxsmsc.Config{SystemID: "mnv", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	rec := &receipts{got: map[string]string{}}
	p := New(Config{Name: "sandbox", Source: "mnv", Config: smpp.Config{Addr: srv.Addr(), SystemID: "mnv", Password: password}}, rec, m, zap.NewNop())
	p.Start()
	defer p.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ids []string
	for {
		ids, err = p.Send(ctx, workflows.Message{ID: "step-1", To: "+33612345678", Text: "123456 is your verification code."})
		if !errors.Is(err, workflows.ErrNotSent) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond) // the first bind is made in the background
	}
	if err != nil || len(ids) != 1 {
		t.Fatalf("Send = %v, %v", ids, err)
	}
	got := srv.Messages("33612345678")
	if len(got) != 1 || got[0].Text != "123456 is your verification code." || got[0].From != "mnv" {
		t.Fatalf("the SMSC has %+v", got)
	}
	for rec.of(ids[0]) == "" && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	if s := rec.of(ids[0]); s != workflows.ReceiptDelivered {
		t.Fatalf("receipt %q, want %s", s, workflows.ReceiptDelivered)
	}
	series := metricstest.Gather(t, reg)
	for name, want := range map[string]float64{
		`mnv_smpp_bound{smsc=sandbox}`:                                       1,
		`mnv_smpp_binds_total{smsc=sandbox}`:                                 1,
		`mnv_smpp_submits_total{outcome=submitted,smsc=sandbox}`:             1,
		`mnv_smpp_receipts_total{smsc=sandbox,state=DELIVERED}`:              1,
		`mnv_smpp_submits_total{outcome=rejected,smsc=sandbox}`:              0,
		`mnv_smpp_receipts_deferred_total{reason=queue_full,smsc=sandbox}`:   0,
		`mnv_smpp_receipts_deferred_total{reason=not_recorded,smsc=sandbox}`: 0,
	} {
		if series[name] != want {
			t.Errorf("%s = %v, want %v", name, series[name], want)
		}
	}
}

// TestUnknownIdIsMatchedInDoubt: a receipt whose message id stays unknown for the retries is
// handed over to be matched against the steps in doubt, with the number, the attempt's
// reference the SMSC echoed and the start of the text.
func TestUnknownIdIsMatchedInDoubt(t *testing.T) {
	password := fmt.Sprintf("pw%06d", time.Now().Nanosecond()%1000000)
	srv, err := sandboxsmsc.Listen("127.0.0.1:0", sandboxsmsc.Config{SystemID: "mnv", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rec := &receipts{got: map[string]string{}, unknown: true}
	p := New(Config{Name: "sandbox", Source: "mnv", Config: smpp.Config{Addr: srv.Addr(), SystemID: "mnv", Password: password}}, rec, nil, zap.NewNop())
	p.Start()
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var ids []string
	for {
		ids, err = p.Send(ctx, workflows.Message{ID: "step-1", To: "+33612345678", Text: "123456 is your verification code.", Reference: 0x1234})
		if !errors.Is(err, workflows.ErrNotSent) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || len(ids) != 1 {
		t.Fatalf("Send = %v, %v", ids, err)
	}
	want := workflows.DeliveryReceipt{ProviderID: ids[0], Status: workflows.ReceiptDelivered, To: "33612345678",
		Reference: 0x1234, HasReference: true, Text: "123456 is your verif"}
	for ctx.Err() == nil {
		rec.mu.Lock()
		got := slices.Clone(rec.inDoubt)
		rec.mu.Unlock()
		if len(got) > 0 {
			if len(got) != 1 || got[0] != want {
				t.Fatalf("in doubt %+v, want %+v", got, want)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the receipt of an unknown id was not matched in doubt")
}

// TestNotBoundIsNotSent: before any bind, nothing left, so the retry is not in doubt.
func TestNotBoundIsNotSent(t *testing.T) {
	p := New(Config{Name: "away", Config: smpp.Config{Addr: "127.0.0.1:1"}}, &receipts{}, nil, zap.NewNop())
	if _, err := p.Send(context.Background(), workflows.Message{To: "+33612345678", Text: "x"}); !errors.Is(err, workflows.ErrNotSent) {
		t.Fatalf("Send before a bind = %v, want ErrNotSent", err)
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		partial bool
		want    error // nil: neither refused nor not sent (the outcome is unknown)
	}{
		{"invalid destination", smpp.StatusInvalidDestAddr, false, workflows.ErrRefused},
		{"refused after a part", smpp.StatusInvalidDestAddr, true, workflows.ErrRefused},
		{"throttled past the retries", smpp.StatusThrottled, false, workflows.ErrNotSent},
		{"throttled after a part", smpp.StatusThrottled, true, nil},
		{"closed", smpp.ErrClosed, false, workflows.ErrNotSent},
		{"connection lost in flight", smpp.ErrConnectionLost, false, nil},
		{"no response", smpp.ErrResponseTimeout, false, nil},
		{"waited for the window too long", context.DeadlineExceeded, false, workflows.ErrNotSent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(fmt.Errorf("smpp: submit part 1 of 1: %w", tc.err), tc.partial)
			refused, notSent := errors.Is(got, workflows.ErrRefused), errors.Is(got, workflows.ErrNotSent)
			switch {
			case tc.want == nil && (refused || notSent):
				t.Errorf("%v: refused %v, not sent %v; want unknown", got, refused, notSent)
			case tc.want != nil && !errors.Is(got, tc.want):
				t.Errorf("%v, want %v", got, tc.want)
			}
		})
	}
}

func TestReceiptStatus(t *testing.T) {
	for s, want := range map[smpp.MessageState]string{
		smpp.StateDelivered: workflows.ReceiptDelivered, smpp.StateUndeliverable: workflows.ReceiptUndeliverable,
		smpp.StateExpired: workflows.ReceiptUndeliverable, smpp.StateRejected: workflows.ReceiptUndeliverable,
		smpp.StateDeleted: workflows.ReceiptUndeliverable, smpp.StateEnroute: "", smpp.StateAccepted: "", smpp.StateUnknown: "",
	} {
		if got, final := receiptStatus(s); got != want || final != (want != "") {
			t.Errorf("%v: %q %v, want %q", s, got, final, want)
		}
	}
}

// TestTextsFitOneSMS: every language's text, with the longest code and lifetime a policy
// allows, with no app name and with the longest one (of the widest characters too), is one SMS
// part (a second part is a second charge from the operator), in GSM 7-bit wherever the
// language's letters are in it.
func TestTextsFitOneSMS(t *testing.T) {
	longest := strings.Repeat("W", workflows.MaxAppName)
	for _, tc := range []struct {
		locale string
		gsm    bool
	}{{"en-GB", true}, {"fr-FR", true}, {"de-DE", true}, {"es-ES", true}, {"ar-AE", false}, {"xx", true}} {
		for _, app := range []string{"", longest, "Ñ@£$¥èéùìòÇØøÅåΔ_ΦΓ"} {
			text := workflows.Text(tc.locale, app, otp.Parse("1234567890"), 30*time.Minute)
			enc, err := smpp.EncodeText(text)
			if err != nil {
				t.Fatalf("%s: %v", tc.locale, err)
			}
			if len(enc.Parts) != 1 || (enc.DataCoding == smpp.CodingDefault) != tc.gsm {
				t.Errorf("%s, app %q: %q is %d parts, coding %#x; want one, GSM %v", tc.locale, app, text, len(enc.Parts), enc.DataCoding, tc.gsm)
			}
			if app != "" && !strings.Contains(text, app) {
				t.Errorf("%s: %q does not name the app", tc.locale, text)
			}
		}
	}
}

// TestAppNameCharactersAreGSMBasic: each character a policy's app name may use is one septet
// of the SMPP encoder's GSM 7-bit (the basic table, not the extension's two), so the length
// bound is a bound on the message.
func TestAppNameCharactersAreGSMBasic(t *testing.T) {
	for _, r := range workflows.GSMPrinted() {
		enc, err := smpp.EncodeText(strings.Repeat(string(r), 160))
		if err != nil || enc.DataCoding != smpp.CodingDefault || len(enc.Parts) != 1 {
			t.Errorf("%q: not one GSM septet (%v)", r, err)
		}
	}
}

// sendOne starts p, sends one message once it is bound and returns its ids.
func sendOne(t *testing.T, p *Provider, to string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ids, err := p.Send(ctx, workflows.Message{ID: "step-1", To: to, Text: "123456 is your verification code.", Reference: 0x4242})
		if errors.Is(err, workflows.ErrNotSent) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond) // the first bind is made in the background
			continue
		}
		if err != nil || len(ids) != 1 {
			t.Fatalf("Send = %v, %v", ids, err)
		}
		return ids
	}
}

// TestReceiptAcknowledgedOnceRecorded: a receipt is acknowledged once it is recorded or known
// to be no step of ours; one whose record failed (the database away) is answered with the
// temporary error, and the SMSC sends it again until it is recorded. The sandbox SMSC sends a
// receipt again 200 ms after such an answer and never after an acknowledgement.
func TestReceiptAcknowledgedOnceRecorded(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  *receipts
		// calls and inDoubt are Receipt's and ReceiptInDoubt's calls in all, deferred the
		// receipts answered with the temporary error.
		calls, inDoubt int
		deferred       float64
		recorded       bool
	}{
		{"recorded at once", &receipts{got: map[string]string{}}, 1, 0, 0, true},
		{"record failed: deferred, sent again, recorded", &receipts{got: map[string]string{}, fail: receiptAttempts},
			receiptAttempts + 1, 0, 1, true},
		{"no step of ours: acknowledged", &receipts{got: map[string]string{}, unknown: true, noStep: true}, receiptAttempts, 1, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := sandboxsmsc.Listen("127.0.0.1:0", sandboxsmsc.Config{SystemID: "mnv", Password: "pw"})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			reg := prometheus.NewRegistry()
			m, err := NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			p := New(Config{Name: "sandbox", Source: "mnv", Config: smpp.Config{Addr: srv.Addr(), SystemID: "mnv", Password: "pw"}}, tc.rec, m, zap.NewNop())
			p.retryPause = time.Millisecond
			p.Start()
			defer p.Close()
			ids := sendOne(t, p, "+33612345679")
			deadline := time.Now().Add(10 * time.Second)
			for {
				calls, inDoubt := tc.rec.counts()
				if (calls >= tc.calls && inDoubt >= tc.inDoubt) || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(500 * time.Millisecond) // a copy the SMSC sent again would be taken by now
			if calls, inDoubt := tc.rec.counts(); calls != tc.calls || inDoubt != tc.inDoubt {
				t.Fatalf("%d Receipt and %d ReceiptInDoubt calls, want %d and %d", calls, inDoubt, tc.calls, tc.inDoubt)
			}
			if got := tc.rec.of(ids[0]); (got == workflows.ReceiptDelivered) != tc.recorded {
				t.Fatalf("recorded %q, want recorded %v", got, tc.recorded)
			}
			series := metricstest.Gather(t, reg)
			if got := series[`mnv_smpp_receipts_deferred_total{reason=not_recorded,smsc=sandbox}`]; got != tc.deferred {
				t.Fatalf("deferred not_recorded = %v, want %v", got, tc.deferred)
			}
		})
	}
}

// ackLog keeps the answers given to receipts, by message id.
type ackLog struct {
	mu  sync.Mutex
	got map[string][]bool
}

func (a *ackLog) ack(id string) smpp.Ack {
	return func(ok bool) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.got[id] = append(a.got[id], ok)
	}
}

func (a *ackLog) of(id string) []bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.got[id])
}

// blockingReceipts records a receipt once released, telling started when it begins.
type blockingReceipts struct {
	started chan struct{}
	release chan struct{}
}

func (b *blockingReceipts) Receipt(context.Context, string, string) error {
	b.started <- struct{}{}
	<-b.release
	return nil
}

func (b *blockingReceipts) ReceiptInDoubt(context.Context, workflows.DeliveryReceipt) error {
	return fault.ErrNotFound
}

// TestReceiptQueueFullAndClose: a receipt that finds the queue full is answered with the
// temporary error at once (counted); at Close, the receipts being recorded are acknowledged once
// recorded, and those still queued are not answered at all (the SMSC sends them to the next
// bind).
func TestReceiptQueueFullAndClose(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	rec := &blockingReceipts{started: make(chan struct{}, receiptWorkers), release: make(chan struct{})}
	p := New(Config{Name: "away", Config: smpp.Config{Addr: "127.0.0.1:1"}}, rec, m, zap.NewNop())
	p.queue = make(chan receipt, 2)
	m.observer("away") // the series exist from the start, as when bound
	acks := &ackLog{got: map[string][]bool{}}
	delivered := func(id string) smpp.Receipt { return smpp.Receipt{MessageID: id, State: smpp.StateDelivered} }
	p.Start()
	var busy []string // one per worker, each blocked recording it
	for i := range receiptWorkers {
		id := fmt.Sprintf("busy-%d", i)
		busy = append(busy, id)
		p.onReceipt(delivered(id), acks.ack(id))
		<-rec.started
	}
	for _, id := range []string{"queued-1", "queued-2", "refused"} {
		p.onReceipt(delivered(id), acks.ack(id))
	}
	if got := acks.of("refused"); !slices.Equal(got, []bool{false}) {
		t.Fatalf("a receipt finding the queue full: answers %v, want the temporary error at once", got)
	}
	closed := make(chan struct{})
	go func() { _ = p.Close(); close(closed) }()
	<-p.stop
	close(rec.release)
	<-closed
	for _, id := range busy {
		if got := acks.of(id); !slices.Equal(got, []bool{true}) {
			t.Errorf("%s, recorded as Close came: answers %v, want one acknowledgement", id, got)
		}
	}
	for _, id := range []string{"queued-1", "queued-2"} {
		if got := acks.of(id); len(got) != 0 {
			t.Errorf("%s, queued at Close: answers %v, want none", id, got)
		}
	}
	if got := metricstest.Gather(t, reg)[`mnv_smpp_receipts_deferred_total{reason=queue_full,smsc=away}`]; got != 1 {
		t.Errorf("deferred queue_full = %v, want 1", got)
	}
}
