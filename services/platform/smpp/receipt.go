package smpp

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// Receipt is an SMSC delivery receipt: a deliver_sm with ESMClassReceipt, read from its
// receipted_message_id and message_state parameters where the SMSC sent them and from the text
// ("id:… sub:… dlvrd:… submit date:… done date:… stat:… err:… text:…", the de-facto format of
// SMPP 3.4 appendix B) otherwise.
type Receipt struct {
	// MessageID is the SMSC's id of the part the receipt is about, as submit_sm_resp gave it.
	MessageID string
	State     MessageState
	// Stat is the text's stat field as sent ("DELIVRD", "UNDELIV", …); empty when only the
	// parameters told the state.
	Stat       string
	Submitted  int
	Delivered  int
	SubmitDate time.Time // UTC; zero when absent or unreadable
	DoneDate   time.Time
	// Err is the network-specific error code of the text's err field ("000" when none).
	Err string
	// Dest is the number the message went to (the receipt's source_addr), as the SMSC wrote
	// it (usually international digits without "+").
	Dest string
	// Reference is the user_message_reference the submit carried, when the SMSC echoed it
	// (HasReference).
	Reference    uint16
	HasReference bool
	// Text is the text's "text" field: the first characters of the message (20 by custom) as
	// the SMSC renders them, "" when it sends none. For mnv it holds a one-time code: it is
	// compared, never logged, printed or kept.
	Text string
}

// ErrNotReceipt is ParseReceipt's answer for a deliver_sm that is not a delivery receipt.
var ErrNotReceipt = errors.New("smpp: deliver_sm is not a delivery receipt")

// statStates maps the text's stat field to a message state.
var statStates = map[string]MessageState{
	"ENROUTE": StateEnroute, "DELIVRD": StateDelivered, "EXPIRED": StateExpired, "DELETED": StateDeleted,
	"UNDELIV": StateUndeliverable, "ACCEPTD": StateAccepted, "UNKNOWN": StateUnknown, "REJECTD": StateRejected,
}

// receiptKeys are the text's fields in their usual order; "text" ends it and may hold anything.
var receiptKeys = []string{"id", "sub", "dlvrd", "submit date", "done date", "stat", "err", "text"}

// ParseReceipt reads a receipt from a deliver_sm body. The parameters win over the text where
// both are present (the text's id is sometimes in another base than submit_sm_resp's).
func ParseReceipt(m *ShortMessage) (Receipt, error) {
	if m == nil || m.ESMClass&0x3C != ESMClassReceipt {
		return Receipt{}, ErrNotReceipt
	}
	body := m.Short
	if len(body) == 0 {
		body, _ = m.TLVs.MessagePayload()
	}
	r := parseReceiptText(string(body))
	if id, ok := m.TLVs.ReceiptedMessageID(); ok {
		r.MessageID = id
	}
	if st, ok := m.TLVs.MessageState(); ok {
		r.State = st
	}
	r.Dest = m.Source
	r.Reference, r.HasReference = m.TLVs.UserMessageReference()
	if r.MessageID == "" {
		return r, errors.New("smpp: delivery receipt without a message id")
	}
	if r.State == 0 {
		return r, errors.New("smpp: delivery receipt without a state")
	}
	return r, nil
}

// parseReceiptText reads the fields it finds; keys are matched without regard to case
// ("Text:" and "text:" both occur).
func parseReceiptText(s string) Receipt {
	lower := asciiLower(s) // same length as s, so its offsets are s's
	type found struct {
		key        string
		start, end int // of the value
	}
	var fs []found
	from := 0
	for _, k := range receiptKeys {
		i := indexKey(lower, k+":", from)
		if i < 0 {
			continue
		}
		fs = append(fs, found{key: k, start: i + len(k) + 1})
		from = i + len(k) + 1
	}
	for i := range fs {
		fs[i].end = len(s)
		if i+1 < len(fs) {
			fs[i].end = fs[i+1].start - len(fs[i+1].key) - 1
		}
	}
	var r Receipt
	for _, f := range fs {
		v := strings.TrimSpace(s[f.start:f.end])
		switch f.key {
		case "id":
			r.MessageID = v
		case "sub":
			r.Submitted, _ = strconv.Atoi(v)
		case "dlvrd":
			r.Delivered, _ = strconv.Atoi(v)
		case "submit date":
			r.SubmitDate = receiptTime(v)
		case "done date":
			r.DoneDate = receiptTime(v)
		case "stat":
			r.Stat = strings.ToUpper(v)
			r.State = statStates[r.Stat]
		case "err":
			r.Err = v
		case "text":
			r.Text = v
		}
	}
	return r
}

// asciiLower lowers ASCII letters only: strings.ToLower may change a text's length (the SMSC's
// text is not ours), and offsets found in the lowered copy must hold in the original.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// indexKey finds key at or after from where it starts the text or follows a space, so that
// "id:" is not found inside "receipted id:" or a value.
func indexKey(s, key string, from int) int {
	for from <= len(s) {
		i := strings.Index(s[from:], key)
		if i < 0 {
			return -1
		}
		i += from
		if i == 0 || s[i-1] == ' ' {
			return i
		}
		from = i + 1
	}
	return -1
}

// receiptTime reads YYMMDDhhmm or YYMMDDhhmmss as UTC.
func receiptTime(v string) time.Time {
	for _, layout := range []string{"0601021504", "060102150405"} {
		if len(v) == len(layout) {
			if t, err := time.Parse(layout, v); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}

// FormatReceipt writes a receipt's text the way SMSCs do, for a test or sandbox SMSC.
func FormatReceipt(r Receipt, text string) string {
	stat := r.Stat
	if stat == "" {
		for k, st := range statStates {
			if st == r.State {
				stat = k
			}
		}
	}
	if len(text) > 20 {
		text = text[:20]
	}
	return "id:" + r.MessageID +
		" sub:" + pad3(r.Submitted) + " dlvrd:" + pad3(r.Delivered) +
		" submit date:" + r.SubmitDate.UTC().Format("0601021504") +
		" done date:" + r.DoneDate.UTC().Format("0601021504") +
		" stat:" + stat + " err:" + r.Err + " text:" + text
}

func pad3(n int) string {
	s := strconv.Itoa(n)
	for len(s) < 3 {
		s = "0" + s
	}
	return s
}
