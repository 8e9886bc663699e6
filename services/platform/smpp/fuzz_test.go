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
	f.Fuzz(func(t *testing.T, text string) {
		r, err := ParseReceipt(&ShortMessage{ESMClass: ESMClassReceipt, Short: []byte(text)})
		if err == nil && (r.MessageID == "" || r.State < StateEnroute || r.State > StateRejected) {
			t.Fatalf("accepted %+v", r)
		}
	})
}
