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
