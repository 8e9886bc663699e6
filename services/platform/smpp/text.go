package smpp

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unicode/utf16"
	"unicode/utf8"
)

// Data codings this package writes (SMPP 3.4 section 5.2.19).
const (
	// CodingDefault is the SMSC's default alphabet, GSM 03.38 here, one septet per octet (unpacked),
	// which is how SMSCs take it over SMPP.
	CodingDefault byte = 0x00
	// CodingIA5 is IA5 (ASCII); read, never written.
	CodingIA5 byte = 0x01
	// CodingLatin1 is ISO-8859-1; read, never written.
	CodingLatin1 byte = 0x03
	// CodingUCS2 is UCS-2 (UTF-16BE here, so characters beyond the BMP travel as surrogate pairs).
	CodingUCS2 byte = 0x08
)

// Segment sizes: one message, or each part of a concatenated one (its 6-octet UDH takes the
// rest), in GSM septets or UTF-16 code units.
const (
	gsmSingle  = 160
	gsmPart    = 153
	ucs2Single = 70
	ucs2Part   = 67
	// MaxParts is the most parts a concatenated message can have (the count is one octet).
	MaxParts = 255
)

var (
	ErrEmptyText   = errors.New("smpp: empty text")
	ErrTextTooLong = errors.New("smpp: text needs more than 255 parts")
)

// gsmEscape introduces a character of the extension table.
const gsmEscape = 0x1B

// gsmBasic is the GSM 03.38 default alphabet, indexed by septet; 0x1B is the escape.
var gsmBasic = [128]rune{
	'@', '£', '$', '¥', 'è', 'é', 'ù', 'ì', 'ò', 'Ç', '\n', 'Ø', 'ø', '\r', 'Å', 'å',
	'Δ', '_', 'Φ', 'Γ', 'Λ', 'Ω', 'Π', 'Ψ', 'Σ', 'Θ', 'Ξ', -1, 'Æ', 'æ', 'ß', 'É',
	' ', '!', '"', '#', '¤', '%', '&', '\'', '(', ')', '*', '+', ',', '-', '.', '/',
	'0', '1', '2', '3', '4', '5', '6', '7', '8', '9', ':', ';', '<', '=', '>', '?',
	'¡', 'A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'I', 'J', 'K', 'L', 'M', 'N', 'O',
	'P', 'Q', 'R', 'S', 'T', 'U', 'V', 'W', 'X', 'Y', 'Z', 'Ä', 'Ö', 'Ñ', 'Ü', '§',
	'¿', 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n', 'o',
	'p', 'q', 'r', 's', 't', 'u', 'v', 'w', 'x', 'y', 'z', 'ä', 'ö', 'ñ', 'ü', 'à',
}

// gsmExtension is the extension table: the septet after the escape, and its character.
var gsmExtension = map[byte]rune{
	0x0A: '\f', 0x14: '^', 0x28: '{', 0x29: '}', 0x2F: '\\', 0x3C: '[', 0x3D: '~', 0x3E: ']', 0x40: '|', 0x65: '€',
}

var (
	gsmFromRune    = map[rune]byte{}
	gsmExtFromRune = map[rune]byte{}
)

func init() {
	for i, r := range gsmBasic {
		if r >= 0 {
			gsmFromRune[r] = byte(i)
		}
	}
	for b, r := range gsmExtension {
		gsmExtFromRune[r] = b
	}
}

// gsmEncode returns text in GSM septets, one per octet, and false when a character is not in
// the default alphabet or its extension table.
func gsmEncode(text string) ([]byte, bool) {
	out := make([]byte, 0, len(text))
	for _, r := range text {
		if b, ok := gsmFromRune[r]; ok {
			out = append(out, b)
		} else if b, ok := gsmExtFromRune[r]; ok {
			out = append(out, gsmEscape, b)
		} else {
			return nil, false
		}
	}
	return out, true
}

// gsmDecode reads unpacked septets; an escape before a septet the extension table lacks reads
// as the basic character, as GSM 03.38 says a receiver should.
func gsmDecode(b []byte) string {
	out := make([]rune, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i] & 0x7F
		if c == gsmEscape {
			if i+1 < len(b) {
				i++
				next := b[i] & 0x7F
				if r, ok := gsmExtension[next]; ok {
					out = append(out, r)
				} else if next != gsmEscape {
					out = append(out, gsmBasic[next])
				}
			}
			continue
		}
		out = append(out, gsmBasic[c])
	}
	return string(out)
}

// DecodeText reads short_message octets (without a UDH) in the data_coding they came with.
func DecodeText(dataCoding byte, b []byte) (string, error) {
	switch dataCoding {
	case CodingDefault:
		return gsmDecode(b), nil
	case CodingIA5:
		rs := make([]rune, len(b))
		for i, c := range b {
			rs[i] = rune(c)
			if c > 0x7F {
				rs[i] = utf8.RuneError
			}
		}
		return string(rs), nil
	case CodingLatin1:
		rs := make([]rune, len(b))
		for i, c := range b {
			rs[i] = rune(c)
		}
		return string(rs), nil
	case CodingUCS2:
		if len(b)%2 != 0 {
			return "", fmt.Errorf("smpp: UCS-2 text of odd length %d", len(b))
		}
		u := make([]uint16, len(b)/2)
		for i := range u {
			u[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
		}
		return string(utf16.Decode(u)), nil
	}
	return "", fmt.Errorf("smpp: data_coding 0x%02X not supported", dataCoding)
}

// Text is a message's text made ready for submit_sm: its data_coding and the short_message of
// each part, each with its user data header when there is more than one.
type Text struct {
	DataCoding byte
	Parts      [][]byte
}

// Concatenated reports whether the parts carry a UDH (esm_class must then have ESMClassUDHI).
func (t Text) Concatenated() bool { return len(t.Parts) > 1 }

var concatRef atomic.Uint32

// EncodeText encodes text in the GSM default alphabet when every character is in it (extension
// characters take two septets), else in UCS-2, and splits it into concatenated parts with an
// 8-bit reference when one segment cannot hold it. Parts never split an escape pair or a
// surrogate pair.
func EncodeText(text string) (Text, error) {
	if text == "" {
		return Text{}, ErrEmptyText
	}
	ref := byte(concatRef.Add(1))
	if septets, ok := gsmEncode(text); ok {
		if len(septets) <= gsmSingle {
			return Text{DataCoding: CodingDefault, Parts: [][]byte{septets}}, nil
		}
		var chunks [][]byte
		for len(septets) > 0 {
			n := min(gsmPart, len(septets))
			// An escape is the first half of a pair: keep the pair together.
			if n < len(septets) && septets[n-1] == gsmEscape {
				n--
			}
			chunks = append(chunks, septets[:n])
			septets = septets[n:]
		}
		return concatenate(CodingDefault, chunks, ref)
	}
	units := utf16.Encode([]rune(text))
	if len(units) <= ucs2Single {
		return Text{DataCoding: CodingUCS2, Parts: [][]byte{ucs2Bytes(units)}}, nil
	}
	var chunks [][]byte
	for len(units) > 0 {
		n := min(ucs2Part, len(units))
		if n < len(units) && utf16.IsSurrogate(rune(units[n-1])) && units[n-1] < 0xDC00 {
			n-- // a high surrogate stays with its low one
		}
		chunks = append(chunks, ucs2Bytes(units[:n]))
		units = units[n:]
	}
	return concatenate(CodingUCS2, chunks, ref)
}

func ucs2Bytes(u []uint16) []byte {
	b := make([]byte, 2*len(u))
	for i, c := range u {
		b[2*i], b[2*i+1] = byte(c>>8), byte(c)
	}
	return b
}

// concatenate puts the concatenation UDH (IE 0x00, 8-bit reference, 3GPP TS 23.040 9.2.3.24.1)
// before each chunk.
func concatenate(coding byte, chunks [][]byte, ref byte) (Text, error) {
	if len(chunks) > MaxParts {
		return Text{}, ErrTextTooLong
	}
	parts := make([][]byte, len(chunks))
	for i, c := range chunks {
		parts[i] = append([]byte{0x05, 0x00, 0x03, ref, byte(len(chunks)), byte(i + 1)}, c...)
	}
	return Text{DataCoding: coding, Parts: parts}, nil
}

// Concat is what a part's concatenation header says.
type Concat struct {
	Ref   uint16
	Total int
	Seq   int
}

// SplitUDH separates a short_message sent with ESMClassUDHI into its user data header's
// concatenation information (ok false when it has none) and the text octets after the header.
func SplitUDH(sm []byte) (c Concat, ok bool, rest []byte, err error) {
	if len(sm) == 0 || int(sm[0])+1 > len(sm) {
		return Concat{}, false, nil, errors.New("smpp: user data header longer than the message")
	}
	udh, rest := sm[1:1+int(sm[0])], sm[1+int(sm[0]):]
	for len(udh) >= 2 {
		id, n := udh[0], int(udh[1])
		if 2+n > len(udh) {
			return Concat{}, false, nil, errors.New("smpp: malformed user data header")
		}
		v := udh[2 : 2+n]
		switch {
		case id == 0x00 && n == 3:
			c, ok = Concat{Ref: uint16(v[0]), Total: int(v[1]), Seq: int(v[2])}, true
		case id == 0x08 && n == 4:
			c, ok = Concat{Ref: uint16(v[0])<<8 | uint16(v[1]), Total: int(v[2]), Seq: int(v[3])}, true
		}
		udh = udh[2+n:]
	}
	return c, ok, rest, nil
}
