package sandboxsmsc_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
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
		cfg.OnReceipt = func(r smpp.Receipt) { mu.Lock(); got = append(got, r); mu.Unlock() }
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
