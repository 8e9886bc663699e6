// Package smsc_test drives mnv's SMPP client (services/platform/smpp) against the test SMSC
// built on npm's smpp server (smsc.mjs beside this file): an implementation of SMPP 3.4 that
// is not ours parses our PDUs and decodes our texts, so the codec cannot agree with itself on a
// wrong layout. Each test starts its own SMSC.
package smsc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/smpp"
	"github.com/mnvhq/mnv/tests/harness"
)

// password is made at run time so no literal in the tests looks like a credential.
var password = fmt.Sprintf("pw%d", time.Now().UnixNano()%1000000)

func start(t *testing.T, cfg harness.SMSCConfig) *harness.SMSC {
	t.Helper()
	cfg.SystemID, cfg.Password = "mnv", password
	return harness.StartSMSC(t, cfg)
}

func clientConfig(s *harness.SMSC) smpp.Config {
	return smpp.Config{
		Addr: s.Addr, SystemID: "mnv", Password: password, SystemType: "OTP",
		ResponseTimeout: 2 * time.Second, EnquireLink: time.Minute,
		ReconnectMin: 20 * time.Millisecond, ReconnectMax: 200 * time.Millisecond,
		ThrottleMin: 10 * time.Millisecond, ThrottleMax: 100 * time.Millisecond,
	}
}

func dial(t *testing.T, cfg smpp.Config) *smpp.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := smpp.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// counter counts the client's events by kind.
type counter struct {
	mu sync.Mutex
	n  map[smpp.EventKind]int
}

func (c *counter) Observe(e smpp.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[smpp.EventKind]int{}
	}
	c.n[e.Kind]++
}

func (c *counter) get(k smpp.EventKind) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

func TestBind(t *testing.T) {
	s := start(t, harness.SMSCConfig{})
	cfg := clientConfig(s)
	cfg.Password = "wrong"
	if _, err := smpp.Dial(context.Background(), cfg); !errors.Is(err, smpp.StatusInvalidPassword) {
		t.Fatalf("a wrong password: %v", err)
	}
	cfg = clientConfig(s)
	cfg.SystemID = "someone"
	if _, err := smpp.Dial(context.Background(), cfg); !errors.Is(err, smpp.StatusInvalidSystemID) {
		t.Fatalf("an unknown system_id: %v", err)
	}

	// Bound, with enquire_link every 50 ms answered by the SMSC: the session lives on.
	cfg = clientConfig(s)
	cfg.EnquireLink = 50 * time.Millisecond
	ev := &counter{}
	cfg.Observer = ev
	c := dial(t, cfg)
	time.Sleep(500 * time.Millisecond)
	if _, err := c.Submit(context.Background(), smpp.Message{From: "mnv", To: "+15550001", Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	binds := s.Binds()
	if len(binds) != 3 || binds[2].Status != 0 || binds[2].SystemType != "OTP" || binds[2].InterfaceVersion != 0x34 {
		t.Fatalf("binds %+v", binds)
	}
	if ev.get(smpp.EventDisconnected) != 0 || ev.get(smpp.EventBound) != 1 {
		t.Fatalf("the session did not live: %v", ev.n)
	}

	// The SMSC's own enquire_link is answered, in a PDU npm's smpp reads.
	s.Enquire()
	await(t, "the answer to the SMSC's enquire_link", func() bool { return len(s.Enquired()) == 1 })
	if e := s.Enquired()[0]; e.Command != "enquire_link_resp" || e.Status != 0 {
		t.Fatalf("answer %+v", e)
	}
}

// TestTextArrivesIntact: what npm's smpp decodes is what we sent, in GSM 03.38 (extension
// characters too) or UCS-2, in one part or concatenated.
func TestTextArrivesIntact(t *testing.T) {
	s := start(t, harness.SMSCConfig{})
	c := dial(t, clientConfig(s))
	tests := []struct {
		name   string
		text   string
		coding int
		parts  int
	}{
		{"gsm", "Your mnv code is 123456", 0, 1},
		{"gsm accents and extension", "Ciao è già Ñoño ÆØÅ ΔΣ €5 [x] {y} ~^| \\ @£$¥", 0, 1},
		{"ucs2 cyrillic", "Ваш код: 123456", 8, 1},
		{"ucs2 cjk and emoji", "验证码 123456 😀", 8, 1},
		{"gsm 400 characters", strings.Repeat("0123456789 mnv code. ", 19) + "end!", 0, 3},
		{"gsm extension at a part boundary", strings.Repeat("a", 152) + "€" + strings.Repeat("b", 20), 0, 2},
		{"ucs2 150 characters", strings.Repeat("Код ", 37) + "ок", 8, 3},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			to := fmt.Sprintf("1555000%04d", i)
			ids, err := c.Submit(context.Background(), smpp.Message{From: "+15550000", To: to, Text: tt.text})
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) != tt.parts {
				t.Fatalf("%d ids, want %d", len(ids), tt.parts)
			}
			var got []harness.SMSCSubmit
			for _, r := range s.Received() {
				if r.Dest == to {
					got = append(got, r)
				}
			}
			if len(got) != tt.parts {
				t.Fatalf("the SMSC has %d parts, want %d", len(got), tt.parts)
			}
			var text strings.Builder
			for i, r := range got {
				if r.DataCoding != tt.coding || r.MessageID != ids[i] || r.SourceTON != 1 || r.DestTON != 1 {
					t.Fatalf("part %d: %+v", i, r)
				}
				if tt.parts > 1 {
					if r.Concat == nil || r.Concat.Total != tt.parts || r.Concat.Seq != i+1 || r.Concat.Ref != got[0].Concat.Ref || r.ESMClass&0x40 == 0 {
						t.Fatalf("part %d: concatenation %+v esm_class %#x", i, r.Concat, r.ESMClass)
					}
				} else if r.Concat != nil {
					t.Fatalf("a single part with a UDH: %+v", r.Concat)
				}
				text.WriteString(r.Text)
			}
			if text.String() != tt.text {
				t.Fatalf("the SMSC read\n%q\nwant\n%q", text.String(), tt.text)
			}
		})
	}
}

// TestReceipts: registered delivery brings a DELIVRD or UNDELIV receipt for the id the submit
// returned, acknowledged by the client; refused receipts bring none.
func TestReceipts(t *testing.T) {
	const delay = 200 * time.Millisecond
	s := start(t, harness.SMSCConfig{Undeliverable: []string{"15550666"}, ReceiptDelayMs: int(delay / time.Millisecond)})
	got := make(chan smpp.Receipt, 10)
	cfg := clientConfig(s)
	cfg.OnReceipt = func(r smpp.Receipt, ack smpp.Ack) { got <- r; ack(true) }
	c := dial(t, cfg)
	tests := []struct {
		to   string
		want smpp.MessageState
	}{
		{"+15550100", smpp.StateDelivered},
		{"+15550666", smpp.StateUndeliverable},
	}
	for _, tt := range tests {
		sent := time.Now()
		ids, err := c.Submit(context.Background(), smpp.Message{From: "mnv", To: tt.to, Text: "code 1", RegisteredDelivery: true})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-got:
			if d := time.Since(sent); d < delay {
				t.Fatalf("receipt after %s; the SMSC holds it %s", d, delay)
			}
			if r.MessageID != ids[0] || r.State != tt.want || r.Dest != strings.TrimPrefix(tt.to, "+") {
				t.Fatalf("receipt %+v for %s (id %s)", r, tt.to, ids[0])
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no receipt for %s", tt.to)
		}
	}
	await(t, "the receipts acknowledged", func() bool {
		rs := s.Receipts()
		return len(rs) == 2 && rs[0].Acked && rs[1].Acked
	})

	s.Post("/config", map[string]bool{"refuseReceipts": true})
	if _, err := c.Submit(context.Background(), smpp.Message{From: "mnv", To: "+15550101", Text: "code 2", RegisteredDelivery: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		t.Fatalf("a receipt while refused: %+v", r)
	case <-time.After(500 * time.Millisecond):
	}
}

// TestReceiptReference: npm's smpp reads our user_message_reference off the submit and the SMSC
// echoes it in the receipt, with the text's first 20 characters; an SMSC that leaves the
// reference out still gives the text.
func TestReceiptReference(t *testing.T) {
	for _, tc := range []struct {
		name string
		echo *bool
	}{
		{"echoed", nil},
		{"left out", new(bool)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, harness.SMSCConfig{ReceiptReference: tc.echo})
			got := make(chan smpp.Receipt, 1)
			cfg := clientConfig(s)
			cfg.OnReceipt = func(r smpp.Receipt, ack smpp.Ack) { got <- r; ack(true) }
			c := dial(t, cfg)
			ids, err := c.Submit(context.Background(), smpp.Message{From: "mnv", To: "+15550110", Text: "123456 is your verification code.",
				RegisteredDelivery: true, Reference: 0xA55A, HasReference: true})
			if err != nil {
				t.Fatal(err)
			}
			if rs := s.Received(); len(rs) != 1 || rs[0].Reference == nil || *rs[0].Reference != 0xA55A {
				t.Fatalf("the SMSC read %+v", rs)
			}
			select {
			case r := <-got:
				echoed := tc.echo == nil
				if r.MessageID != ids[0] || r.HasReference != echoed || (echoed && r.Reference != 0xA55A) || r.Text != "123456 is your verif" {
					t.Fatalf("receipt %+v", r)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no receipt")
			}
		})
	}
}

// TestUnacknowledgedReceiptComesAgain: a receipt whose session ended before the client
// acknowledged it is sent again on the next bind, as an operator's SMSC does.
func TestUnacknowledgedReceiptComesAgain(t *testing.T) {
	s := start(t, harness.SMSCConfig{})
	got := make(chan smpp.Receipt, 4)
	held := make(chan smpp.Ack, 1)
	var n atomic.Int32
	cfg := clientConfig(s)
	cfg.OnReceipt = func(r smpp.Receipt, ack smpp.Ack) {
		if n.Add(1) == 1 {
			held <- ack // the first is left unacknowledged while the session ends
		} else {
			ack(true)
		}
		got <- r
	}
	c := dial(t, cfg)
	ids, err := c.Submit(context.Background(), smpp.Message{From: "mnv", To: "+15550111", Text: "code 3", RegisteredDelivery: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		select {
		case r := <-got:
			if r.MessageID != ids[0] {
				t.Fatalf("receipt %d: %+v, want id %s", i, r, ids[0])
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("receipt %d did not come", i)
		}
		if i == 0 {
			s.Drop("reset")
		}
	}
	await(t, "the second copy acknowledged", func() bool {
		rs := s.Receipts()
		return len(rs) == 2 && !rs[0].Acked && rs[1].Acked && rs[1].SessionID != rs[0].SessionID
	})
	(<-held)(true) // too late: its session is gone, so nothing is written
	if rs := s.Receipts(); len(rs) != 2 || rs[0].Status != nil {
		t.Fatalf("receipts %+v after the late acknowledgement", rs)
	}
}

// TestDeferredReceiptComesAgain: a receipt the client answers with a temporary error (it could
// not record it yet) is sent again later on the same session, and is done once acknowledged.
func TestDeferredReceiptComesAgain(t *testing.T) {
	s := start(t, harness.SMSCConfig{})
	got := make(chan smpp.Receipt, 4)
	var n atomic.Int32
	cfg := clientConfig(s)
	cfg.OnReceipt = func(r smpp.Receipt, ack smpp.Ack) {
		ack(n.Add(1) > 1) // the first is deferred, as when the database is away
		got <- r
	}
	c := dial(t, cfg)
	ids, err := c.Submit(context.Background(), smpp.Message{From: "mnv", To: "+15550112", Text: "code 4", RegisteredDelivery: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		select {
		case r := <-got:
			if r.MessageID != ids[0] {
				t.Fatalf("receipt %d: %+v, want id %s", i, r, ids[0])
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("receipt %d did not come", i)
		}
	}
	await(t, "the second copy acknowledged", func() bool {
		rs := s.Receipts()
		return len(rs) == 2 && !rs[0].Acked && rs[0].Status != nil && *rs[0].Status == int(smpp.StatusReceiptDeferred) &&
			rs[1].Acked && rs[1].SessionID == rs[0].SessionID
	})
	select {
	case r := <-got:
		t.Fatalf("a third copy: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
}

// outbox sends messages by their own ids the way the verification service's outbox will: a
// failure that may be retried is retried, by the message's id, until every message is taken.
// It returns how many times it called Submit for each id.
func outbox(t *testing.T, c *smpp.Client, ids []string, workers int) map[string]int {
	t.Helper()
	queue := make(chan string, len(ids)*10)
	for _, id := range ids {
		queue <- id
	}
	var mu sync.Mutex
	attempts := map[string]int{}
	left := len(ids)
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var id string
				select {
				case id = <-queue:
				case <-ctx.Done():
					return
				}
				mu.Lock()
				attempts[id]++
				mu.Unlock()
				_, err := c.Submit(ctx, smpp.Message{From: "mnv", To: "+15550200", Text: "msg " + id + " your code is 000000"})
				if err != nil {
					if !smpp.Retryable(err) {
						t.Errorf("%s: %v", id, err)
						cancel()
						return
					}
					queue <- id // the caller's retry, by its own id
					continue
				}
				mu.Lock()
				left--
				done := left == 0
				mu.Unlock()
				if done {
					cancel()
				}
			}
		}()
	}
	wg.Wait()
	if left != 0 {
		t.Fatalf("%d messages never sent", left)
	}
	return attempts
}

// checkOnce: every id was taken by the SMSC exactly once, and the SMSC never saw an id more
// often than the caller submitted it (so the client resent nothing on its own).
//
// With exact false (a connection reset), an answer the SMSC wrote may be lost with the reset:
// no client can tell that message from one the SMSC never took, so the guarantee is the
// caller's: each id at least once, and a second copy only of an id the caller chose to resend
// after Submit said its outcome was uncertain.
func checkOnce(t *testing.T, s *harness.SMSC, ids []string, attempts map[string]int, exact bool) (unanswered int) {
	t.Helper()
	accepted := map[string]int{}
	seen := map[string]int{}
	for _, r := range s.Received() {
		id := strings.Fields(r.Text)[1]
		if r.Status != nil && *r.Status == int(smpp.StatusThrottled) {
			continue // refused for now, and resent by the client: that is allowed
		}
		seen[id]++
		if r.Accepted() {
			accepted[id]++
		} else {
			unanswered++
		}
	}
	for _, id := range ids {
		switch {
		case accepted[id] == 0:
			t.Errorf("%s never taken", id)
		case accepted[id] > 1 && (exact || accepted[id] > attempts[id]):
			t.Errorf("%s taken %d times (%d submits by the caller)", id, accepted[id], attempts[id])
		}
		if seen[id] > attempts[id] {
			t.Errorf("%s reached the SMSC %d times for %d submits by the caller", id, seen[id], attempts[id])
		}
	}
	return unanswered
}

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%03d", i)
	}
	return out
}

// TestThrottled: ESME_RTHROTTLED answers are backed off and resent by the client; every
// message arrives once.
func TestThrottled(t *testing.T) {
	s := start(t, harness.SMSCConfig{})
	ev := &counter{}
	cfg := clientConfig(s)
	cfg.Observer = ev
	c := dial(t, cfg)
	s.Throttle(8)
	msgs := ids(20)
	attempts := outbox(t, c, msgs, 5)
	checkOnce(t, s, msgs, attempts, true)
	for id, n := range attempts {
		if n != 1 {
			t.Errorf("%s submitted %d times by the caller; throttling is the client's to absorb", id, n)
		}
	}
	if ev.get(smpp.EventThrottled) != 8 || ev.get(smpp.EventSubmitted) != 20 {
		t.Fatalf("events %v", ev.n)
	}
}

// TestLostMidBurst: the SMSC unbinds or drops the connection in the middle of a burst; the
// client rebinds, the submits in flight fail as retryable, and the caller's retries by its own
// ids end with every message taken exactly once.
func TestLostMidBurst(t *testing.T) {
	tests := []struct {
		name  string
		lose  func(s *harness.SMSC)
		exact bool
	}{
		{"unbind", func(s *harness.SMSC) { s.DropAfter(12, "unbind") }, true},
		{"drop after its answers", func(s *harness.SMSC) { s.DropAfter(12, "close") }, true},
		{"reset", func(s *harness.SMSC) { s.DropAfter(12, "reset") }, false},
		{"twice", func(s *harness.SMSC) {
			s.DropAfter(8, "close")
			await(t, "a rebind", func() bool { return len(s.Binds()) >= 2 })
			s.DropAfter(8, "unbind")
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := start(t, harness.SMSCConfig{ReceiptDelayMs: 10})
			ev := &counter{}
			cfg := clientConfig(s)
			cfg.Observer = ev
			cfg.Window = 4
			c := dial(t, cfg)
			msgs := ids(60)
			done := make(chan map[string]int)
			go func() { done <- outbox(t, c, msgs, 8) }()
			tt.lose(s)
			attempts := <-done
			unanswered := checkOnce(t, s, msgs, attempts, tt.exact)
			retries := 0
			for _, n := range attempts {
				retries += n - 1
			}
			if ev.get(smpp.EventDisconnected) == 0 || len(s.Binds()) < 2 {
				t.Fatalf("no reconnect: events %v, binds %d", ev.n, len(s.Binds()))
			}
			if retries == 0 {
				t.Fatal("nothing was in flight when the session was lost; the test proved nothing")
			}
			t.Logf("%d retries by the caller, %d submits the SMSC read and never answered, events %v", retries, unanswered, ev.n)
		})
	}
}
