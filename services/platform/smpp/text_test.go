package smpp

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEncodeText(t *testing.T) {
	tests := []struct {
		name   string
		text   string
		coding byte
		parts  int
	}{
		{"ascii", "Your code is 123456", CodingDefault, 1},
		{"gsm accents", "Code 123456 — ", CodingUCS2, 1}, // the em dash is not GSM
		{"gsm basic", "Ciao è già Ñoño ÆØÅ Δ", CodingDefault, 1},
		{"160 gsm", strings.Repeat("a", 160), CodingDefault, 1},
		{"161 gsm", strings.Repeat("a", 161), CodingDefault, 2},
		{"extension counts double", strings.Repeat("€", 80), CodingDefault, 1},
		{"extension over 160", strings.Repeat("€", 81), CodingDefault, 2},
		{"306 gsm", strings.Repeat("a", 306), CodingDefault, 2},
		{"307 gsm", strings.Repeat("a", 307), CodingDefault, 3},
		{"400 gsm", strings.Repeat("x", 400), CodingDefault, 3},
		{"70 ucs2", strings.Repeat("ж", 70), CodingUCS2, 1},
		{"71 ucs2", strings.Repeat("ж", 71), CodingUCS2, 2},
		{"134 ucs2", strings.Repeat("ж", 134), CodingUCS2, 2},
		{"135 ucs2", strings.Repeat("ж", 135), CodingUCS2, 3},
		{"emoji pairs", strings.Repeat("😀", 40), CodingUCS2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := EncodeText(tt.text)
			if err != nil {
				t.Fatal(err)
			}
			if got.DataCoding != tt.coding || len(got.Parts) != tt.parts {
				t.Fatalf("coding 0x%02x parts %d, want 0x%02x %d", got.DataCoding, len(got.Parts), tt.coding, tt.parts)
			}
			// Reassemble the parts as a handset would and compare.
			var b strings.Builder
			ref := -1
			for i, p := range got.Parts {
				body := p
				if got.Concatenated() {
					c, ok, rest, err := SplitUDH(p)
					if err != nil || !ok {
						t.Fatalf("part %d: udh %v %v", i, ok, err)
					}
					if c.Total != len(got.Parts) || c.Seq != i+1 || (ref >= 0 && int(c.Ref) != ref) {
						t.Fatalf("part %d: %+v", i, c)
					}
					ref = int(c.Ref)
					body = rest
					// UCS-2 fills the 140 octets of an SMS; GSM goes unpacked, one septet an
					// octet, and the SMSC packs the 6-octet UDH and 153 septets into 140.
					if limit := map[byte]int{CodingUCS2: 140, CodingDefault: 6 + 153}[got.DataCoding]; len(p) > limit {
						t.Fatalf("part %d is %d octets", i, len(p))
					}
				}
				s, err := DecodeText(got.DataCoding, body)
				if err != nil {
					t.Fatal(err)
				}
				if !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError) {
					t.Fatalf("part %d split a character: %q", i, s)
				}
				b.WriteString(s)
			}
			if b.String() != tt.text {
				t.Fatalf("reassembled %q", b.String())
			}
		})
	}
	if _, err := EncodeText(""); err != ErrEmptyText {
		t.Fatalf("empty: %v", err)
	}
	if _, err := EncodeText(strings.Repeat("ж", 67*255+1)); err != ErrTextTooLong {
		t.Fatalf("too long: %v", err)
	}
}

// TestGSMTable pins septets of the default alphabet and the extension table.
func TestGSMTable(t *testing.T) {
	tests := []struct {
		text string
		want []byte
	}{
		{"@", []byte{0x00}},
		{"$", []byte{0x02}},
		{"_", []byte{0x11}},
		{"¤", []byte{0x24}},
		{"¡", []byte{0x40}},
		{"§", []byte{0x5F}},
		{"¿", []byte{0x60}},
		{"à", []byte{0x7F}},
		{"€", []byte{0x1B, 0x65}},
		{"[]", []byte{0x1B, 0x3C, 0x1B, 0x3E}},
		{"{|}~^\\", []byte{0x1B, 0x28, 0x1B, 0x40, 0x1B, 0x29, 0x1B, 0x3D, 0x1B, 0x14, 0x1B, 0x2F}},
	}
	for _, tt := range tests {
		got, ok := gsmEncode(tt.text)
		if !ok || string(got) != string(tt.want) {
			t.Errorf("%q: % x, want % x", tt.text, got, tt.want)
		}
		if back := gsmDecode(got); back != tt.text {
			t.Errorf("%q decodes to %q", tt.text, back)
		}
	}
	for _, r := range "`ÀçЖ" {
		if _, ok := gsmEncode(string(r)); ok {
			t.Errorf("%q is not in GSM 03.38", r)
		}
	}
}

func TestEscapePairNotSplit(t *testing.T) {
	text := strings.Repeat("a", 152) + "€" + strings.Repeat("b", 10)
	got, err := EncodeText(text)
	if err != nil {
		t.Fatal(err)
	}
	_, _, first, _ := SplitUDH(got.Parts[0])
	if len(first) != 152 {
		t.Fatalf("first part holds %d septets; the escape pair should have moved on", len(first))
	}
}

func TestConcatRefDiffers(t *testing.T) {
	a, _ := EncodeText(strings.Repeat("a", 200))
	b, _ := EncodeText(strings.Repeat("a", 200))
	ca, _, _, _ := SplitUDH(a.Parts[0])
	cb, _, _, _ := SplitUDH(b.Parts[0])
	if ca.Ref == cb.Ref {
		t.Fatal("two messages share a concatenation reference")
	}
}

func TestDecodeText(t *testing.T) {
	tests := []struct {
		coding byte
		in     []byte
		want   string
		isErr  bool
	}{
		{CodingDefault, []byte{0x00, 0x02, 0x11, 0x1B, 0x65, 0x1B, 0x1B}, "@$_€", false}, // a dangling escape reads as nothing
		{CodingIA5, []byte("@$_ abc"), "@$_ abc", false},
		{CodingLatin1, []byte{'a', 0xE9, 0xDF}, "aéß", false},
		{CodingUCS2, []byte{0x04, 0x16, 0xD8, 0x3D, 0xDE, 0x00}, "Ж😀", false},
		{CodingUCS2, []byte{0x04}, "", true},
		{0x04, []byte{1, 2}, "", true}, // binary is no text
	}
	for _, tt := range tests {
		got, err := DecodeText(tt.coding, tt.in)
		if (err != nil) != tt.isErr || got != tt.want {
			t.Errorf("0x%02x % x: %q %v, want %q", tt.coding, tt.in, got, err, tt.want)
		}
	}
}
