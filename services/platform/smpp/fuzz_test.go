package smpp

import (
	"bytes"
	"testing"
)

// FuzzDecode: decoding arbitrary octets never panics, and whatever decodes re-encodes to octets
// that decode to the same PDU and encode to themselves again.
func FuzzDecode(f *testing.F) {
	for _, p := range samplePDUs() {
		b, err := Encode(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Encode(p)
		if err != nil {
			t.Fatalf("decoded %#v but cannot encode it: %v", p, err)
		}
		q, err := Decode(again)
		if err != nil {
			t.Fatalf("re-encoded PDU does not decode: %v\n%x", err, again)
		}
		third, err := Encode(q)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, third) {
			t.Fatalf("round trip changed the PDU:\n%x\n%x", again, third)
		}
		if q.Command != p.Command || q.Seq != p.Seq || q.Status != p.Status {
			t.Fatalf("header changed: %+v vs %+v", p, q)
		}
	})
}

// FuzzParseReceipt: a receipt's text comes from the SMSC; reading it never panics, and what it
// reads as a state is one of the specification's.
func FuzzParseReceipt(f *testing.F) {
	f.Add("id:0123456789 sub:001 dlvrd:001 submit date:2611291200 done date:2611291201 stat:DELIVRD err:000 text:Your code")
	f.Add("id:ab Text:x stat:UNDELIV")
	f.Add("İİİİ id:İ sub:İ stat:DELIVRD")
	f.Add("id:1 stat:DELIVRD text:123456 is your verif\x00\xff")
	f.Fuzz(func(t *testing.T, text string) {
		r, err := ParseReceipt(&ShortMessage{ESMClass: ESMClassReceipt, Short: []byte(text)})
		if err == nil && (r.MessageID == "" || r.State < StateEnroute || r.State > StateRejected) {
			t.Fatalf("accepted %+v", r)
		}
		if len(r.Text) > len(text) {
			t.Fatalf("text %q longer than the receipt %q", r.Text, text)
		}
	})
}

// FuzzReceiptParameters: a receipt's optional parameters come from the SMSC; any value of
// user_message_reference and receipted_message_id is read without panicking, a reference only
// when it is two octets.
func FuzzReceiptParameters(f *testing.F) {
	f.Add([]byte{0x12, 0x34}, []byte("a1b2\x00"))
	f.Add([]byte{0x12}, []byte(""))
	f.Add([]byte{}, []byte("\x00"))
	f.Add([]byte{1, 2, 3}, bytes.Repeat([]byte("9"), 70))
	f.Fuzz(func(t *testing.T, ref, id []byte) {
		r, err := ParseReceipt(&ShortMessage{ESMClass: ESMClassReceipt, Short: []byte("id:x stat:DELIVRD"),
			TLVs: TLVs{{Tag: TagUserMessageReference, Value: ref}, {Tag: TagReceiptedMessageID, Value: id}}})
		if err != nil {
			t.Fatal(err) // the text's id and state stand when the parameters do not
		}
		if r.HasReference != (len(ref) == 2) || (r.HasReference && r.Reference != uint16(ref[0])<<8|uint16(ref[1])) {
			t.Fatalf("reference %v %#x from %x", r.HasReference, r.Reference, ref)
		}
		if r.MessageID == "" {
			t.Fatalf("no message id from %q", id)
		}
	})
}
