package smpp

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// samplePDUs are valid PDUs of every command spoken here; the fuzz target's seeds too.
func samplePDUs() []PDU {
	return []PDU{
		{Command: BindTransceiver, Seq: 1, Body: &Bind{SystemID: "mnv", Password: "secret", SystemType: "OTP", InterfaceVersion: InterfaceVersion}},
		{Command: BindTransceiverResp, Seq: 1, Body: &BindResp{SystemID: "SMSC", TLVs: TLVs{{Tag: TagSCInterfaceVersion, Value: []byte{0x34}}}}},
		{Command: BindTransceiverResp, Status: StatusInvalidPassword, Seq: 1},
		{Command: SubmitSM, Seq: 2, Body: &ShortMessage{SourceTON: 5, Source: "mnv", DestTON: 1, DestNPI: 1, Dest: "447700900123", RegisteredDelivery: 1, Short: []byte("Your code is 123456")}},
		{Command: SubmitSM, Seq: 3, Body: &ShortMessage{ESMClass: ESMClassUDHI, DataCoding: CodingUCS2, Dest: "1", Short: []byte{5, 0, 3, 9, 2, 1, 0, 'h'}}},
		{Command: SubmitSM, Seq: 4, Body: &ShortMessage{Dest: "1", ValidityPeriod: "000000001000000R", TLVs: TLVs{{Tag: TagMessagePayload, Value: bytes.Repeat([]byte("a"), 300)}}}},
		{Command: SubmitSMResp, Seq: 2, Body: &SMResp{MessageID: "a1b2c3"}},
		{Command: SubmitSMResp, Status: StatusThrottled, Seq: 3},
		{Command: DeliverSM, Seq: 7, Body: &ShortMessage{ESMClass: ESMClassReceipt, Source: "447700900123", Short: []byte("id:a1b2c3 sub:001 dlvrd:001 submit date:2611291200 done date:2611291201 stat:DELIVRD err:000 text:x"),
			TLVs: TLVs{{Tag: TagReceiptedMessageID, Value: []byte("a1b2c3\x00")}, {Tag: TagMessageState, Value: []byte{2}}, {Tag: TagUserMessageReference, Value: []byte{0x12, 0x34}}}}},
		{Command: SubmitSM, Seq: 5, Body: &ShortMessage{Dest: "447700900123", RegisteredDelivery: 1, Short: []byte("123456 is your code"),
			TLVs: TLVs{{Tag: TagUserMessageReference, Value: []byte{0xff, 0x01}}}}},
		{Command: DeliverSMResp, Seq: 7, Body: &SMResp{}},
		{Command: EnquireLink, Seq: 8},
		{Command: EnquireLinkResp, Seq: 8},
		{Command: Unbind, Seq: 9},
		{Command: UnbindResp, Seq: 9},
		{Command: GenericNack, Status: StatusInvalidCmdID, Seq: 10},
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, p := range samplePDUs() {
		t.Run(p.Command.String(), func(t *testing.T) {
			b, err := Encode(p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if p.Body == nil && got.Body != nil {
				p.Body, _ = newBody(p.Command) // an error response decodes to an empty body
			}
			if !reflect.DeepEqual(got, p) {
				t.Fatalf("decoded\n%#v\nwant\n%#v", got, p)
			}
		})
	}
}

// TestWireLayout pins the octets of a submit_sm against a layout written out by hand from the
// specification's field table, so encoder and decoder cannot agree on a wrong layout.
func TestWireLayout(t *testing.T) {
	p := PDU{Command: SubmitSM, Seq: 0x01020304, Body: &ShortMessage{
		SourceTON: 5, Source: "ab", DestTON: 1, DestNPI: 1, Dest: "12", RegisteredDelivery: 1, DataCoding: 8,
		Short: []byte{0, 'h'}, TLVs: TLVs{{Tag: TagUserMessageReference, Value: []byte{0, 7}}},
	}}
	want := "0000002d" + "00000004" + "00000000" + "01020304" +
		"00" + // service_type ""
		"05" + "00" + "616200" + // source ton, npi, "ab"
		"01" + "01" + "313200" + // dest ton, npi, "12"
		"00" + "00" + "00" + // esm_class, protocol_id, priority_flag
		"00" + "00" + // schedule_delivery_time, validity_period
		"01" + "00" + "08" + "00" + // registered_delivery, replace_if_present, data_coding, sm_default_msg_id
		"02" + "0068" + // sm_length, short_message
		"0204" + "0002" + "0007" // user_message_reference
	b, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("encoded\n%s\nwant\n%s", got, want)
	}
}

func TestEncodeRefuses(t *testing.T) {
	tests := []struct {
		name string
		p    PDU
		want error
	}{
		{"system_id of 16", PDU{Command: BindTransceiver, Body: &Bind{SystemID: strings.Repeat("s", 16)}}, ErrFieldTooLong},
		{"password of 9", PDU{Command: BindTransceiver, Body: &Bind{Password: strings.Repeat("p", 9)}}, ErrFieldTooLong},
		{"destination of 21", PDU{Command: SubmitSM, Body: &ShortMessage{Dest: strings.Repeat("1", 21)}}, ErrFieldTooLong},
		{"short_message of 255", PDU{Command: SubmitSM, Body: &ShortMessage{Short: make([]byte, 255)}}, ErrFieldTooLong},
		{"message_id of 65", PDU{Command: SubmitSMResp, Body: &SMResp{MessageID: strings.Repeat("m", 65)}}, ErrFieldTooLong},
		{"wrong body", PDU{Command: SubmitSM, Body: &SMResp{}}, ErrBodyMismatch},
		{"body on enquire_link", PDU{Command: EnquireLink, Body: &SMResp{}}, ErrBodyMismatch},
		{"unknown command", PDU{Command: 0x103}, ErrUnsupportedCommand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Encode(tt.p); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
	// The largest allowed values pass.
	if _, err := Encode(PDU{Command: BindTransceiver, Body: &Bind{SystemID: strings.Repeat("s", 15), Password: strings.Repeat("p", 8)}}); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeRefuses(t *testing.T) {
	valid, _ := Encode(PDU{Command: SubmitSMResp, Seq: 5, Body: &SMResp{MessageID: "x"}})
	header := func(length, cmd uint32) []byte {
		b := make([]byte, 16)
		b[0], b[1], b[2], b[3] = byte(length>>24), byte(length>>16), byte(length>>8), byte(length)
		b[4], b[5], b[6], b[7] = byte(cmd>>24), byte(cmd>>16), byte(cmd>>8), byte(cmd)
		return b
	}
	unterminated := append(header(16+20, uint32(SubmitSMResp)), bytes.Repeat([]byte("m"), 20)...)
	longID := append(append(header(16+70, uint32(SubmitSMResp)), bytes.Repeat([]byte("m"), 69)...), 0)
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"short header", valid[:10], ErrShort},
		{"length disagrees", valid[:len(valid)-1], ErrLength},
		{"unknown command", header(16, 0x103), ErrUnsupportedCommand},
		{"body on enquire_link", append(header(17, uint32(EnquireLink)), 0), ErrTrailingBytes},
		{"unterminated message_id", unterminated, ErrShort},
		{"message_id past 65", longID, ErrFieldTooLong},
		{"bytes after message_id", append(header(19, uint32(SubmitSMResp)), 'a', 0, 'b'), ErrTrailingBytes},
		{"truncated tlv", func() []byte {
			b, _ := Encode(PDU{Command: SubmitSM, Body: &ShortMessage{TLVs: TLVs{{Tag: TagMessagePayload, Value: []byte("abcd")}}}})
			b = b[:len(b)-2]
			b[3] -= 2
			return b
		}(), ErrShort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.b)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("err %T is not a *DecodeError", err)
			}
		})
	}
}

func TestReadPDU(t *testing.T) {
	var stream bytes.Buffer
	for _, p := range samplePDUs()[:4] {
		b, err := Encode(p)
		if err != nil {
			t.Fatal(err)
		}
		stream.Write(b)
	}
	for i := 0; i < 4; i++ {
		if _, err := ReadPDU(&stream); err != nil {
			t.Fatalf("pdu %d: %v", i, err)
		}
	}
	if _, err := ReadPDU(&stream); err == nil {
		t.Fatal("read past the end")
	}
	huge := []byte{0x7f, 0, 0, 0}
	if _, err := ReadPDU(bytes.NewReader(huge)); !errors.Is(err, ErrLength) {
		t.Fatalf("a 2 GB command_length: %v", err)
	}
}

func TestStatusIsError(t *testing.T) {
	var err error = StatusThrottled
	if !errors.Is(err, StatusThrottled) || err.Error() != "smpp: ESME_RTHROTTLED" {
		t.Fatalf("%v", err)
	}
	if !StatusMessageQueueFull.Transient() || StatusInvalidDestAddr.Transient() {
		t.Fatal("Transient")
	}
	if got := Status(0x400).String(); got != "command_status 0x00000400" {
		t.Fatal(got)
	}
}

func TestTLVAccessors(t *testing.T) {
	ts := TLVs{{Tag: TagReceiptedMessageID, Value: []byte("abc\x00")}, {Tag: TagMessageState, Value: []byte{5}}}
	if id, ok := ts.ReceiptedMessageID(); !ok || id != "abc" {
		t.Fatalf("id %q %v", id, ok)
	}
	if st, ok := ts.MessageState(); !ok || st != StateUndeliverable || !st.Final() {
		t.Fatalf("state %v %v", st, ok)
	}
	bad := TLVs{{Tag: TagMessageState, Value: []byte{1, 2}}}
	if _, ok := bad.MessageState(); ok {
		t.Fatal("a two-octet message_state was read")
	}
	ts.Set(TagMessageState, []byte{2})
	if st, _ := ts.MessageState(); st != StateDelivered || len(ts) != 2 {
		t.Fatalf("Set: %v", ts)
	}
}
