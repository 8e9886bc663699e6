package smpp

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config is a client's SMSC and how it keeps the session.
type Config struct {
	// Addr is the SMSC's host:port.
	Addr string
	// SystemID, Password and SystemType are the bind's credentials (at most 15, 8 and 12
	// characters).
	SystemID   string
	Password   string
	SystemType string
	// Window is the most submit_sm outstanding at once on the session (default 10): what the SMSC
	// allows unanswered, usually set in its contract.
	Window int
	// ResponseTimeout bounds the wait for each response (default 10 s).
	ResponseTimeout time.Duration
	// EnquireLink is the interval of the client's enquire_link, which keeps NATs and the SMSC's
	// idle timer from closing a quiet session and finds a dead one (default 30 s).
	EnquireLink time.Duration
	// DialTimeout bounds the TCP connect and the bind (default 10 s).
	DialTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the jittered, doubling pause before each rebind after
	// the session was lost (default 250 ms and 30 s).
	ReconnectMin, ReconnectMax time.Duration
	// ThrottleMin and ThrottleMax bound the jittered, doubling pause before a part the SMSC
	// refused with ESME_RTHROTTLED or ESME_RMSGQFUL is sent again (default 100 ms and 5 s);
	// ThrottleRetries is how many times before Submit gives the status back (default 8).
	ThrottleMin, ThrottleMax time.Duration
	ThrottleRetries          int
	// OnReceipt is handed each delivery receipt with the Ack that answers its deliver_sm: the
	// SMSC keeps a receipt until it is acknowledged, so a handler acknowledges once the receipt
	// is where a crash cannot lose it (recorded), and not before. It runs on the session's
	// reading goroutine, which reads nothing else meanwhile: it must only enqueue (or, with its
	// queue full, call ack(false) at once), never block, and must not call Close. Nil: every
	// receipt is acknowledged as it arrives.
	OnReceipt func(r Receipt, ack Ack)
	// Observer, when set, hears what happens (binds, submits, throttles, lost sessions), for
	// metrics; it is called synchronously and must not block.
	Observer Observer
	// Dial replaces net.Dialer's DialContext (tests).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLS, when set, runs the session over TLS with it: the handshake is part of the connect,
	// within DialTimeout, before the bind's credentials are written. An empty ServerName is
	// taken from Addr's host. Nil: plain TCP, as most SMSCs on a private link expect.
	TLS *tls.Config
}

func (c *Config) defaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.Window <= 0 {
		c.Window = 10
	}
	set(&c.ResponseTimeout, 10*time.Second)
	set(&c.EnquireLink, 30*time.Second)
	set(&c.DialTimeout, 10*time.Second)
	set(&c.ReconnectMin, 250*time.Millisecond)
	set(&c.ReconnectMax, 30*time.Second)
	set(&c.ThrottleMin, 100*time.Millisecond)
	set(&c.ThrottleMax, 5*time.Second)
	if c.ThrottleRetries <= 0 {
		c.ThrottleRetries = 8
	}
	if c.Dial == nil {
		c.Dial = (&net.Dialer{}).DialContext
	}
}

// EventKind says what an Event is about.
type EventKind int

const (
	// EventBound: a bind succeeded (the first, or a rebind).
	EventBound EventKind = iota + 1
	// EventBindFailed: a bind or its connection failed; Err says why (a Status when refused).
	EventBindFailed
	// EventDisconnected: a bound session ended (unbind by the SMSC, dropped connection, no answer
	// to enquire_link); Err says why. A rebind follows.
	EventDisconnected
	// EventSubmitted: the SMSC took one part.
	EventSubmitted
	// EventRejected: the SMSC refused one part for good; Status says why.
	EventRejected
	// EventThrottled: the SMSC refused one part for now (Status); it is sent again after a pause.
	EventThrottled
	// EventReceipt: a delivery receipt arrived (Status is zero; see Config.OnReceipt).
	EventReceipt
	// EventReceiptUnreadable: a deliver_sm marked as a receipt could not be read; it is
	// acknowledged all the same, since the SMSC would only send it again.
	EventReceiptUnreadable
)

// Ack answers one receipt's deliver_sm: ok true with ESME_ROK (the receipt is ours now, the
// SMSC forgets it), false with ESME_RX_T_APPN, SMPP's temporary error of the receiving
// application, on which the SMSC keeps the receipt and delivers it again later. It may be called
// from any goroutine, at any time; only its first call answers. Once the session the receipt
// came on has ended, it writes nothing: a deliver_sm can only be answered on its own session,
// and the SMSC sends an unanswered receipt again on the next bind.
//
// The client keeps nothing per receipt awaiting its Ack (the Ack holds the session and the
// sequence number), so how many may be unanswered at once is bounded by the SMSC's own window of
// deliver_sm and by the handler's queue, which answers ack(false) when it is full.
type Ack func(ok bool)

// StatusReceiptDeferred is what Ack(false) answers: a temporary error of the receiving
// application (ESME_RX_T_APPN), on which an SMSC delivers the receipt again later.
const StatusReceiptDeferred = StatusTempAppError

// Event is one thing an Observer hears.
type Event struct {
	Kind   EventKind
	Status Status
	Err    error
}

// Observer hears a client's events (for counters: binds, submits, throttles, reconnects).
type Observer interface{ Observe(Event) }

// ObserverFunc is an Observer of one function.
type ObserverFunc func(Event)

// Observe calls f.
func (f ObserverFunc) Observe(e Event) { f(e) }

// Errors of Submit besides a refusing Status.
var (
	// ErrClosed: the client is closed; the part was not sent.
	ErrClosed = errors.New("smpp: client closed")
	// ErrConnectionLost: the part was written on a connection that ended before its response
	// came. The SMSC may or may not have taken it; the client does not send it again on its own.
	ErrConnectionLost = errors.New("smpp: connection lost with the request in flight")
	// ErrResponseTimeout: the part was written and no response came in time; as for
	// ErrConnectionLost, the SMSC may have taken it.
	ErrResponseTimeout = errors.New("smpp: no response in time")
	// errNotSent: the connection was gone before a byte of the request went out, so it may be
	// sent on the next one.
	errNotSent = errors.New("smpp: not sent")
	// ErrMalformedResponse: the SMSC answered a part with a PDU that could not be read, so
	// whether it took the part is unknown.
	ErrMalformedResponse = errors.New("smpp: unreadable response")
	errUnbound           = errors.New("smpp: the SMSC unbound")
	// ErrTLSExpected: over plain TCP, the SMSC answered the bind in TLS; the client should be
	// set up for TLS (Config.TLS).
	ErrTLSExpected = errors.New("smpp: the SMSC answered in TLS; connect over TLS")
)

// Retryable reports whether the caller may send the message again: after a throttle that
// outlasted the retries, a Close before the part was sent, or when its outcome is unknown
// (Uncertain). Sending again after an unknown outcome may double the message; the caller
// decides, knowing its own message ids.
func Retryable(err error) bool {
	var s Status
	if errors.As(err, &s) {
		return s.Transient()
	}
	return errors.Is(err, ErrClosed) || Uncertain(err)
}

// Uncertain reports whether the SMSC may have taken the part although Submit failed: the
// request was written and its answer was lost with the connection, did not come in time, or was
// no longer waited for (the context ended).
func Uncertain(err error) bool {
	return errors.Is(err, ErrConnectionLost) || errors.Is(err, ErrResponseTimeout) || errors.Is(err, ErrMalformedResponse) ||
		(errors.Is(err, errWritten) && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)))
}

// errWritten marks a context error that came after the request was written.
var errWritten = errors.New("after the request was written")

// Message is one text message to send.
type Message struct {
	// From is the sender: digits (with or without "+") or an alphanumeric name (at most 11
	// characters by GSM rules).
	From string
	// To is the receiver's number in international form, with or without "+".
	To   string
	Text string
	// RegisteredDelivery asks the SMSC for a delivery receipt of each part.
	RegisteredDelivery bool
	// ServiceType is the SMSC's service_type, usually empty.
	ServiceType string
	// Reference, when HasReference, goes with every part as user_message_reference: the
	// caller's two-octet reference, which SMSCs echo in the part's delivery receipt. It is no
	// dedupe key (no SMSC we know dedupes on it); it lets a receipt whose message id the caller
	// never learnt be matched to its message (docs/architecture.md#sms-over-smpp).
	Reference    uint16
	HasReference bool
}

// Client is a bound transceiver session with one SMSC, rebound whenever it is lost. Submit and
// Close are safe from any goroutine.
type Client struct {
	cfg    Config
	seq    atomic.Uint32
	window chan struct{}

	mu      sync.Mutex
	cur     *session      // nil while not bound
	ready   chan struct{} // closed when cur is set
	closed  bool
	closing chan struct{}
	submits sync.WaitGroup
	done    chan struct{}
}

// Dial connects and binds as a transceiver; a refused bind comes back as its Status
// (errors.Is(err, StatusInvalidPassword)). From then on the client keeps the session, rebinding
// with backoff when it is lost, until Close.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	cfg.defaults()
	c := &Client{
		cfg:     cfg,
		window:  make(chan struct{}, cfg.Window),
		ready:   make(chan struct{}),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	c.seq.Store(rand.Uint32N(1 << 20)) //nolint:gosec // G404: sequence numbers of two processes' sessions need not line up; nothing secret
	s, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	c.publish(s)
	c.observe(Event{Kind: EventBound})
	go c.run(s) //nolint:gosec // G118: the session outlives Dial's context, which bounds the bind only; Close ends it
	return c, nil
}

// nextSeq is the next sequence number, 1 to 0x7FFFFFFF and round again.
func (c *Client) nextSeq() uint32 { return c.seq.Add(1)%0x7FFFFFFF + 1 }

func (c *Client) observe(e Event) {
	if c.cfg.Observer != nil {
		c.cfg.Observer.Observe(e)
	}
}

// publish makes s the session submits use, unless it already died.
func (c *Client) publish(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-s.dead:
		return
	default:
	}
	c.cur = s
	close(c.ready)
}

// bound waits for a bound session.
func (c *Client) bound(ctx context.Context) (*session, error) {
	for {
		c.mu.Lock()
		s, ready := c.cur, c.ready
		c.mu.Unlock()
		if s != nil {
			return s, nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closing:
			return nil, ErrClosed
		}
	}
}

// run keeps the session: when it ends, rebind with backoff; at Close, let the submits in
// flight have their answers, unbind and stop.
func (c *Client) run(s *session) {
	defer close(c.done)
	bo := backoff{min: c.cfg.ReconnectMin, max: c.cfg.ReconnectMax}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		if s == nil {
			select {
			case <-time.After(bo.next()):
			case <-c.closing:
				return
			}
			var err error
			if s, err = c.connect(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				c.observe(Event{Kind: EventBindFailed, Err: err})
				continue
			}
			bo.reset()
			c.publish(s)
			c.observe(Event{Kind: EventBound})
		}
		select {
		case <-s.dead:
			s.wg.Wait()
			c.observe(Event{Kind: EventDisconnected, Err: s.err})
			s = nil
		case <-c.closing:
			c.submits.Wait() // their answers come on s; a lost s fails them
			s.unbind()
			return
		}
	}
}

// Close stops taking submits, waits for those in flight to be answered (or to fail), unbinds
// and closes the connection. Submits waiting for a window slot, a session or the end of a
// throttle pause return ErrClosed without having sent their part.
func (c *Client) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.closing)
	}
	c.mu.Unlock()
	<-c.done
	c.submits.Wait()
	return nil
}

// Submit sends m as one submit_sm per part and returns the SMSC's message id of each part. On
// an error, the ids of the parts already taken come back with it. A part is never sent twice
// by the client except after the SMSC refused it for now (throttled, queue full) or when the
// connection was gone before any of it was written; see Uncertain and Retryable for the rest.
func (c *Client) Submit(ctx context.Context, m Message) ([]string, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.submits.Add(1)
	c.mu.Unlock()
	defer c.submits.Done()

	text, err := EncodeText(m.Text)
	if err != nil {
		return nil, err
	}
	base := ShortMessage{ServiceType: m.ServiceType, DataCoding: text.DataCoding}
	base.SourceTON, base.SourceNPI, base.Source = sourceAddr(m.From)
	base.DestTON, base.DestNPI, base.Dest = 1, 1, strings.TrimPrefix(m.To, "+") // international, ISDN (E.164)
	if m.RegisteredDelivery {
		base.RegisteredDelivery = 1 // a receipt of the final outcome, delivered or failed
	}
	if text.Concatenated() {
		base.ESMClass |= ESMClassUDHI
	}
	if m.HasReference {
		base.TLVs = TLVs{{Tag: TagUserMessageReference, Value: []byte{byte(m.Reference >> 8), byte(m.Reference)}}}
	}
	ids := make([]string, 0, len(text.Parts))
	for i, part := range text.Parts {
		sm := base
		sm.Short = part
		id, err := c.submitPart(ctx, &sm)
		if err != nil {
			return ids, fmt.Errorf("smpp: submit part %d of %d: %w", i+1, len(text.Parts), err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// sourceAddr picks the sender's type of number: alphanumeric, international, or a short code.
func sourceAddr(from string) (ton, npi byte, addr string) {
	digits := strings.TrimPrefix(from, "+")
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 5, 0, from // alphanumeric, unknown plan
	}
	if strings.HasPrefix(from, "+") || len(digits) > 8 {
		return 1, 1, digits
	}
	return 3, 0, digits // network-specific: a short code
}

func (c *Client) submitPart(ctx context.Context, sm *ShortMessage) (string, error) {
	bo := backoff{min: c.cfg.ThrottleMin, max: c.cfg.ThrottleMax}
	for attempt := 0; ; attempt++ {
		select {
		case c.window <- struct{}{}:
		case <-ctx.Done():
			return "", ctx.Err()
		case <-c.closing:
			return "", ErrClosed
		}
		s, err := c.bound(ctx)
		if err != nil {
			<-c.window
			return "", err
		}
		resp, err := s.request(ctx, PDU{Command: SubmitSM, Seq: c.nextSeq(), Body: sm})
		<-c.window
		if errors.Is(err, errNotSent) {
			continue // nothing reached the SMSC: the next session sends it
		}
		if err != nil {
			return "", err
		}
		if resp.Command == GenericNack && resp.Status == StatusOK {
			resp.Status = StatusUnknownError // a refusal that forgot to say why
		}
		if resp.Status == StatusOK {
			c.observe(Event{Kind: EventSubmitted})
			var id string
			if b, ok := resp.Body.(*SMResp); ok {
				id = b.MessageID
			}
			return id, nil
		}
		if resp.Status.Transient() && attempt < c.cfg.ThrottleRetries {
			c.observe(Event{Kind: EventThrottled, Status: resp.Status})
			select {
			case <-time.After(bo.next()):
			case <-ctx.Done():
				return "", ctx.Err()
			case <-c.closing:
				return "", ErrClosed
			}
			continue
		}
		c.observe(Event{Kind: EventRejected, Status: resp.Status})
		return "", resp.Status
	}
}

// connect dials and binds as a transceiver.
func (c *Client) connect(ctx context.Context) (*session, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	nc, err := c.cfg.Dial(ctx, "tcp", c.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("smpp: dial %s: %w", c.cfg.Addr, err)
	}
	deadline, _ := ctx.Deadline()
	_ = nc.SetDeadline(deadline)
	// Closing the connection is what interrupts a blocked read when ctx ends early (the TCP
	// one: nc becomes the TLS connection over it, and the closure must not read nc meanwhile).
	raw := nc
	stop := context.AfterFunc(ctx, func() { _ = raw.Close() })
	if c.cfg.TLS != nil {
		nc, err = c.handshake(ctx, nc)
		if err != nil {
			stop()
			_ = nc.Close()
			return nil, err
		}
	}
	s, err := c.bind(nc)
	if !stop() || err != nil {
		_ = nc.Close()
		if err == nil {
			err = ctx.Err()
		}
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	s.start()
	return s, nil
}

// answeredInTLS reports whether the SMSC's first octets are a TLS record's header (an alert or
// a handshake), as a TLS server's answer to a plain bind may be. No SMPP PDU starts so: its
// command_length would be over 350 MB.
func answeredInTLS(br *bufio.Reader) bool {
	b, err := br.Peek(3)
	return err == nil && (b[0] == 0x15 || b[0] == 0x16) && b[1] == 0x03 && b[2] <= 0x04
}

// handshake runs TLS over nc; the certificate is checked before a byte of the bind (the
// password) is written. Its error names the SMSC and what TLS said, never the credentials.
func (c *Client) handshake(ctx context.Context, nc net.Conn) (net.Conn, error) {
	cfg := c.cfg.TLS.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(c.cfg.Addr)
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nc, fmt.Errorf("smpp: TLS handshake with %s: %w", c.cfg.Addr, err)
	}
	return tc, nil
}

func (c *Client) bind(nc net.Conn) (*session, error) {
	seq := c.nextSeq()
	b, err := Encode(PDU{Command: BindTransceiver, Seq: seq, Body: &Bind{
		SystemID: c.cfg.SystemID, Password: c.cfg.Password, SystemType: c.cfg.SystemType, InterfaceVersion: InterfaceVersion,
	}})
	if err != nil {
		return nil, err
	}
	if _, err := nc.Write(b); err != nil {
		return nil, fmt.Errorf("smpp: bind to %s: %w", c.cfg.Addr, err)
	}
	br := bufio.NewReader(nc)
	if c.cfg.TLS == nil && answeredInTLS(br) {
		return nil, fmt.Errorf("smpp: bind to %s: %w", c.cfg.Addr, ErrTLSExpected)
	}
	for {
		p, err := ReadPDU(br)
		if err != nil {
			if c.cfg.TLS == nil && errors.Is(err, io.EOF) {
				// What an SMSC that speaks TLS only (OpenSSL's, Node's) does to plain TCP.
				return nil, fmt.Errorf("smpp: bind to %s: the SMSC closed the connection without an answer (does it expect TLS?): %w", c.cfg.Addr, err)
			}
			return nil, fmt.Errorf("smpp: bind to %s: %w", c.cfg.Addr, err)
		}
		if p.Seq != seq || !(p.Command == BindTransceiverResp || p.Command == GenericNack) {
			if p.Command == EnquireLink { // an SMSC may probe before it answers
				if b, err := Encode(PDU{Command: EnquireLinkResp, Seq: p.Seq}); err == nil {
					_, _ = nc.Write(b)
				}
			}
			continue
		}
		if p.Status != StatusOK {
			return nil, fmt.Errorf("smpp: bind to %s as %q: %w", c.cfg.Addr, c.cfg.SystemID, p.Status)
		}
		return &session{c: c, nc: nc, br: br, pending: map[uint32]chan result{}, dead: make(chan struct{})}, nil
	}
}

// result is what a request's waiter is handed: its response, or why it has none.
type result struct {
	p   PDU
	err error
}

// session is one bound connection.
type session struct {
	c  *Client
	nc net.Conn
	br *bufio.Reader

	wmu     sync.Mutex
	mu      sync.Mutex
	pending map[uint32]chan result
	dead    chan struct{}
	err     error // why it died; set before dead is closed
	wg      sync.WaitGroup
}

func (s *session) start() {
	s.wg.Add(2)
	go s.read()
	go s.enquire()
}

// kill ends the session once: every request waiting on it learns at once, and submits wait
// for the next session. It runs under the client's lock so that a session is never published
// after it died, nor left published once dead.
func (s *session) kill(err error) {
	c := s.c
	c.mu.Lock()
	s.mu.Lock()
	select {
	case <-s.dead:
		s.mu.Unlock()
		c.mu.Unlock()
		return
	default:
	}
	s.err = err
	close(s.dead)
	s.mu.Unlock()
	if c.cur == s {
		c.cur = nil
		c.ready = make(chan struct{})
	}
	c.mu.Unlock()
	_ = s.nc.Close()
}

// write sends p whole, or kills the session. It returns errNotSent when not an octet left.
func (s *session) write(p PDU) error {
	b, err := Encode(p)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	select {
	case <-s.dead:
		return errNotSent
	default:
	}
	_ = s.nc.SetWriteDeadline(time.Now().Add(s.c.cfg.ResponseTimeout))
	n, err := s.nc.Write(b)
	if err != nil {
		s.kill(err)
		if n == 0 {
			return errNotSent
		}
		return ErrConnectionLost
	}
	return nil
}

// request sends p and waits for its response.
func (s *session) request(ctx context.Context, p PDU) (PDU, error) {
	if err := ctx.Err(); err != nil {
		return PDU{}, err
	}
	ch := make(chan result, 1)
	s.mu.Lock()
	select {
	case <-s.dead:
		s.mu.Unlock()
		return PDU{}, errNotSent
	default:
	}
	s.pending[p.Seq] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, p.Seq)
		s.mu.Unlock()
	}()
	if err := s.write(p); err != nil {
		return PDU{}, err
	}
	timer := time.NewTimer(s.c.cfg.ResponseTimeout)
	defer timer.Stop()
	select {
	case r := <-ch:
		return r.p, r.err
	case <-s.dead:
		select {
		case r := <-ch: // the answer came just before the end
			return r.p, r.err
		default:
		}
		return PDU{}, fmt.Errorf("%w (%s seq %d): %w", ErrConnectionLost, p.Command, p.Seq, s.err)
	case <-timer.C:
		return PDU{}, fmt.Errorf("%w (%s seq %d, %s)", ErrResponseTimeout, p.Command, p.Seq, s.c.cfg.ResponseTimeout)
	case <-ctx.Done():
		return PDU{}, fmt.Errorf("smpp: %s seq %d %w: %w", p.Command, p.Seq, errWritten, ctx.Err())
	}
}

// read handles everything the SMSC sends until the connection ends.
func (s *session) read() {
	defer s.wg.Done()
	for {
		p, err := ReadPDU(s.br)
		if err != nil {
			var de *DecodeError
			if errors.As(err, &de) && de.Command != 0 {
				s.undecodable(de)
				continue
			}
			s.kill(err)
			return
		}
		if p.Command.IsResponse() {
			s.mu.Lock()
			ch := s.pending[p.Seq]
			s.mu.Unlock()
			if ch != nil {
				select {
				case ch <- result{p: p}: // buffered: the first response for a seq is the one taken
				default:
				}
			}
			continue
		}
		switch p.Command {
		case EnquireLink:
			_ = s.write(PDU{Command: EnquireLinkResp, Seq: p.Seq})
		case DeliverSM:
			s.deliver(p)
		case Unbind:
			_ = s.write(PDU{Command: UnbindResp, Seq: p.Seq})
			s.kill(errUnbound)
			return
		default:
			_ = s.write(PDU{Command: GenericNack, Status: StatusInvalidCmdID, Seq: p.Seq})
		}
	}
}

// undecodable answers a request that was framed but could not be read, and fails a response
// that could not be read as its status would.
func (s *session) undecodable(de *DecodeError) {
	if de.Command.IsResponse() {
		s.mu.Lock()
		ch := s.pending[de.Seq]
		s.mu.Unlock()
		if ch != nil {
			select {
			case ch <- result{err: fmt.Errorf("%w: %w", ErrMalformedResponse, de)}:
			default:
			}
		}
		return
	}
	status := StatusInvalidCmdLength
	if errors.Is(de.Err, ErrUnsupportedCommand) {
		status = StatusInvalidCmdID
	}
	_ = s.write(PDU{Command: GenericNack, Status: status, Seq: de.Seq})
}

// deliver answers a deliver_sm: a receipt when its handler acknowledges it, anything else at
// once.
func (s *session) deliver(p PDU) {
	sm, _ := p.Body.(*ShortMessage)
	r, err := ParseReceipt(sm)
	switch {
	case errors.Is(err, ErrNotReceipt):
		// A message from a handset: mnv receives none, so it is acknowledged and dropped.
	case err != nil:
		s.c.observe(Event{Kind: EventReceiptUnreadable, Err: err})
	default:
		s.c.observe(Event{Kind: EventReceipt})
		if s.c.cfg.OnReceipt != nil {
			s.c.cfg.OnReceipt(r, s.ack(p.Seq))
			return
		}
	}
	_ = s.write(PDU{Command: DeliverSMResp, Seq: p.Seq, Body: &SMResp{}})
}

// ack is the Ack of the deliver_sm seq: its first call writes the deliver_sm_resp on this
// session, unless the session ended (write then sends nothing).
func (s *session) ack(seq uint32) Ack {
	var once atomic.Bool
	return func(ok bool) {
		if !once.CompareAndSwap(false, true) {
			return
		}
		st := StatusOK
		if !ok {
			st = StatusReceiptDeferred
		}
		_ = s.write(PDU{Command: DeliverSMResp, Status: st, Seq: seq, Body: &SMResp{}})
	}
}

// enquire sends enquire_link on the interval; a session that does not answer is dead.
func (s *session) enquire() {
	defer s.wg.Done()
	t := time.NewTicker(s.c.cfg.EnquireLink)
	defer t.Stop()
	for {
		select {
		case <-s.dead:
			return
		case <-t.C:
			if _, err := s.request(context.Background(), PDU{Command: EnquireLink, Seq: s.c.nextSeq()}); err != nil {
				s.kill(fmt.Errorf("smpp: enquire_link: %w", err))
				return
			}
		}
	}
}

// unbind ends the session politely: unbind, a short wait for unbind_resp, then close.
func (s *session) unbind() {
	ctx, cancel := context.WithTimeout(context.Background(), min(s.c.cfg.ResponseTimeout, 2*time.Second))
	defer cancel()
	_, _ = s.request(ctx, PDU{Command: Unbind, Seq: s.c.nextSeq()})
	s.kill(ErrClosed)
	s.wg.Wait()
}

// backoff is a doubling pause with jitter (each pause is drawn from its upper half), so clients
// that lost one SMSC together do not come back together.
type backoff struct {
	min, max time.Duration
	n        int
}

func (b *backoff) next() time.Duration {
	d := b.min << min(b.n, 30)
	if d > b.max || d <= 0 {
		d = b.max
	}
	b.n++
	return d/2 + rand.N(d/2+1) //nolint:gosec // G404: jitter, not a secret
}

func (b *backoff) reset() { b.n = 0 }
