package smpp

import (
	"bytes"
	"fmt"
)

// Tag is an optional parameter's tag (SMPP 3.4 section 5.3.2).
type Tag uint16

// The optional parameters this package reads or writes by name; any other is kept as it came.
const (
	TagDestAddrSubunit      Tag = 0x0005
	TagPayloadType          Tag = 0x0019
	TagReceiptedMessageID   Tag = 0x001E
	TagUserMessageReference Tag = 0x0204
	TagSARMsgRefNum         Tag = 0x020C
	TagSARTotalSegments     Tag = 0x020E
	TagSARSegmentSeqnum     Tag = 0x020F
	TagSCInterfaceVersion   Tag = 0x0210
	TagNetworkErrorCode     Tag = 0x0423
	TagMessagePayload       Tag = 0x0424
	TagMessageState         Tag = 0x0427
)

// TLV is one optional parameter.
type TLV struct {
	Tag   Tag
	Value []byte
}

// TLVs are a PDU's optional parameters in the order they came (or are to be sent).
type TLVs []TLV

// Get returns the value of the first parameter with tag.
func (ts TLVs) Get(tag Tag) ([]byte, bool) {
	for _, t := range ts {
		if t.Tag == tag {
			return t.Value, true
		}
	}
	return nil, false
}

// Set replaces the value of tag, or appends it.
func (ts *TLVs) Set(tag Tag, v []byte) {
	for i, t := range *ts {
		if t.Tag == tag {
			(*ts)[i].Value = v
			return
		}
	}
	*ts = append(*ts, TLV{Tag: tag, Value: v})
}

// MessagePayload is message_payload: the whole message when short_message is empty.
func (ts TLVs) MessagePayload() ([]byte, bool) { return ts.Get(TagMessagePayload) }

// ReceiptedMessageID is receipted_message_id: the SMSC's id of the message a receipt is about.
// A C-octet string on the wire; an SMSC that leaves out the NUL is read all the same.
func (ts TLVs) ReceiptedMessageID() (string, bool) {
	v, ok := ts.Get(TagReceiptedMessageID)
	if !ok || len(v) > maxMessageID {
		return "", false
	}
	if i := bytes.IndexByte(v, 0); i >= 0 {
		v = v[:i]
	}
	return string(v), len(v) > 0
}

// UserMessageReference is user_message_reference: the ESME's own reference of a message, two
// octets, which an SMSC echoes in the message's delivery receipt. Any other length is not one.
func (ts TLVs) UserMessageReference() (uint16, bool) {
	v, ok := ts.Get(TagUserMessageReference)
	if !ok || len(v) != 2 {
		return 0, false
	}
	return uint16(v[0])<<8 | uint16(v[1]), true
}

// MessageState is message_state: where the message a receipt is about ended up.
func (ts TLVs) MessageState() (MessageState, bool) {
	v, ok := ts.Get(TagMessageState)
	if !ok || len(v) != 1 {
		return 0, false
	}
	return MessageState(v[0]), true
}

// MessageState is the message_state of SMPP 3.4 (section 5.2.28).
type MessageState byte

// The states a message is in; Delivered, Expired, Deleted, Undeliverable and Rejected are
// final.
const (
	StateEnroute       MessageState = 1
	StateDelivered     MessageState = 2
	StateExpired       MessageState = 3
	StateDeleted       MessageState = 4
	StateUndeliverable MessageState = 5
	StateAccepted      MessageState = 6
	StateUnknown       MessageState = 7
	StateRejected      MessageState = 8
)

var stateNames = map[MessageState]string{
	StateEnroute: "ENROUTE", StateDelivered: "DELIVERED", StateExpired: "EXPIRED", StateDeleted: "DELETED",
	StateUndeliverable: "UNDELIVERABLE", StateAccepted: "ACCEPTED", StateUnknown: "UNKNOWN", StateRejected: "REJECTED",
}

func (s MessageState) String() string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return fmt.Sprintf("message_state %d", byte(s))
}

// Final reports whether the state will not change any more.
func (s MessageState) Final() bool {
	switch s {
	case StateDelivered, StateExpired, StateDeleted, StateUndeliverable, StateRejected:
		return true
	}
	return false
}
