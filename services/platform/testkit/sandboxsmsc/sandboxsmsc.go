// Package sandboxsmsc is a stand-in SMS centre that speaks SMPP 3.4 with the platform's own
// codec (platform/smpp): `make run`'s SMSC, so a newcomer sees a one-time code arrive without an
// operator, and a quick SMSC for Go tests. It accepts transceiver binds with the configured
// credentials, answers submit_sm with message ids, keeps the newest messages in memory
// (concatenated parts joined back into one text) for Messages and All to read, and sends a
// DELIVRD receipt for each part when registered delivery was asked, as an operator's does: it
// echoes the submit's user_message_reference and the text's first 20 characters, and a receipt
// whose session ended before it was acknowledged is sent again on the next bind (one answered
// with an error status, again shortly after). It holds what it was sent,
// codes included, in memory only and logs nothing. The SMPP client is proved against an
// independent SMSC in tests/smsc; this one is for running, not for proving.
//
// No service binary links it (tests/deps checks the test kit stays out of them).
package sandboxsmsc

import (
	"bufio"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/mnvhq/mnv/services/platform/smpp"
)

// Config is who may bind and what is kept.
type Config struct {
	SystemID string
	Password string
	// Keep is how many messages are kept, the newest (default 1000).
	Keep int
	// ReceiptDelay is waited before a receipt is sent (default none).
	ReceiptDelay time.Duration
}

// Message is one message as its receiver would read it: the parts of a concatenated message
// joined.
type Message struct {
	// IDs are the message ids the SMSC answered, one per part, in part order.
	IDs  []string
	From string
	// To is the number without "+".
	To         string
	Text       string
	DataCoding byte
	Parts      int
	// At is when the last part arrived.
	At time.Time
}

// Server is a running sandbox SMSC.
type Server struct {
	cfg Config
	ln  net.Listener

	mu       sync.Mutex
	messages []Message            // oldest first, at most cfg.Keep
	partial  map[partKey]*joining // concatenated messages still missing parts
	nextID   uint64
	conns    map[net.Conn]struct{}
	bound    map[*session]struct{}
	// waiting are the receipts no bound session has acknowledged yet: sent on the next bind.
	waiting []*smpp.ShortMessage
	closed  bool

	closing chan struct{}
	wg      sync.WaitGroup
}

type partKey struct {
	from, to string
	ref      uint16
	total    int
}

type joining struct {
	parts [][]byte
	ids   []string
	got   int
}

// Listen starts a sandbox SMSC on addr ("127.0.0.1:0" for any free port).
func Listen(addr string, cfg Config) (*Server, error) {
	if cfg.Keep <= 0 {
		cfg.Keep = 1000
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("sandboxsmsc: %w", err)
	}
	s := &Server{cfg: cfg, ln: ln, partial: map[partKey]*joining{}, conns: map[net.Conn]struct{}{},
		bound: map[*session]struct{}{}, closing: make(chan struct{})}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the SMPP listener's host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// All returns the kept messages, oldest first.
func (s *Server) All() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.messages...)
}

// Messages returns the kept messages to a number (with or without "+"), oldest first.
func (s *Server) Messages(to string) []Message {
	to = strings.TrimPrefix(to, "+")
	var out []Message
	for _, m := range s.All() {
		if m.To == to {
			out = append(out, m)
		}
	}
	return out
}

// Close stops listening, ends every session and waits for its goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closing)
	err := s.ln.Close()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = nc.Close()
			return
		}
		s.conns[nc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(nc)
	}
}

// session is one client connection.
type session struct {
	s     *Server
	nc    net.Conn
	wmu   sync.Mutex
	bound bool
	seq   uint32
	// unacked are the receipts sent on this session and not acknowledged yet, by sequence
	// number (under s.mu).
	unacked map[uint32]*smpp.ShortMessage
}

func (ss *session) write(p smpp.PDU) {
	b, err := smpp.Encode(p)
	if err != nil {
		return
	}
	ss.wmu.Lock()
	defer ss.wmu.Unlock()
	_ = ss.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, _ = ss.nc.Write(b)
}

func (s *Server) serve(nc net.Conn) {
	defer s.wg.Done()
	ss := &session{s: s, nc: nc, seq: 1 << 24, unacked: map[uint32]*smpp.ShortMessage{}}
	defer func() {
		s.mu.Lock()
		delete(s.conns, nc)
		delete(s.bound, ss)
		unacked := ss.unacked
		ss.unacked = map[uint32]*smpp.ShortMessage{}
		s.mu.Unlock()
		_ = nc.Close()
		// What the client never acknowledged goes to another bound session or waits for the
		// next bind, as an operator's SMSC keeps a receipt until it is acknowledged.
		for _, r := range unacked {
			s.send(nil, r)
		}
	}()
	br := bufio.NewReader(nc)
	for {
		p, err := smpp.ReadPDU(br)
		if err != nil {
			var de *smpp.DecodeError
			if errors.As(err, &de) && de.Command != 0 && !de.Command.IsResponse() {
				st := smpp.StatusInvalidCmdLength
				if errors.Is(err, smpp.ErrUnsupportedCommand) {
					st = smpp.StatusInvalidCmdID
				}
				ss.write(smpp.PDU{Command: smpp.GenericNack, Status: st, Seq: de.Seq})
				continue
			}
			return
		}
		switch p.Command {
		case smpp.BindTransceiver:
			ss.bind(p)
			if !ss.bound {
				return
			}
		case smpp.BindReceiver, smpp.BindTransmitter:
			ss.write(smpp.PDU{Command: p.Command.Response(), Status: smpp.StatusBindFailed, Seq: p.Seq})
			return
		case smpp.EnquireLink:
			ss.write(smpp.PDU{Command: smpp.EnquireLinkResp, Seq: p.Seq})
		case smpp.Unbind:
			ss.write(smpp.PDU{Command: smpp.UnbindResp, Seq: p.Seq})
			return
		case smpp.SubmitSM:
			ss.submit(p)
		case smpp.DeliverSM:
			ss.write(smpp.PDU{Command: smpp.DeliverSMResp, Status: smpp.StatusInvalidBindStatus, Seq: p.Seq})
		case smpp.DeliverSMResp:
			s.mu.Lock()
			r := ss.unacked[p.Seq]
			delete(ss.unacked, p.Seq)
			s.mu.Unlock()
			if r != nil && p.Status != smpp.StatusOK {
				s.wg.Add(1)
				go s.sendLater(ss, r)
			}
		default:
			if !p.Command.IsResponse() {
				ss.write(smpp.PDU{Command: smpp.GenericNack, Status: smpp.StatusInvalidCmdID, Seq: p.Seq})
			}
			// Responses (deliver_sm_resp to our receipts, enquire_link_resp) need nothing.
		}
	}
}

func (ss *session) bind(p smpp.PDU) {
	b := p.Body.(*smpp.Bind)
	st := smpp.StatusOK
	switch {
	case ss.bound:
		st = smpp.StatusAlreadyBound
	case subtle.ConstantTimeCompare([]byte(b.SystemID), []byte(ss.s.cfg.SystemID)) != 1:
		st = smpp.StatusInvalidSystemID
	case subtle.ConstantTimeCompare([]byte(b.Password), []byte(ss.s.cfg.Password)) != 1:
		st = smpp.StatusInvalidPassword
	}
	ss.write(smpp.PDU{Command: smpp.BindTransceiverResp, Status: st, Seq: p.Seq, Body: &smpp.BindResp{SystemID: "sandbox"}})
	if st != smpp.StatusOK {
		return
	}
	ss.bound = true
	ss.s.mu.Lock()
	ss.s.bound[ss] = struct{}{}
	waiting := ss.s.waiting
	ss.s.waiting = nil
	ss.s.mu.Unlock()
	for _, r := range waiting {
		ss.deliver(r)
	}
}

func (ss *session) submit(p smpp.PDU) {
	if !ss.bound {
		ss.write(smpp.PDU{Command: smpp.SubmitSMResp, Status: smpp.StatusInvalidBindStatus, Seq: p.Seq})
		return
	}
	sm := p.Body.(*smpp.ShortMessage)
	body := sm.Short
	if len(body) == 0 {
		body, _ = sm.TLVs.MessagePayload()
	}
	var concat smpp.Concat
	var isPart bool
	if sm.ESMClass&smpp.ESMClassUDHI != 0 {
		var err error
		concat, isPart, body, err = smpp.SplitUDH(body)
		if err != nil {
			ss.write(smpp.PDU{Command: smpp.SubmitSMResp, Status: smpp.StatusInvalidESMClass, Seq: p.Seq})
			return
		}
	}
	if _, err := smpp.DecodeText(sm.DataCoding, body); err != nil {
		ss.write(smpp.PDU{Command: smpp.SubmitSMResp, Status: smpp.StatusInvalidMsgLength, Seq: p.Seq})
		return
	}
	id := ss.s.store(sm, body, concat, isPart)
	ss.write(smpp.PDU{Command: smpp.SubmitSMResp, Seq: p.Seq, Body: &smpp.SMResp{MessageID: id}})
	if sm.RegisteredDelivery&0x03 != 0 {
		ss.s.wg.Add(1)
		go ss.receipt(id, sm)
	}
}

// receipt sends a DELIVRD receipt for one part, on the session that submitted it while it is
// bound, else on another, else on the next bind.
func (ss *session) receipt(id string, sm *smpp.ShortMessage) {
	defer ss.s.wg.Done()
	at := time.Now()
	if ss.s.cfg.ReceiptDelay > 0 {
		t := time.NewTimer(ss.s.cfg.ReceiptDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ss.s.closing:
			return
		}
	}
	text, _ := smpp.DecodeText(sm.DataCoding, sm.Short)
	r := &smpp.ShortMessage{
		SourceTON: sm.DestTON, SourceNPI: sm.DestNPI, Source: sm.Dest,
		DestTON: sm.SourceTON, DestNPI: sm.SourceNPI, Dest: sm.Source,
		ESMClass: smpp.ESMClassReceipt,
		Short: []byte(smpp.FormatReceipt(smpp.Receipt{MessageID: id, State: smpp.StateDelivered, Submitted: 1, Delivered: 1,
			SubmitDate: at, DoneDate: time.Now(), Err: "000"}, receiptText(text))),
		TLVs: smpp.TLVs{
			{Tag: smpp.TagReceiptedMessageID, Value: append([]byte(id), 0)},
			{Tag: smpp.TagMessageState, Value: []byte{byte(smpp.StateDelivered)}},
		},
	}
	// The submit's reference comes back, as SMPP 3.4 has a receipt carry it.
	if ref, ok := sm.TLVs.Get(smpp.TagUserMessageReference); ok {
		r.TLVs = append(r.TLVs, smpp.TLV{Tag: smpp.TagUserMessageReference, Value: ref})
	}
	ss.s.send(ss, r)
}

// send delivers a receipt on prefer while it is bound, else on another bound session, else
// keeps it for the next bind.
func (s *Server) send(prefer *session, r *smpp.ShortMessage) {
	s.mu.Lock()
	to := prefer
	if _, ok := s.bound[to]; !ok {
		to = nil
		for b := range s.bound {
			to = b
			break
		}
	}
	if to == nil {
		s.waiting = append(s.waiting, r)
	}
	s.mu.Unlock()
	if to != nil {
		to.deliver(r) // a session that ended meanwhile hands it on
	}
}

// receiptRetry is how long a receipt the client answered with an error status (it could not
// take it yet) waits before it is sent again.
const receiptRetry = 200 * time.Millisecond

// sendLater sends a receipt again after receiptRetry, as an operator's SMSC keeps a receipt the
// client did not take and tries again; a closing server drops it.
func (s *Server) sendLater(prefer *session, r *smpp.ShortMessage) {
	defer s.wg.Done()
	t := time.NewTimer(receiptRetry)
	defer t.Stop()
	select {
	case <-t.C:
		s.send(prefer, r)
	case <-s.closing:
	}
}

// receiptText is the start of a message as a receipt's text field shows it: its first 20
// characters, up to the first that GSM 03.38 does not write as its ASCII octet (a letter
// outside ASCII, '@', '$', '_', an extension character), so its reader never misreads octets.
func receiptText(text string) string {
	r := []rune(text)
	r = r[:min(len(r), 20)]
	for i, c := range r {
		if c >= 0x80 || strings.ContainsRune("@$_`^{}[]~\\|", c) {
			return string(r[:i])
		}
	}
	return string(r)
}

// deliver sends a receipt on the session, kept as unacknowledged until its deliver_sm_resp;
// a session that ended meanwhile hands it on.
func (ss *session) deliver(r *smpp.ShortMessage) {
	ss.wmu.Lock()
	ss.seq++
	seq := ss.seq
	ss.wmu.Unlock()
	ss.s.mu.Lock()
	if _, ok := ss.s.bound[ss]; !ok {
		ss.s.mu.Unlock()
		ss.s.send(nil, r) // another bound session, or the next bind
		return
	}
	ss.unacked[seq] = r
	ss.s.mu.Unlock()
	ss.write(smpp.PDU{Command: smpp.DeliverSM, Seq: seq, Body: r})
}

// store keeps a message, or a part until its message is whole, and returns the part's id.
func (s *Server) store(sm *smpp.ShortMessage, body []byte, c smpp.Concat, isPart bool) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	id := fmt.Sprintf("sb%08x", s.nextID)
	to := strings.TrimPrefix(sm.Dest, "+")
	if !isPart || c.Total <= 1 || c.Seq < 1 || c.Seq > c.Total {
		text, _ := smpp.DecodeText(sm.DataCoding, body)
		s.keep(Message{IDs: []string{id}, From: sm.Source, To: to, Text: text, DataCoding: sm.DataCoding, Parts: 1, At: time.Now()})
		return id
	}
	k := partKey{from: sm.Source, to: to, ref: c.Ref, total: c.Total}
	j := s.partial[k]
	if j == nil {
		if len(s.partial) >= s.cfg.Keep {
			clear(s.partial) // a client that never finishes its messages does not grow this
		}
		j = &joining{parts: make([][]byte, c.Total), ids: make([]string, c.Total)}
		s.partial[k] = j
	}
	if j.parts[c.Seq-1] == nil {
		j.got++
	}
	j.parts[c.Seq-1], j.ids[c.Seq-1] = body, id
	if j.got == c.Total {
		delete(s.partial, k)
		var text strings.Builder
		for _, p := range j.parts {
			t, _ := smpp.DecodeText(sm.DataCoding, p)
			text.WriteString(t)
		}
		s.keep(Message{IDs: j.ids, From: sm.Source, To: to, Text: text.String(), DataCoding: sm.DataCoding, Parts: c.Total, At: time.Now()})
	}
	return id
}

func (s *Server) keep(m Message) {
	s.messages = append(s.messages, m)
	if over := len(s.messages) - s.cfg.Keep; over > 0 {
		s.messages = append([]Message(nil), s.messages[over:]...)
	}
}
