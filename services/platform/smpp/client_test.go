package smpp

import (
	"bufio"
	"bytes"
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
)

// scriptSMSC is a scripted SMSC for the session's edge cases: each connection is handed to
// serve, which reads and writes PDUs as the test needs. The independent test against npm's
// smpp is tests/smsc.
type scriptSMSC struct {
	t     *testing.T
	ln    net.Listener
	serve func(c *smscConn)
	conns atomic.Int32
	wg    sync.WaitGroup
}

type smscConn struct {
	t  *testing.T
	n  int // 1 for the first connection
	nc net.Conn
	br *bufio.Reader
	mu sync.Mutex
}

func (c *smscConn) read() (PDU, error) { return ReadPDU(c.br) }

func (c *smscConn) write(p PDU) {
	b, err := Encode(p)
	if err != nil {
		c.t.Error(err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = c.nc.Write(b)
}

func startSMSC(t *testing.T, serve func(c *smscConn)) *scriptSMSC {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &scriptSMSC{t: t, ln: ln, serve: serve}
	var open sync.Map
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			open.Store(nc, true)
			c := &smscConn{t: t, n: int(s.conns.Add(1)), nc: nc, br: bufio.NewReader(nc)}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer nc.Close()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		open.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		s.wg.Wait()
	})
	return s
}

// standard answers a bind with credentials "mnv"/"pw", submits with "id-<seq>", enquire_link
// and unbind; onSubmit, when set, answers a submit instead (ok false: no answer at all).
func standard(onSubmit func(c *smscConn, p PDU) (PDU, bool)) func(c *smscConn) {
	return func(c *smscConn) {
		for {
			p, err := c.read()
			if err != nil {
				return
			}
			switch p.Command {
			case BindTransceiver:
				b := p.Body.(*Bind)
				st := StatusOK
				if b.SystemID != "mnv" || b.Password != "pw" {
					st = StatusInvalidPassword
				}
				c.write(PDU{Command: BindTransceiverResp, Status: st, Seq: p.Seq, Body: &BindResp{SystemID: "script"}})
			case SubmitSM:
				if onSubmit != nil {
					if r, ok := onSubmit(c, p); ok {
						c.write(r)
					}
					continue
				}
				c.write(PDU{Command: SubmitSMResp, Seq: p.Seq, Body: &SMResp{MessageID: fmt.Sprintf("id-%d", p.Seq)}})
			case EnquireLink:
				c.write(PDU{Command: EnquireLinkResp, Seq: p.Seq})
			case Unbind:
				c.write(PDU{Command: UnbindResp, Seq: p.Seq})
				return
			}
		}
	}
}

func testConfig(addr string) Config {
	return Config{
		Addr: addr, SystemID: "mnv", Password: "pw",
		ResponseTimeout: 2 * time.Second, EnquireLink: time.Hour,
		ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond,
		ThrottleMin: 5 * time.Millisecond, ThrottleMax: 20 * time.Millisecond,
	}
}

// events counts what an Observer heard.
type events struct {
	mu sync.Mutex
	n  map[EventKind]int
}

func (e *events) Observe(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == nil {
		e.n = map[EventKind]int{}
	}
	e.n[ev.Kind]++
}

func (e *events) count(k EventKind) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[k]
}

func dial(t *testing.T, cfg Config) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBind(t *testing.T) {
	smsc := startSMSC(t, standard(nil))
	tests := []struct {
		name, password string
		want           error
	}{
		{"accepted", "pw", nil},
		{"wrong password", "nope", StatusInvalidPassword},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(smsc.ln.Addr().String())
			cfg.Password = tt.password
			c, err := Dial(context.Background(), cfg)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if c != nil {
				c.Close()
			}
		})
	}
	cfg := testConfig(smsc.ln.Addr().String())
	cfg.Password = "too-long-for-smpp"
	if _, err := Dial(context.Background(), cfg); !errors.Is(err, ErrFieldTooLong) {
		t.Fatalf("a 17-character password: %v", err)
	}
}

func TestSubmitParts(t *testing.T) {
	var mu sync.Mutex
	var got []*ShortMessage
	smsc := startSMSC(t, standard(func(c *smscConn, p PDU) (PDU, bool) {
		mu.Lock()
		got = append(got, p.Body.(*ShortMessage))
		mu.Unlock()
		return PDU{Command: SubmitSMResp, Seq: p.Seq, Body: &SMResp{MessageID: fmt.Sprint("m", p.Seq)}}, true
	}))
	c := dial(t, testConfig(smsc.ln.Addr().String()))
	ids, err := c.Submit(context.Background(), Message{From: "mnv", To: "+447700900123", Text: strings.Repeat("long ", 80), RegisteredDelivery: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 3 || len(got) != 3 {
		t.Fatalf("ids %v, %d submits", ids, len(got))
	}
	for i, sm := range got {
		if sm.Dest != "447700900123" || sm.DestTON != 1 || sm.SourceTON != 5 || sm.Source != "mnv" ||
			sm.RegisteredDelivery != 1 || sm.ESMClass&ESMClassUDHI == 0 || sm.DataCoding != CodingDefault {
			t.Fatalf("part %d: %+v", i, sm)
		}
		if ids[i] == "" {
			t.Fatalf("part %d has no id", i)
		}
		if _, ok := sm.TLVs.UserMessageReference(); ok {
			t.Fatalf("part %d carries a reference nobody gave", i)
		}
	}

	// A reference goes with every part, big-endian, as user_message_reference.
	mu.Lock()
	got = nil
	mu.Unlock()
	if _, err := c.Submit(context.Background(), Message{From: "mnv", To: "+447700900123", Text: strings.Repeat("long ", 40), Reference: 0xBEEF, HasReference: true}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d submits", len(got))
	}
	for i, sm := range got {
		if v, _ := sm.TLVs.Get(TagUserMessageReference); !bytes.Equal(v, []byte{0xBE, 0xEF}) {
			t.Fatalf("part %d: user_message_reference %x", i, v)
		}
	}
}

// TestWindow: no more than Window submits are ever unanswered, and that many are.
func TestWindow(t *testing.T) {
	const window = 3
	var mu sync.Mutex
	var held []PDU
	maxOut := 0
	smsc := startSMSC(t, standard(func(c *smscConn, p PDU) (PDU, bool) {
		mu.Lock()
		held = append(held, p)
		maxOut = max(maxOut, len(held))
		release := held
		if len(held) < window {
			release = nil
		} else {
			held = nil
		}
		mu.Unlock()
		// Answer nothing until the window is full, then answer all of it.
		for _, h := range release {
			c.write(PDU{Command: SubmitSMResp, Seq: h.Seq, Body: &SMResp{MessageID: "x"}})
		}
		return PDU{}, false
	}))
	cfg := testConfig(smsc.ln.Addr().String())
	cfg.Window = window
	c := dial(t, cfg)
	var wg sync.WaitGroup
	errs := make(chan error, 9)
	for i := 0; i < 9; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Submit(context.Background(), Message{From: "mnv", To: "1", Text: "hi"})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if maxOut != window {
		t.Fatalf("at most %d outstanding, want %d", maxOut, window)
	}
}

func TestThrottledIsBackedOffAndResent(t *testing.T) {
	var submits atomic.Int32
	smsc := startSMSC(t, standard(func(c *smscConn, p PDU) (PDU, bool) {
		n := submits.Add(1)
		if n == 1 {
			return PDU{Command: SubmitSMResp, Status: StatusThrottled, Seq: p.Seq}, true
		}
		if n == 2 {
			return PDU{Command: SubmitSMResp, Status: StatusMessageQueueFull, Seq: p.Seq}, true
		}
		return PDU{Command: SubmitSMResp, Seq: p.Seq, Body: &SMResp{MessageID: "ok"}}, true
	}))
	ev := &events{}
	cfg := testConfig(smsc.ln.Addr().String())
	cfg.Observer = ev
	c := dial(t, cfg)
	ids, err := c.Submit(context.Background(), Message{From: "mnv", To: "1", Text: "hi"})
	if err != nil || len(ids) != 1 || ids[0] != "ok" {
		t.Fatalf("%v %v", ids, err)
	}
	if submits.Load() != 3 || ev.count(EventThrottled) != 2 || ev.count(EventSubmitted) != 1 {
		t.Fatalf("%d submits, %d throttles", submits.Load(), ev.count(EventThrottled))
	}

	// A throttle that outlasts the retries comes back as the status, retryable by the caller.
	submits.Store(-100)
	smsc2 := startSMSC(t, standard(func(c *smscConn, p PDU) (PDU, bool) {
		return PDU{Command: SubmitSMResp, Status: StatusThrottled, Seq: p.Seq}, true
	}))
	cfg = testConfig(smsc2.ln.Addr().String())
	cfg.ThrottleRetries = 2
	c2 := dial(t, cfg)
	_, err = c2.Submit(context.Background(), Message{From: "mnv", To: "1", Text: "hi"})
	if !errors.Is(err, StatusThrottled) || !Retryable(err) || Uncertain(err) {
		t.Fatalf("err = %v", err)
	}
}

func TestRejectedIsNotRetried(t *testing.T) {
	var submits atomic.Int32
	smsc := startSMSC(t, standard(func(c *smscConn, p PDU) (PDU, bool) {
		submits.Add(1)
		return PDU{Command: SubmitSMResp, Status: StatusInvalidDestAddr, Seq: p.Seq}, true
	}))
	c := dial(t, testConfig(smsc.ln.Addr().String()))
	_, err := c.Submit(context.Background(), Message{From: "mnv", To: "1", Text: "hi"})
	if !errors.Is(err, StatusInvalidDestAddr) || Retryable(err) || submits.Load() != 1 {
		t.Fatalf("err = %v after %d submits", err, submits.Load())
	}
}

// TestDroppedInFlight: a submit written on a connection that dies unanswered fails with
// ErrConnectionLost and is not sent again by the client; the client rebinds and the next
// submit goes through.
func TestDroppedInFlight(t *testing.T) {
	var submits atomic.Int32
	smsc := startSMSC(t, standard(func(c *smscConn, p PDU) (PDU, bool) {
		if submits.Add(1) == 1 {
			c.nc.Close() // read it, never answer
			return PDU{}, false
		}
		return PDU{Command: SubmitSMResp, Seq: p.Seq, Body: &SMResp{MessageID: "after"}}, true
	}))
	ev := &events{}
	cfg := testConfig(smsc.ln.Addr().String())
	cfg.Observer = ev
	c := dial(t, cfg)
	_, err := c.Submit(context.Background(), Message{From: "mnv", To: "1", Text: "hi"})
	if !errors.Is(err, ErrConnectionLost) || !Uncertain(err) || !Retryable(err) {
		t.Fatalf("err = %v", err)
	}
	ids, err := c.Submit(context.Background(), Message{From: "mnv", To: "1", Text: "again"})
	if err != nil || ids[0] != "after" {
		t.Fatalf("%v %v", ids, err)
	}
	if submits.Load() != 2 || smsc.conns.Load() != 2 || ev.count(EventDisconnected) != 1 || ev.count(EventBound) != 2 {
		t.Fatalf("%d submits on %d connections, events %v", submits.Load(), smsc.conns.Load(), ev.n)
	}
}

func TestUnbindBySMSC(t *testing.T) {
	unbindResp := make(chan PDU, 1)
	smsc := startSMSC(t, func(c *smscConn) {
		if c.n == 1 {
			p, _ := c.read()
			c.write(PDU{Command: BindTransceiverResp, Seq: p.Seq, Body: &BindResp{SystemID: "s"}})
			c.write(PDU{Command: Unbind, Seq: 77})
			r, err := c.read()
			if err == nil {
				unbindResp <- r
			}
			return
		}
		standard(nil)(c)
	})
	c := dial(t, testConfig(smsc.ln.Addr().String()))
	select {
	case r := <-unbindResp:
		if r.Command != UnbindResp || r.Seq != 77 {
			t.Fatalf("answer to unbind: %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("unbind not answered")
	}
	if _, err := c.Submit(context.Background(), Message{From: "mnv", To: "1", Text: "after unbind"}); err != nil {
		t.Fatal(err)
	}
	if smsc.conns.Load() != 2 {
		t.Fatalf("%d connections", smsc.conns.Load())
	}
}

func TestEnquireLink(t *testing.T) {
	var fromClient atomic.Int32
	answered := make(chan PDU, 1)
	smsc := startSMSC(t, func(c *smscConn) {
		for {
			p, err := c.read()
			if err != nil {
				return
			}
			switch p.Command {
			case BindTransceiver:
				c.write(PDU{Command: BindTransceiverResp, Seq: p.Seq, Body: &BindResp{}})
				c.write(PDU{Command: EnquireLink, Seq: 500})
			case EnquireLink:
				// The first connection answers two, then goes silent: the client must give up
				// on it and rebind.
				if fromClient.Add(1) <= 2 || c.n > 1 {
					c.write(PDU{Command: EnquireLinkResp, Seq: p.Seq})
				}
			case EnquireLinkResp:
				select {
				case answered <- p:
				default:
				}
			}
		}
	})
	cfg := testConfig(smsc.ln.Addr().String())
	cfg.EnquireLink = 30 * time.Millisecond
	cfg.ResponseTimeout = 100 * time.Millisecond
	dial(t, cfg)
	select {
	case p := <-answered:
		if p.Seq != 500 {
			t.Fatalf("%+v", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the SMSC's enquire_link was not answered")
	}
	waitFor(t, "a rebind after enquire_link went unanswered", func() bool { return smsc.conns.Load() >= 2 })
}

// TestReceipts: a receipt reaches OnReceipt, read whole, and its deliver_sm is answered when
// the handler acknowledges it; one that cannot be read is answered all the same, so the SMSC
// does not send it forever.
func TestReceipts(t *testing.T) {
	acks := make(chan PDU, 2)
	smsc := startSMSC(t, func(c *smscConn) {
		for {
			p, err := c.read()
			if err != nil {
				return
			}
			switch p.Command {
			case BindTransceiver:
				c.write(PDU{Command: BindTransceiverResp, Seq: p.Seq, Body: &BindResp{}})
			case SubmitSM:
				c.write(PDU{Command: SubmitSMResp, Seq: p.Seq, Body: &SMResp{MessageID: "r1"}})
				ref, _ := p.Body.(*ShortMessage).TLVs.Get(TagUserMessageReference)
				c.write(PDU{Command: DeliverSM, Seq: 900, Body: &ShortMessage{ESMClass: ESMClassReceipt, Source: "1",
					Short: []byte("id:r1 sub:001 dlvrd:001 submit date:2611291200 done date:2611291200 stat:DELIVRD err:000 text:hi"),
					TLVs:  TLVs{{Tag: TagUserMessageReference, Value: ref}}}})
				c.write(PDU{Command: DeliverSM, Seq: 901, Body: &ShortMessage{ESMClass: ESMClassReceipt, Short: []byte("garbage")}})
			case DeliverSMResp:
				acks <- p
			}
		}
	})
	got := make(chan Receipt, 1)
	ev := &events{}
	cfg := testConfig(smsc.ln.Addr().String())
	cfg.OnReceipt = func(r Receipt, ack Ack) { got <- r; ack(true) }
	cfg.Observer = ev
	c := dial(t, cfg)
	if _, err := c.Submit(context.Background(), Message{From: "mnv", To: "1", Text: "hi", RegisteredDelivery: true, Reference: 7, HasReference: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.MessageID != "r1" || r.State != StateDelivered || r.Dest != "1" || !r.HasReference || r.Reference != 7 || r.Text != "hi" {
			t.Fatalf("%+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no receipt")
	}
	for _, seq := range []uint32{900, 901} {
		select {
		case a := <-acks:
			if a.Seq != seq || a.Status != StatusOK {
				t.Fatalf("ack %+v, want seq %d", a, seq)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("deliver_sm %d not answered", seq)
		}
	}
	if ev.count(EventReceipt) != 1 || ev.count(EventReceiptUnreadable) != 1 {
		t.Fatalf("events %v", ev.n)
	}
}

func TestResponseTimeoutAndContext(t *testing.T) {
	smsc := startSMSC(t, standard(func(c *smscConn, p PDU) (PDU, bool) { return PDU{}, false }))
	cfg := testConfig(smsc.ln.Addr().String())
	cfg.ResponseTimeout = 50 * time.Millisecond
	c := dial(t, cfg)
	_, err := c.Submit(context.Background(), Message{From: "mnv", To: "1", Text: "hi"})
	if !errors.Is(err, ErrResponseTimeout) || !Uncertain(err) {
		t.Fatalf("err = %v", err)
	}
	cfg.ResponseTimeout = time.Hour
	c2 := dial(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err = c2.Submit(ctx, Message{From: "mnv", To: "1", Text: "hi"})
	if !errors.Is(err, context.DeadlineExceeded) || !Uncertain(err) {
		t.Fatalf("err = %v", err)
	}
	// Cancelled before anything was written: not uncertain.
	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	_, err = c2.Submit(done, Message{From: "mnv", To: "1", Text: "hi"})
	if !errors.Is(err, context.Canceled) || Uncertain(err) {
		t.Fatalf("err = %v", err)
	}
}

// TestCloseDrains: Close lets the submit in flight have its answer, unbinds, and leaves no
// goroutine behind; later submits are refused.
func TestCloseDrains(t *testing.T) {
	before := runtime.NumGoroutine()
	release := make(chan struct{})
	unbound := make(chan struct{}, 1)
	smsc := startSMSC(t, func(c *smscConn) {
		for {
			p, err := c.read()
			if err != nil {
				return
			}
			switch p.Command {
			case BindTransceiver:
				c.write(PDU{Command: BindTransceiverResp, Seq: p.Seq, Body: &BindResp{}})
			case SubmitSM:
				go func(seq uint32) {
					<-release
					c.write(PDU{Command: SubmitSMResp, Seq: seq, Body: &SMResp{MessageID: "late"}})
				}(p.Seq)
			case Unbind:
				c.write(PDU{Command: UnbindResp, Seq: p.Seq})
				unbound <- struct{}{}
				return
			}
		}
	})
	cfg := testConfig(smsc.ln.Addr().String())
	cfg.EnquireLink = 20 * time.Millisecond
	c, err := Dial(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	result := make(chan error, 1)
	var ids []string
	go func() {
		var err error
		ids, err = c.Submit(context.Background(), Message{From: "mnv", To: "1", Text: "in flight"})
		result <- err
	}()
	time.Sleep(50 * time.Millisecond)
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case <-closed:
		t.Fatal("Close returned with a submit in flight")
	default:
	}
	close(release)
	<-closed
	if err := <-result; err != nil || len(ids) != 1 || ids[0] != "late" {
		t.Fatalf("in-flight submit: %v %v", ids, err)
	}
	select {
	case <-unbound:
	default:
		t.Fatal("Close did not unbind")
	}
	if _, err := c.Submit(context.Background(), Message{From: "mnv", To: "1", Text: "x"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	waitFor(t, "the client's goroutines to end", func() bool { return runtime.NumGoroutine() <= before+2 }) // the script SMSC's accept loop and reader
}

// TestCloseWhileReconnecting: Close ends a client whose SMSC is gone, at once.
func TestCloseWhileReconnecting(t *testing.T) {
	smsc := startSMSC(t, standard(nil))
	cfg := testConfig(smsc.ln.Addr().String())
	cfg.ReconnectMin, cfg.ReconnectMax = 10*time.Second, 10*time.Second // a pause of 5 to 10 s
	c := dial(t, cfg)
	smsc.ln.Close()
	c.mu.Lock()
	s := c.cur
	c.mu.Unlock()
	s.nc.Close()
	start := time.Now()
	waiting := make(chan error, 1)
	go func() {
		_, err := c.Submit(context.Background(), Message{From: "mnv", To: "1", Text: "x"})
		waiting <- err
	}()
	time.Sleep(20 * time.Millisecond)
	c.Close()
	if err := <-waiting; !errors.Is(err, ErrClosed) || !Retryable(err) || Uncertain(err) {
		t.Fatalf("a submit waiting for a session: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %s", d)
	}
}

func TestSourceAddr(t *testing.T) {
	tests := []struct {
		from     string
		ton, npi byte
		addr     string
	}{
		{"mnv", 5, 0, "mnv"},
		{"MyBank 2", 5, 0, "MyBank 2"},
		{"+447700900123", 1, 1, "447700900123"},
		{"447700900123", 1, 1, "447700900123"},
		{"12345", 3, 0, "12345"},
	}
	for _, tt := range tests {
		ton, npi, addr := sourceAddr(tt.from)
		if ton != tt.ton || npi != tt.npi || addr != tt.addr {
			t.Errorf("%q: %d %d %q", tt.from, ton, npi, addr)
		}
	}
}

// TestOddAnswers: what the client makes of answers an SMSC should not give.
func TestOddAnswers(t *testing.T) {
	raw := func(seq uint32, body []byte) []byte {
		b := make([]byte, 16, 16+len(body))
		n := uint32(16 + len(body))
		b[0], b[1], b[2], b[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
		b[4], b[5], b[6], b[7] = 0x80, 0, 0, 0x04 // submit_sm_resp, status 0
		b[12], b[13], b[14], b[15] = byte(seq>>24), byte(seq>>16), byte(seq>>8), byte(seq)
		return append(b, body...)
	}
	tests := []struct {
		name      string
		answer    func(c *smscConn, p PDU)
		want      error
		uncertain bool
	}{
		{"generic_nack", func(c *smscConn, p PDU) {
			c.write(PDU{Command: GenericNack, Status: StatusInvalidCmdID, Seq: p.Seq})
		}, StatusInvalidCmdID, false},
		{"generic_nack without a status", func(c *smscConn, p PDU) {
			c.write(PDU{Command: GenericNack, Seq: p.Seq})
		}, StatusUnknownError, false},
		{"message_id past its maximum", func(c *smscConn, p PDU) {
			c.mu.Lock()
			defer c.mu.Unlock()
			_, _ = c.nc.Write(raw(p.Seq, append([]byte(strings.Repeat("9", 70)), 0)))
		}, ErrMalformedResponse, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			smsc := startSMSC(t, standard(func(c *smscConn, p PDU) (PDU, bool) {
				tt.answer(c, p)
				return PDU{}, false
			}))
			c := dial(t, testConfig(smsc.ln.Addr().String()))
			_, err := c.Submit(context.Background(), Message{From: "mnv", To: "1", Text: "hi"})
			if !errors.Is(err, tt.want) || Uncertain(err) != tt.uncertain {
				t.Fatalf("err = %v (uncertain %v), want %v", err, Uncertain(err), tt.want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	b := backoff{min: 100 * time.Millisecond, max: time.Second}
	ceilings := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	for i, c := range ceilings {
		c *= time.Millisecond
		if d := b.next(); d < c/2 || d > c {
			t.Fatalf("pause %d: %s, want within [%s, %s]", i, d, c/2, c)
		}
	}
	for i := 0; i < 100; i++ {
		b.next() // no overflow however long the SMSC stays away
	}
	if d := b.next(); d < 500*time.Millisecond || d > time.Second {
		t.Fatalf("after many: %s", d)
	}
	b.reset()
	if d := b.next(); d > 100*time.Millisecond {
		t.Fatalf("after reset: %s", d)
	}
}

// receiptPDU is a DELIVRD receipt of message id "r<seq>" as a deliver_sm of sequence seq.
func receiptPDU(seq uint32) PDU {
	return PDU{Command: DeliverSM, Seq: seq, Body: &ShortMessage{ESMClass: ESMClassReceipt, Source: "1",
		Short: fmt.Appendf(nil, "id:r%d sub:001 dlvrd:001 submit date:2611291200 done date:2611291200 stat:DELIVRD err:000 text:hi", seq)}}
}

// answer is a deliver_sm_resp the script SMSC read, and on which connection.
type answer struct {
	conn   int
	seq    uint32
	status Status
}

// receiptSMSC answers binds, submits and enquire_link, sends each connection's receipts
// (receipts(n) for the n-th) right after its bind, and hands every deliver_sm_resp to answers
// and every connection to conns.
func receiptSMSC(t *testing.T, receipts func(n int) []uint32) (*scriptSMSC, chan answer, chan *smscConn) {
	answers, conns := make(chan answer, 16), make(chan *smscConn, 4)
	smsc := startSMSC(t, func(c *smscConn) {
		conns <- c
		for {
			p, err := c.read()
			if err != nil {
				return
			}
			switch p.Command {
			case BindTransceiver:
				c.write(PDU{Command: BindTransceiverResp, Seq: p.Seq, Body: &BindResp{}})
				for _, seq := range receipts(c.n) {
					c.write(receiptPDU(seq))
				}
			case SubmitSM:
				c.write(PDU{Command: SubmitSMResp, Seq: p.Seq, Body: &SMResp{MessageID: "m"}})
			case EnquireLink:
				c.write(PDU{Command: EnquireLinkResp, Seq: p.Seq})
			case DeliverSMResp:
				answers <- answer{conn: c.n, seq: p.Seq, status: p.Status}
			case Unbind:
				c.write(PDU{Command: UnbindResp, Seq: p.Seq})
				return
			}
		}
	})
	return smsc, answers, conns
}

// handed is a receipt as the handler got it, with its Ack.
type handed struct {
	r   Receipt
	ack Ack
}

// queueHandler is a handler as a caller writes one: it enqueues, and with its queue full
// answers the receipt at once with the temporary error.
func queueHandler(queue chan handed) func(Receipt, Ack) {
	return func(r Receipt, ack Ack) {
		select {
		case queue <- handed{r, ack}:
		default:
			ack(false)
		}
	}
}

func expectAnswers(t *testing.T, answers chan answer, want ...answer) {
	t.Helper()
	for _, w := range want {
		select {
		case a := <-answers:
			if a != w {
				t.Fatalf("deliver_sm_resp %+v, want %+v", a, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no deliver_sm_resp, want %+v", w)
		}
	}
	select {
	case a := <-answers:
		t.Fatalf("a deliver_sm_resp more: %+v", a)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestReceiptAck: a receipt's deliver_sm is answered when, and only as, its handler says: later
// and from another goroutine, with ESME_ROK or the temporary error, once however often Ack is
// called, at once when the handler's queue is full; the session reads and submits meanwhile.
func TestReceiptAck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		queue int // the handler's queue
		// run acknowledges the receipts the handler queued, by sequence number.
		run  func(t *testing.T, c *Client, acks map[uint32]Ack)
		want []answer
	}{
		{"acknowledged later, from another goroutine", 2, func(t *testing.T, c *Client, acks map[uint32]Ack) {
			// Unanswered receipts hold up neither the reader nor a submit.
			if _, err := c.Submit(context.Background(), Message{From: "mnv", To: "1", Text: "meanwhile"}); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			wg.Go(func() { acks[901](true) })
			wg.Wait()
			wg.Go(func() { acks[900](false) })
			wg.Wait()
		}, []answer{{1, 901, StatusOK}, {1, 900, StatusTempAppError}}},
		{"acknowledged once however often Ack is called", 2, func(t *testing.T, _ *Client, acks map[uint32]Ack) {
			acks[900](true)
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Go(func() { acks[900](i%2 == 0) })
			}
			wg.Wait()
			acks[901](true) // written after any second answer of 900 would have been
		}, []answer{{1, 900, StatusOK}, {1, 901, StatusOK}}},
		{"a full queue answers the temporary error at once", 1, func(t *testing.T, _ *Client, acks map[uint32]Ack) {
			if _, queued := acks[901]; queued {
				t.Fatal("901 was queued in a full queue")
			}
			acks[900](true)
		}, []answer{{1, 901, StatusTempAppError}, {1, 900, StatusOK}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			smsc, answers, _ := receiptSMSC(t, func(int) []uint32 { return []uint32{900, 901} })
			queue := make(chan handed, tc.queue)
			cfg := testConfig(smsc.ln.Addr().String())
			cfg.OnReceipt = queueHandler(queue)
			c := dial(t, cfg)
			if tc.queue == 1 {
				// The full queue's answer comes without anyone acknowledging (nor taking the
				// first receipt off the queue).
				expectAnswers(t, answers, tc.want[0])
				tc.want = tc.want[1:]
			}
			acks := map[uint32]Ack{}
			for range tc.queue {
				select {
				case h := <-queue:
					var seq uint32
					if _, err := fmt.Sscanf(h.r.MessageID, "r%d", &seq); err != nil {
						t.Fatal(err)
					}
					acks[seq] = h.ack
				case <-time.After(5 * time.Second):
					t.Fatal("no receipt")
				}
			}
			expectAnswers(t, answers) // none before Ack is called
			tc.run(t, c, acks)
			expectAnswers(t, answers, tc.want...)
		})
	}
}

// countingConn counts the writes on a connection.
type countingConn struct {
	net.Conn
	writes atomic.Int32
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestReceiptAckAfterSessionEnded: a receipt acknowledged after its session ended writes
// nothing, on that connection or the next; the SMSC sends it again on the next bind, where its
// new deliver_sm is answered.
func TestReceiptAckAfterSessionEnded(t *testing.T) {
	smsc, answers, conns := receiptSMSC(t, func(int) []uint32 { return []uint32{900} })
	dialed := make(chan *countingConn, 4)
	queue := make(chan handed, 4)
	cfg := testConfig(smsc.ln.Addr().String())
	cfg.OnReceipt = queueHandler(queue)
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cc := &countingConn{Conn: nc}
		dialed <- cc
		return cc, nil
	}
	dial(t, cfg)
	next := func() handed {
		t.Helper()
		select {
		case h := <-queue:
			return h
		case <-time.After(5 * time.Second):
			t.Fatal("no receipt")
			return handed{}
		}
	}
	first, firstConn := next(), <-dialed
	(<-conns).nc.Close() // the session ends with the receipt unanswered
	again := next()      // sent again on the next bind
	if again.r.MessageID != first.r.MessageID || smsc.conns.Load() != 2 {
		t.Fatalf("receipt %+v on %d connections", again.r, smsc.conns.Load())
	}
	writes := firstConn.writes.Load()
	first.ack(true)
	if n := firstConn.writes.Load(); n != writes {
		t.Fatalf("%d writes on the ended session after its receipt's Ack", n-writes)
	}
	expectAnswers(t, answers) // nor on the new one
	again.ack(true)
	expectAnswers(t, answers, answer{2, 900, StatusOK})
}
