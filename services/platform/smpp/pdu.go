package smpp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"reflect"
)

// CommandID is a PDU's command_id; a response's is its request's with the top bit set.
type CommandID uint32

// The commands this package speaks (SMPP 3.4 section 5.1.2.1).
const (
	GenericNack         CommandID = 0x80000000
	BindReceiver        CommandID = 0x00000001
	BindReceiverResp    CommandID = 0x80000001
	BindTransmitter     CommandID = 0x00000002
	BindTransmitterResp CommandID = 0x80000002
	SubmitSM            CommandID = 0x00000004
	SubmitSMResp        CommandID = 0x80000004
	DeliverSM           CommandID = 0x00000005
	DeliverSMResp       CommandID = 0x80000005
	Unbind              CommandID = 0x00000006
	UnbindResp          CommandID = 0x80000006
	BindTransceiver     CommandID = 0x00000009
	BindTransceiverResp CommandID = 0x80000009
	EnquireLink         CommandID = 0x00000015
	EnquireLinkResp     CommandID = 0x80000015
)

var commandNames = map[CommandID]string{
	GenericNack: "generic_nack", BindReceiver: "bind_receiver", BindReceiverResp: "bind_receiver_resp",
	BindTransmitter: "bind_transmitter", BindTransmitterResp: "bind_transmitter_resp", SubmitSM: "submit_sm",
	SubmitSMResp: "submit_sm_resp", DeliverSM: "deliver_sm", DeliverSMResp: "deliver_sm_resp", Unbind: "unbind",
	UnbindResp: "unbind_resp", BindTransceiver: "bind_transceiver", BindTransceiverResp: "bind_transceiver_resp",
	EnquireLink: "enquire_link", EnquireLinkResp: "enquire_link_resp",
}

func (c CommandID) String() string {
	if n, ok := commandNames[c]; ok {
		return n
	}
	return fmt.Sprintf("command 0x%08X", uint32(c))
}

// IsResponse reports whether c answers a request.
func (c CommandID) IsResponse() bool { return c&0x80000000 != 0 }

// Response is the command that answers c.
func (c CommandID) Response() CommandID { return c | 0x80000000 }

const (
	// HeaderLength is the four 32-bit header fields.
	HeaderLength = 16
	// MaxLength bounds a PDU read from the wire: the largest body a peer may legitimately send is
	// a submit_sm with a full message_payload (64 KiB); anything longer is a broken or hostile
	// peer, refused before it is buffered.
	MaxLength = 1 << 17

	// InterfaceVersion is SMPP 3.4's interface_version.
	InterfaceVersion = 0x34

	// Maximum lengths of the C-octet strings, the NUL included (SMPP 3.4 section 4).
	maxSystemID     = 16
	maxPassword     = 9
	maxSystemType   = 13
	maxAddressRange = 41
	maxServiceType  = 6
	maxAddr         = 21
	maxTime         = 17
	maxMessageID    = 65
	// MaxShortMessage is the most short_message holds (sm_length is one octet, 254 at most).
	MaxShortMessage = 254
)

// ESM class bits used here (SMPP 3.4 section 5.2.12).
const (
	// ESMClassReceipt marks a deliver_sm that carries an SMSC delivery receipt.
	ESMClassReceipt byte = 0x04
	// ESMClassUDHI says short_message starts with a user data header (concatenation).
	ESMClassUDHI byte = 0x40
)

// PDU is one protocol data unit. Body is nil for the commands that have none (enquire_link,
// unbind, their responses, generic_nack) and for a response sent with an error status.
type PDU struct {
	Command CommandID
	Status  Status
	Seq     uint32
	Body    Body
}

// Body is the part of a PDU after its header: *Bind, *BindResp, *ShortMessage or *SMResp.
type Body interface {
	encode(w *writer)
	decode(r *reader)
}

// Bind is the body of bind_transceiver (and bind_receiver, bind_transmitter).
type Bind struct {
	SystemID         string
	Password         string
	SystemType       string
	InterfaceVersion byte
	AddrTON          byte
	AddrNPI          byte
	AddressRange     string
}

// BindResp is the body of a bind's response.
type BindResp struct {
	SystemID string
	TLVs     TLVs
}

// ShortMessage is the body of submit_sm and of deliver_sm, which share one layout.
type ShortMessage struct {
	ServiceType          string
	SourceTON            byte
	SourceNPI            byte
	Source               string
	DestTON              byte
	DestNPI              byte
	Dest                 string
	ESMClass             byte
	ProtocolID           byte
	PriorityFlag         byte
	ScheduleDeliveryTime string
	ValidityPeriod       string
	RegisteredDelivery   byte
	ReplaceIfPresent     byte
	DataCoding           byte
	DefaultMsgID         byte
	Short                []byte // short_message, sm_length octets (at most MaxShortMessage)
	TLVs                 TLVs
}

// SMResp is the body of submit_sm_resp and of deliver_sm_resp (whose message_id is empty).
type SMResp struct {
	MessageID string
}

// newBody is the body a command carries; nil for the header-only commands. ok is false for a
// command this package does not speak.
func newBody(c CommandID) (b Body, ok bool) {
	switch c {
	case BindReceiver, BindTransmitter, BindTransceiver:
		return &Bind{}, true
	case BindReceiverResp, BindTransmitterResp, BindTransceiverResp:
		return &BindResp{}, true
	case SubmitSM, DeliverSM:
		return &ShortMessage{}, true
	case SubmitSMResp, DeliverSMResp:
		return &SMResp{}, true
	case EnquireLink, EnquireLinkResp, Unbind, UnbindResp, GenericNack:
		return nil, true
	}
	return nil, false
}

// Errors of the codec. A *DecodeError wraps one of them.
var (
	ErrShort              = errors.New("smpp: PDU shorter than its fields")
	ErrLength             = errors.New("smpp: command_length out of range")
	ErrUnsupportedCommand = errors.New("smpp: command not supported")
	ErrFieldTooLong       = errors.New("smpp: field longer than its maximum")
	ErrTrailingBytes      = errors.New("smpp: bytes after the last field")
	ErrBodyMismatch       = errors.New("smpp: body does not fit the command")
)

// DecodeError says which PDU (its header, when read) and which field could not be decoded, so a
// session can answer the request with generic_nack or the right status.
type DecodeError struct {
	Command CommandID
	Seq     uint32
	Field   string
	Err     error
}

func (e *DecodeError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("smpp: decode %s (seq %d) %s: %v", e.Command, e.Seq, e.Field, e.Err)
	}
	return fmt.Sprintf("smpp: decode %s (seq %d): %v", e.Command, e.Seq, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Encode writes p as it goes on the wire. A response with an error status is sent without its
// body, as SMPP 3.4 says for bind and submit responses.
func Encode(p PDU) ([]byte, error) {
	want, ok := newBody(p.Command)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnsupportedCommand, p.Command)
	}
	body := p.Body
	if body != nil && reflect.ValueOf(body).IsNil() {
		body = nil // a typed nil pointer is no body
	}
	if want == nil && body != nil {
		return nil, fmt.Errorf("%w: %s carries no body", ErrBodyMismatch, p.Command)
	}
	if want != nil && body != nil && reflect.TypeOf(want) != reflect.TypeOf(body) {
		return nil, fmt.Errorf("%w: %s with %T", ErrBodyMismatch, p.Command, body)
	}
	if want != nil && body == nil {
		body = want
	}
	w := &writer{b: make([]byte, HeaderLength, 64)}
	if body != nil && !(p.Command.IsResponse() && p.Status != StatusOK) {
		body.encode(w)
	}
	if w.err != nil {
		return nil, fmt.Errorf("smpp: encode %s: %w", p.Command, w.err)
	}
	if len(w.b) > MaxLength {
		return nil, fmt.Errorf("smpp: encode %s: %w", p.Command, ErrLength)
	}
	binary.BigEndian.PutUint32(w.b[0:], uint32(len(w.b)))
	binary.BigEndian.PutUint32(w.b[4:], uint32(p.Command))
	binary.BigEndian.PutUint32(w.b[8:], uint32(p.Status))
	binary.BigEndian.PutUint32(w.b[12:], p.Seq)
	return w.b, nil
}

// Decode reads one whole PDU from b, which must hold exactly command_length octets.
func Decode(b []byte) (PDU, error) {
	if len(b) < HeaderLength {
		return PDU{}, &DecodeError{Err: ErrShort}
	}
	p := PDU{
		Command: CommandID(binary.BigEndian.Uint32(b[4:])),
		Status:  Status(binary.BigEndian.Uint32(b[8:])),
		Seq:     binary.BigEndian.Uint32(b[12:]),
	}
	if n := binary.BigEndian.Uint32(b); n != uint32(len(b)) || n > MaxLength {
		return p, &DecodeError{Command: p.Command, Seq: p.Seq, Err: ErrLength}
	}
	body, ok := newBody(p.Command)
	if !ok {
		return p, &DecodeError{Command: p.Command, Seq: p.Seq, Err: ErrUnsupportedCommand}
	}
	rest := b[HeaderLength:]
	if body == nil {
		if len(rest) != 0 {
			return p, &DecodeError{Command: p.Command, Seq: p.Seq, Err: ErrTrailingBytes}
		}
		return p, nil
	}
	p.Body = body
	// A response with an error status usually comes without a body (SMPP 3.4 4.1.2, 4.4.2);
	// some SMSCs send one anyway, which is read like any other.
	if len(rest) == 0 && p.Command.IsResponse() {
		return p, nil
	}
	r := &reader{b: rest}
	body.decode(r)
	if r.err == nil && len(r.b) != 0 {
		r.fail("", ErrTrailingBytes)
	}
	if r.err != nil {
		return p, &DecodeError{Command: p.Command, Seq: p.Seq, Field: r.field, Err: r.err}
	}
	return p, nil
}

// ReadPDU reads the next PDU from r. An io error (io.EOF between PDUs) is returned as it is; a
// PDU that was read whole but does not decode is returned with a *DecodeError, so the caller can
// answer it and read on.
func ReadPDU(r io.Reader) (PDU, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return PDU{}, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if n < HeaderLength || n > MaxLength {
		// The stream cannot be framed any more: the caller has to drop the connection.
		return PDU{}, fmt.Errorf("smpp: command_length %d: %w", n, ErrLength)
	}
	b := make([]byte, n)
	copy(b, head[:])
	if _, err := io.ReadFull(r, b[4:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return PDU{}, err
	}
	return Decode(b)
}

func (b *Bind) encode(w *writer) {
	w.cstring("system_id", b.SystemID, maxSystemID)
	w.cstring("password", b.Password, maxPassword)
	w.cstring("system_type", b.SystemType, maxSystemType)
	w.byte(b.InterfaceVersion)
	w.byte(b.AddrTON)
	w.byte(b.AddrNPI)
	w.cstring("address_range", b.AddressRange, maxAddressRange)
}

func (b *Bind) decode(r *reader) {
	b.SystemID = r.cstring("system_id", maxSystemID)
	b.Password = r.cstring("password", maxPassword)
	b.SystemType = r.cstring("system_type", maxSystemType)
	b.InterfaceVersion = r.byte("interface_version")
	b.AddrTON = r.byte("addr_ton")
	b.AddrNPI = r.byte("addr_npi")
	b.AddressRange = r.cstring("address_range", maxAddressRange)
}

func (b *BindResp) encode(w *writer) {
	w.cstring("system_id", b.SystemID, maxSystemID)
	w.tlvs(b.TLVs)
}

func (b *BindResp) decode(r *reader) {
	b.SystemID = r.cstring("system_id", maxSystemID)
	b.TLVs = r.tlvs()
}

func (m *ShortMessage) encode(w *writer) {
	w.cstring("service_type", m.ServiceType, maxServiceType)
	w.byte(m.SourceTON)
	w.byte(m.SourceNPI)
	w.cstring("source_addr", m.Source, maxAddr)
	w.byte(m.DestTON)
	w.byte(m.DestNPI)
	w.cstring("destination_addr", m.Dest, maxAddr)
	w.byte(m.ESMClass)
	w.byte(m.ProtocolID)
	w.byte(m.PriorityFlag)
	w.time("schedule_delivery_time", m.ScheduleDeliveryTime)
	w.time("validity_period", m.ValidityPeriod)
	w.byte(m.RegisteredDelivery)
	w.byte(m.ReplaceIfPresent)
	w.byte(m.DataCoding)
	w.byte(m.DefaultMsgID)
	if len(m.Short) > MaxShortMessage {
		w.fail("short_message", ErrFieldTooLong)
		return
	}
	w.byte(byte(len(m.Short)))
	w.b = append(w.b, m.Short...)
	w.tlvs(m.TLVs)
}

func (m *ShortMessage) decode(r *reader) {
	m.ServiceType = r.cstring("service_type", maxServiceType)
	m.SourceTON = r.byte("source_addr_ton")
	m.SourceNPI = r.byte("source_addr_npi")
	m.Source = r.cstring("source_addr", maxAddr)
	m.DestTON = r.byte("dest_addr_ton")
	m.DestNPI = r.byte("dest_addr_npi")
	m.Dest = r.cstring("destination_addr", maxAddr)
	m.ESMClass = r.byte("esm_class")
	m.ProtocolID = r.byte("protocol_id")
	m.PriorityFlag = r.byte("priority_flag")
	m.ScheduleDeliveryTime = r.time("schedule_delivery_time")
	m.ValidityPeriod = r.time("validity_period")
	m.RegisteredDelivery = r.byte("registered_delivery")
	m.ReplaceIfPresent = r.byte("replace_if_present_flag")
	m.DataCoding = r.byte("data_coding")
	m.DefaultMsgID = r.byte("sm_default_msg_id")
	n := int(r.byte("sm_length"))
	if r.err == nil && n > MaxShortMessage {
		r.fail("sm_length", ErrFieldTooLong)
	}
	m.Short = r.octets("short_message", n)
	m.TLVs = r.tlvs()
}

func (m *SMResp) encode(w *writer) { w.cstring("message_id", m.MessageID, maxMessageID) }
func (m *SMResp) decode(r *reader) { m.MessageID = r.cstring("message_id", maxMessageID) }

// writer appends fields; the first error sticks and the rest are skipped.
type writer struct {
	b   []byte
	err error
}

func (w *writer) fail(field string, err error) {
	if w.err == nil {
		w.err = fmt.Errorf("%s: %w", field, err)
	}
}

func (w *writer) byte(v byte) { w.b = append(w.b, v) }

// cstring writes s and its NUL; max counts the NUL, as the specification's sizes do.
func (w *writer) cstring(field, s string, max int) {
	if len(s)+1 > max {
		w.fail(field, ErrFieldTooLong)
		return
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			w.fail(field, errors.New("NUL inside a C-octet string"))
			return
		}
	}
	w.b = append(append(w.b, s...), 0)
}

// time writes an absolute or relative time: empty, or the 16 characters of SMPP 3.4 7.1.1.
func (w *writer) time(field, s string) {
	if s != "" && len(s) != maxTime-1 {
		w.fail(field, fmt.Errorf("%q is neither empty nor 16 characters", s))
		return
	}
	w.cstring(field, s, maxTime)
}

func (w *writer) tlvs(ts TLVs) {
	for _, t := range ts {
		if len(t.Value) > 0xFFFF {
			w.fail(fmt.Sprintf("tlv 0x%04X", uint16(t.Tag)), ErrFieldTooLong)
			return
		}
		w.b = binary.BigEndian.AppendUint16(w.b, uint16(t.Tag))
		w.b = binary.BigEndian.AppendUint16(w.b, uint16(len(t.Value)))
		w.b = append(w.b, t.Value...)
	}
}

// reader consumes fields; the first error sticks, naming its field, and later reads return
// zero values.
type reader struct {
	b     []byte
	err   error
	field string
}

func (r *reader) fail(field string, err error) {
	if r.err == nil {
		r.err, r.field = err, field
	}
}

func (r *reader) byte(field string) byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 1 {
		r.fail(field, ErrShort)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) octets(field string, n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.fail(field, ErrShort)
		return nil
	}
	if n == 0 {
		return nil
	}
	v := make([]byte, n)
	copy(v, r.b)
	r.b = r.b[n:]
	return v
}

// cstring reads up to and including the NUL, which must come within max octets.
func (r *reader) cstring(field string, max int) string {
	if r.err != nil {
		return ""
	}
	for i := 0; i < len(r.b) && i < max; i++ {
		if r.b[i] == 0 {
			s := string(r.b[:i])
			r.b = r.b[i+1:]
			return s
		}
	}
	if len(r.b) < max {
		r.fail(field, ErrShort)
	} else {
		r.fail(field, ErrFieldTooLong)
	}
	return ""
}

func (r *reader) time(field string) string {
	s := r.cstring(field, maxTime)
	if r.err == nil && s != "" && len(s) != maxTime-1 {
		r.fail(field, fmt.Errorf("%q is neither empty nor 16 characters", s))
	}
	return s
}

// tlvs reads optional parameters to the end of the PDU.
func (r *reader) tlvs() TLVs {
	var ts TLVs
	for r.err == nil && len(r.b) > 0 {
		if len(r.b) < 4 {
			r.fail("tlv", ErrShort)
			return nil
		}
		tag := Tag(binary.BigEndian.Uint16(r.b))
		n := int(binary.BigEndian.Uint16(r.b[2:]))
		r.b = r.b[4:]
		v := r.octets(fmt.Sprintf("tlv 0x%04X", uint16(tag)), n)
		if r.err != nil {
			return nil
		}
		ts = append(ts, TLV{Tag: tag, Value: v})
	}
	return ts
}
