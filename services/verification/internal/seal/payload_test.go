package seal

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/crypto"
)

func testClaims() Claims {
	return Claims{
		Number:     "+971501234567",
		ClientID:   "cli_1",
		SessionID:  "ses_1",
		OperatorID: "op",
		IssuedAt:   time.UnixMilli(1_772_366_400_123).UTC(),
		ExpiresAt:  time.UnixMilli(1_772_366_700_123).UTC(),
	}
}

// TestPayloadLayout pins version 1 byte for byte: changing it breaks every blob in flight.
func TestPayloadLayout(t *testing.T) {
	want := "01" +
		"0d" + hex.EncodeToString([]byte("+971501234567")) +
		"05" + hex.EncodeToString([]byte("cli_1")) +
		"05" + hex.EncodeToString([]byte("ses_1")) +
		"02" + hex.EncodeToString([]byte("op")) +
		"0000019ca9450a7b" + // 1772366400123 ms
		"0000019ca9499e5b" //   1772366700123 ms
	got := hex.EncodeToString(encodePayload(testClaims()))
	if got != want {
		t.Fatalf("payload\n got %s\nwant %s", got, want)
	}
	c, ok := decodePayload(encodePayload(testClaims()))
	if !ok || c != testClaims() {
		t.Fatalf("decode = %+v, %v", c, ok)
	}
}

// TestOpenRefusesAuthenticPayloads seals bad payloads with the right key and associated data, as
// a buggy or future writer could: Open must still refuse them.
func TestOpenRefusesAuthenticPayloads(t *testing.T) {
	k, err := crypto.ParseKeyring("a:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	s := NewSealer(k)
	blobOf := func(p []byte) string { return b64.EncodeToString(k.Seal(p, []byte(ad))) }

	good := encodePayload(testClaims())
	if c, err := s.Open(blobOf(good)); err != nil || c != testClaims() {
		t.Fatalf("good payload: Open = %+v, %v", c, err)
	}

	with := func(mod func(*Claims)) []byte {
		c := testClaims()
		mod(&c)
		return encodePayload(c) // bypasses validate on purpose
	}
	version := func(v byte) []byte { p := bytes.Clone(good); p[0] = v; return p }
	tests := map[string][]byte{
		"empty payload":           {},
		"version 0":               version(0),
		"version 2":               version(2),
		"version 0xff":            version(0xff),
		"trailing byte":           append(bytes.Clone(good), 0),
		"JSON instead":            []byte(`{"number":"+971501234567"}`),
		"number not E.164":        with(func(c *Claims) { c.Number = "0501234567" }),
		"missing client":          with(func(c *Claims) { c.ClientID = "" }),
		"missing session":         with(func(c *Claims) { c.SessionID = "" }),
		"invalid UTF-8 id":        with(func(c *Claims) { c.SessionID = "\xc3" }),
		"issued at zero":          with(func(c *Claims) { c.IssuedAt = time.UnixMilli(0) }),
		"expires before issued":   with(func(c *Claims) { c.ExpiresAt = c.IssuedAt.Add(-time.Millisecond) }),
		"expires equal to issued": with(func(c *Claims) { c.ExpiresAt = c.IssuedAt }),
		"issued at in year 10000": with(func(c *Claims) { c.IssuedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }),
		"negative times":          with(func(c *Claims) { c.IssuedAt, c.ExpiresAt = time.UnixMilli(-2), time.UnixMilli(-1) }),
	}
	for n := 0; n < len(good); n++ {
		tests["truncated to "+strconv.Itoa(n)] = good[:n]
	}
	// A length byte that overruns the payload.
	over := bytes.Clone(good)
	over[1] = 0xff
	tests["length overruns"] = over
	for name, p := range tests {
		if c, err := s.Open(blobOf(p)); err != ErrInvalid || c != (Claims{}) {
			t.Errorf("%s: Open = %+v, %v; want ErrInvalid", name, c, err)
		}
	}
}

// FuzzDecodePayload reaches the payload decoder directly (through Open, GCM stops every mutated
// input first): it never panics, and every payload it accepts as valid is the one encoding of its
// claims.
func FuzzDecodePayload(f *testing.F) {
	f.Add(encodePayload(testClaims()))
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{1, 0, 0, 0, 0})
	f.Add(append([]byte{1, 0xff}, make([]byte, 20)...))
	f.Fuzz(func(t *testing.T, p []byte) {
		c, ok := decodePayload(p)
		if !ok {
			if c != (Claims{}) {
				t.Fatalf("claims with a refusal: %+v", c)
			}
			return
		}
		if validate(c) != nil {
			return
		}
		if again := encodePayload(c); !bytes.Equal(again, p) {
			t.Fatalf("payload %x re-encodes as %x", p, again)
		}
	})
}
