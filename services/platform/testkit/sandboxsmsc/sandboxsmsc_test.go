package sandboxsmsc_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/smpp"
	"github.com/mnvhq/mnv/services/platform/testkit/sandboxsmsc"
)

var password = fmt.Sprintf("p%d", time.Now().UnixNano()%10000000)

func start(t *testing.T, cfg sandboxsmsc.Config) *sandboxsmsc.Server {
	t.Helper()
	cfg.SystemID, cfg.Password = "mnv", password
	s, err := sandboxsmsc.Listen("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func dial(t *testing.T, s *sandboxsmsc.Server, mod func(*smpp.Config)) *smpp.Client {
	t.Helper()
	cfg := smpp.Config{Addr: s.Addr(), SystemID: "mnv", Password: password, ResponseTimeout: 2 * time.Second,
		ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	c, err := smpp.Dial(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestBind(t *testing.T) {
	s := start(t, sandboxsmsc.Config{})
	tests := []struct {
		name, systemID, password string
		want                     error
	}{
		{"accepted", "mnv", password, nil},
		{"wrong password", "mnv", "x", smpp.StatusInvalidPassword},
		{"unknown system", "other", password, smpp.StatusInvalidSystemID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := smpp.Dial(context.Background(), smpp.Config{Addr: s.Addr(), SystemID: tt.systemID, Password: tt.password})
			if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if c != nil {
				_ = c.Close()
			}
		})
	}
}

func TestKeepsMessages(t *testing.T) {
	s := start(t, sandboxsmsc.Config{})
	c := dial(t, s, nil)
	tests := []struct {
		to, text string
		parts    int
	}{
		{"+15550001", "Your mnv code is 123456", 1},
		{"+15550002", "Ваш код 654321", 1},
		{"+15550003", strings.Repeat("long GSM text € ", 25), 3},
		{"+15550004", strings.Repeat("长", 100), 2},
	}
	for _, tt := range tests {
		ids, err := c.Submit(context.Background(), smpp.Message{From: "mnv", To: tt.to, Text: tt.text})
		if err != nil {
			t.Fatal(err)
		}
		got := s.Messages(tt.to)
		if len(got) != 1 {
			t.Fatalf("%s: %d messages", tt.to, len(got))
		}
		m := got[0]
		if m.Text != tt.text || m.Parts != tt.parts || m.From != "mnv" || m.To != strings.TrimPrefix(tt.to, "+") || strings.Join(m.IDs, ",") != strings.Join(ids, ",") {
			t.Fatalf("%s: kept %+v, ids %v", tt.to, m, ids)
		}
	}
	if len(s.All()) != len(tests) {
		t.Fatalf("All: %d", len(s.All()))
	}
}

func TestKeepsTheNewest(t *testing.T) {
	s := start(t, sandboxsmsc.Config{Keep: 3})
	c := dial(t, s, nil)
	for i := 0; i < 5; i++ {
		if _, err := c.Submit(context.Background(), smpp.Message{From: "mnv", To: "1555", Text: fmt.Sprint("n", i)}); err != nil {
			t.Fatal(err)
		}
	}
	var texts []string
	for _, m := range s.All() {
		texts = append(texts, m.Text)
	}
	if strings.Join(texts, " ") != "n2 n3 n4" {
		t.Fatalf("kept %v", texts)
	}
}

func TestReceipts(t *testing.T) {
	s := start(t, sandboxsmsc.Config{ReceiptDelay: 10 * time.Millisecond})
	var mu sync.Mutex
	var got []smpp.Receipt
	c := dial(t, s, func(cfg *smpp.Config) {
		cfg.OnReceipt = func(r smpp.Receipt, ack smpp.Ack) { mu.Lock(); got = append(got, r); mu.Unlock(); ack(true) }
	})
	ids, err := c.Submit(context.Background(), smpp.Message{From: "mnv", To: "+15550009", Text: strings.Repeat("x", 200), RegisteredDelivery: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(context.Background(), smpp.Message{From: "mnv", To: "+15550009", Text: "no receipt"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a third receipt would be a bug
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("%d receipts, want one per part of the registered message", len(got))
	}
	for _, r := range got {
		if r.State != smpp.StateDelivered || r.Dest != "15550009" || (r.MessageID != ids[0] && r.MessageID != ids[1]) {
			t.Fatalf("receipt %+v for ids %v", r, ids)
		}
	}
}

// TestReceiptEchoesTheReference: a receipt carries the submit's user_message_reference back,
// and the text's first 20 characters.
func TestReceiptEchoesTheReference(t *testing.T) {
	s := start(t, sandboxsmsc.Config{})
	got := make(chan smpp.Receipt, 2)
	c := dial(t, s, func(cfg *smpp.Config) { cfg.OnReceipt = func(r smpp.Receipt, ack smpp.Ack) { got <- r; ack(true) } })
	for _, m := range []smpp.Message{
		{From: "mnv", To: "+15550010", Text: "123456 is your verification code.", RegisteredDelivery: true, Reference: 0xCAFE, HasReference: true},
		{From: "mnv", To: "+15550011", Text: "123456 ist Ihr Bestätigungscode.", RegisteredDelivery: true},
	} {
		if _, err := c.Submit(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]smpp.Receipt{
		"15550010": {Reference: 0xCAFE, HasReference: true, Text: "123456 is your verif"},
		"15550011": {Text: "123456 ist Ihr Best"}, // up to the first letter GSM does not write as ASCII
	}
	for range want {
		select {
		case r := <-got:
			w := want[r.Dest]
			if r.Reference != w.Reference || r.HasReference != w.HasReference || r.Text != w.Text {
				t.Fatalf("receipt to %s: reference %#x (%v), text %q; want %#x (%v), %q", r.Dest, r.Reference, r.HasReference, r.Text, w.Reference, w.HasReference, w.Text)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no receipt")
		}
	}
}

// TestUnacknowledgedReceiptWaitsForTheNextBind: a receipt whose session ended before the client
// acknowledged it (a process killed) is sent on the next bind, not lost.
func TestUnacknowledgedReceiptWaitsForTheNextBind(t *testing.T) {
	s := start(t, sandboxsmsc.Config{})
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	send := func(p smpp.PDU) {
		b, err := smpp.Encode(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	send(smpp.PDU{Command: smpp.BindTransceiver, Seq: 1, Body: &smpp.Bind{SystemID: "mnv", Password: password, InterfaceVersion: smpp.InterfaceVersion}})
	send(smpp.PDU{Command: smpp.SubmitSM, Seq: 2, Body: &smpp.ShortMessage{DestTON: 1, DestNPI: 1, Dest: "15550012", RegisteredDelivery: 1,
		Short: []byte("123456 is your code"), TLVs: smpp.TLVs{{Tag: smpp.TagUserMessageReference, Value: []byte{0, 9}}}}})
	var id string
	for {
		p, err := smpp.ReadPDU(br)
		if err != nil {
			t.Fatal(err)
		}
		if p.Command == smpp.SubmitSMResp {
			id = p.Body.(*smpp.SMResp).MessageID
		}
		if p.Command == smpp.DeliverSM {
			break // read, never acknowledged
		}
	}
	_ = nc.Close()
	got := make(chan smpp.Receipt, 1)
	dial(t, s, func(cfg *smpp.Config) { cfg.OnReceipt = func(r smpp.Receipt, ack smpp.Ack) { got <- r; ack(true) } })
	select {
	case r := <-got:
		if r.MessageID != id || r.Dest != "15550012" || r.Reference != 9 || !r.HasReference {
			t.Fatalf("receipt %+v, want the one of %s", r, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the unacknowledged receipt was lost")
	}
}

// TestDeferredReceiptComesAgain: a receipt the client answers with an error status (it could
// not take it yet) is sent again shortly after, until it is acknowledged.
func TestDeferredReceiptComesAgain(t *testing.T) {
	s := start(t, sandboxsmsc.Config{})
	got := make(chan smpp.Receipt, 4)
	var n atomic.Int32
	c := dial(t, s, func(cfg *smpp.Config) {
		cfg.OnReceipt = func(r smpp.Receipt, ack smpp.Ack) {
			ack(n.Add(1) > 2) // deferred twice, then taken
			got <- r
		}
	})
	ids, err := c.Submit(context.Background(), smpp.Message{From: "mnv", To: "+15550013", Text: "123456 is your code", RegisteredDelivery: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		select {
		case r := <-got:
			if r.MessageID != ids[0] {
				t.Fatalf("copy %d: %+v, want the receipt of %s", i, r, ids[0])
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("copy %d of the deferred receipt did not come", i)
		}
	}
	select {
	case r := <-got:
		t.Fatalf("a copy after the acknowledgement: %+v", r)
	case <-time.After(500 * time.Millisecond):
	}
}

// TestClose: closing the SMSC ends its sessions (the client loses its session) and its
// goroutines.
func TestClose(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := sandboxsmsc.Listen("127.0.0.1:0", sandboxsmsc.Config{SystemID: "mnv", Password: password, ReceiptDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	lost := make(chan struct{}, 1)
	c, err := smpp.Dial(context.Background(), smpp.Config{Addr: s.Addr(), SystemID: "mnv", Password: password,
		ReconnectMin: time.Hour, ReconnectMax: time.Hour,
		Observer: smpp.ObserverFunc(func(e smpp.Event) {
			if e.Kind == smpp.EventDisconnected {
				lost <- struct{}{}
			}
		})})
	if err != nil {
		t.Fatal(err)
	}
	// A receipt waiting an hour must not hold Close.
	if _, err := c.Submit(context.Background(), smpp.Message{From: "mnv", To: "1", Text: "x", RegisteredDelivery: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(5 * time.Second):
		t.Fatal("the client did not lose its session")
	}
	_ = c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}
