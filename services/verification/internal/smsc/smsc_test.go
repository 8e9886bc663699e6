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
}

func (r *receipts) Receipt(_ context.Context, id, status string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
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
	return nil
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
		`mnv_smpp_bound{smsc=sandbox}`:                           1,
		`mnv_smpp_binds_total{smsc=sandbox}`:                     1,
		`mnv_smpp_submits_total{outcome=submitted,smsc=sandbox}`: 1,
		`mnv_smpp_receipts_total{smsc=sandbox,state=DELIVERED}`:  1,
		`mnv_smpp_submits_total{outcome=rejected,smsc=sandbox}`:  0,
		`mnv_smpp_receipts_dropped_total{smsc=sandbox}`:          0,
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
