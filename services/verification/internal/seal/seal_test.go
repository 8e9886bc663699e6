package seal_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/verification/internal/seal"
)

// blobAD is the associated data the package documents; the tests use it to make ciphertexts
// that differ from a blob only in what they hold.
const blobAD = "mnv.verification.blob.v1"

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

func keySpec(id string, fill byte) string {
	return id + ":" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{fill}, 32))
}

func mustKeyring(t testing.TB, spec string) *crypto.Keyring {
	t.Helper()
	k, err := crypto.ParseKeyring(spec)
	if err != nil {
		t.Fatalf("ParseKeyring: %v", err)
	}
	return k
}

func claims() seal.Claims {
	issued := time.Date(2026, 3, 1, 12, 0, 0, 123_000_000, time.UTC)
	return seal.Claims{
		Number:     "+971501234567",
		ClientID:   "cli_0123456789",
		SessionID:  "0b8e7c1e-5d3f-4f1a-9f7e-2b1c3d4e5f60",
		OperatorID: "ae-etisalat",
		IssuedAt:   issued,
		ExpiresAt:  issued.Add(300 * time.Second),
	}
}

// norm is c as Open returns it: times in UTC at millisecond precision.
func norm(c seal.Claims) seal.Claims {
	c.IssuedAt = time.UnixMilli(c.IssuedAt.UnixMilli()).UTC()
	c.ExpiresAt = time.UnixMilli(c.ExpiresAt.UnixMilli()).UTC()
	return c
}

func equalClaims(a, b seal.Claims) bool {
	return a.Number == b.Number && a.ClientID == b.ClientID && a.SessionID == b.SessionID &&
		a.OperatorID == b.OperatorID && a.IssuedAt.Equal(b.IssuedAt) && a.ExpiresAt.Equal(b.ExpiresAt)
}

func mustSeal(t testing.TB, s *seal.Sealer, c seal.Claims) string {
	t.Helper()
	blob, err := s.Seal(c)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	return blob
}

// wantInvalid asserts that blob does not open, with exactly ErrInvalid and no claims.
func wantInvalid(t *testing.T, s *seal.Sealer, blob, what string) {
	t.Helper()
	c, err := s.Open(blob)
	if err != seal.ErrInvalid {
		t.Fatalf("%s: Open = %+v, %v; want ErrInvalid", what, c, err)
	}
	if c != (seal.Claims{}) {
		t.Fatalf("%s: Open returned claims with its error: %+v", what, c)
	}
}

func TestRoundTrip(t *testing.T) {
	s := seal.NewSealer(mustKeyring(t, keySpec("a", 1)))
	local := time.FixedZone("GST", 4*3600)
	long := strings.Repeat("x", seal.MaxFieldLen)

	tests := []struct {
		name string
		mod  func(*seal.Claims)
	}{
		{"typical", func(*seal.Claims) {}},
		{"sub-millisecond times are truncated", func(c *seal.Claims) {
			c.IssuedAt = c.IssuedAt.Add(999_999 * time.Nanosecond)
			c.ExpiresAt = c.ExpiresAt.Add(1)
		}},
		{"times in another zone come back in UTC", func(c *seal.Claims) {
			c.IssuedAt, c.ExpiresAt = c.IssuedAt.In(local), c.ExpiresAt.In(local)
		}},
		{"monotonic clock reading", func(c *seal.Claims) {
			now := time.Now()
			c.IssuedAt, c.ExpiresAt = now, now.Add(5*time.Minute)
		}},
		{"one millisecond of validity", func(c *seal.Claims) { c.ExpiresAt = c.IssuedAt.Add(time.Millisecond) }},
		{"shortest and longest E.164", func(c *seal.Claims) { c.Number = "+1234567" }},
		{"no network identity", func(c *seal.Claims) { c.Number, c.OperatorID = "", "" }},
		{"15 digits", func(c *seal.Claims) { c.Number = "+123456789012345" }},
		{"fields at their limit", func(c *seal.Claims) {
			c.ClientID, c.SessionID, c.OperatorID = long, long, long
		}},
		{"non-ASCII ids", func(c *seal.Claims) { c.OperatorID = "opérateur-é" }},
		{"ids with separators and binary-looking bytes", func(c *seal.Claims) {
			c.ClientID = "a|b\x00c"
			c.SessionID = "\x01"
		}},
		{"earliest and latest times", func(c *seal.Claims) {
			c.IssuedAt = time.UnixMilli(1)
			c.ExpiresAt = time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := claims()
			tt.mod(&c)
			blob := mustSeal(t, s, c)
			if len(blob) > seal.MaxLen {
				t.Fatalf("blob is %d characters, more than MaxLen", len(blob))
			}
			if strings.Trim(blob, alphabet) != "" {
				t.Fatalf("blob %q is not unpadded base64url", blob)
			}
			got, err := s.Open(blob)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if want := norm(c); got != want { // == also checks the UTC location
				t.Fatalf("Open = %+v, want %+v", got, want)
			}
			if c.Number != "" && strings.Contains(blob, base64.RawURLEncoding.EncodeToString([]byte(c.Number))) {
				t.Error("blob shows the number")
			}
			if other := mustSeal(t, s, c); other == blob {
				t.Error("two Seals of the same claims gave the same blob")
			}
		})
	}
}

func TestSealValidates(t *testing.T) {
	s := seal.NewSealer(mustKeyring(t, keySpec("a", 1)))
	tests := []struct {
		name string
		mod  func(*seal.Claims)
	}{
		{"zero claims", func(c *seal.Claims) { *c = seal.Claims{} }},
		{"number without plus", func(c *seal.Claims) { c.Number = "971501234567" }},
		{"number with spaces", func(c *seal.Claims) { c.Number = "+971 50 123 4567" }},
		{"number starting with 0", func(c *seal.Claims) { c.Number = "+0971501234567" }},
		{"number too short", func(c *seal.Claims) { c.Number = "+123456" }},
		{"number too long", func(c *seal.Claims) { c.Number = "+1234567890123456" }},
		{"empty client", func(c *seal.Claims) { c.ClientID = "" }},
		{"empty session", func(c *seal.Claims) { c.SessionID = "" }},
		{"client too long", func(c *seal.Claims) { c.ClientID = strings.Repeat("x", seal.MaxFieldLen+1) }},
		{"session too long", func(c *seal.Claims) { c.SessionID = strings.Repeat("x", seal.MaxFieldLen+1) }},
		{"operator too long", func(c *seal.Claims) { c.OperatorID = strings.Repeat("x", seal.MaxFieldLen+1) }},
		{"invalid UTF-8", func(c *seal.Claims) { c.OperatorID = "op\xff" }},
		{"zero IssuedAt", func(c *seal.Claims) { c.IssuedAt = time.Time{} }},
		{"zero ExpiresAt", func(c *seal.Claims) { c.ExpiresAt = time.Time{} }},
		{"IssuedAt at the epoch", func(c *seal.Claims) { c.IssuedAt = time.UnixMilli(0) }},
		{"IssuedAt before the epoch", func(c *seal.Claims) { c.IssuedAt = time.UnixMilli(-5) }},
		{"ExpiresAt equal to IssuedAt", func(c *seal.Claims) { c.ExpiresAt = c.IssuedAt }},
		{"ExpiresAt before IssuedAt", func(c *seal.Claims) { c.ExpiresAt = c.IssuedAt.Add(-time.Second) }},
		{"ExpiresAt after IssuedAt by less than a millisecond", func(c *seal.Claims) { c.ExpiresAt = c.IssuedAt.Add(999 * time.Microsecond) }},
		{"ExpiresAt after year 9999", func(c *seal.Claims) { c.ExpiresAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := claims()
			tt.mod(&c)
			blob, err := s.Seal(c)
			if err == nil {
				t.Fatalf("Seal(%+v) = %q, want an error", c, blob)
			}
			if blob != "" {
				t.Errorf("Seal returned %q with its error", blob)
			}
			if c.Number != "" && strings.Contains(err.Error(), c.Number) {
				t.Errorf("error %q quotes the number", err)
			}
		})
	}
}

func TestOpenOtherKeyring(t *testing.T) {
	blob := mustSeal(t, seal.NewSealer(mustKeyring(t, keySpec("a", 1))), claims())
	for _, spec := range []string{
		keySpec("b", 1),                         // same key, other id
		keySpec("a", 2),                         // same id, other key
		keySpec("b", 2) + "," + keySpec("c", 3), // neither
	} {
		wantInvalid(t, seal.NewSealer(mustKeyring(t, spec)), blob, spec[:1])
	}
}

func TestKeyRotation(t *testing.T) {
	oldSealer := seal.NewSealer(mustKeyring(t, keySpec("a", 1)))
	rotated := seal.NewSealer(mustKeyring(t, keySpec("b", 2)+","+keySpec("a", 1)))
	retired := seal.NewSealer(mustKeyring(t, keySpec("b", 2)))

	c := claims()
	oldBlob := mustSeal(t, oldSealer, c)
	if got, err := rotated.Open(oldBlob); err != nil || got != norm(c) {
		t.Fatalf("after rotation, old blob: Open = %+v, %v", got, err)
	}
	newBlob := mustSeal(t, rotated, c)
	if got, err := rotated.Open(newBlob); err != nil || got != norm(c) {
		t.Fatalf("after rotation, new blob: Open = %+v, %v", got, err)
	}
	if got, err := retired.Open(newBlob); err != nil || got != norm(c) {
		t.Fatalf("new blob after the old key is retired: Open = %+v, %v", got, err)
	}
	wantInvalid(t, oldSealer, newBlob, "new blob, keyring without the new key")
	wantInvalid(t, retired, oldBlob, "old blob, old key retired")
}

// TestTamperEveryCharacter changes each character of a blob to every other base64url character:
// no change may open, to different claims or the same.
func TestTamperEveryCharacter(t *testing.T) {
	s := seal.NewSealer(mustKeyring(t, keySpec("a", 1)))
	blob := mustSeal(t, s, claims())
	b := []byte(blob)
	tried := 0
	for i := range b {
		orig := b[i]
		for j := 0; j < len(alphabet); j++ {
			if alphabet[j] == orig {
				continue
			}
			b[i] = alphabet[j]
			if c, err := s.Open(string(b)); err != seal.ErrInvalid {
				t.Fatalf("blob changed at %d (%q→%q): Open = %+v, %v; want ErrInvalid", i, orig, alphabet[j], c, err)
			}
			tried++
		}
		b[i] = orig
	}
	if tried != len(blob)*63 {
		t.Fatalf("tried %d changes, want %d", tried, len(blob)*63)
	}
	if _, err := s.Open(string(b)); err != nil {
		t.Fatalf("restored blob: %v", err)
	}
}

func TestTruncationAndExtension(t *testing.T) {
	s := seal.NewSealer(mustKeyring(t, keySpec("a", 1)))
	blob := mustSeal(t, s, claims())
	for n := 0; n < len(blob); n++ {
		wantInvalid(t, s, blob[:n], "prefix")
		wantInvalid(t, s, blob[n+1:], "suffix")
	}
	for _, extra := range []string{"A", "AA", "AAA", "AAAA", "-_"} {
		wantInvalid(t, s, blob+extra, "extended by "+extra)
		wantInvalid(t, s, extra+blob, "prefixed by "+extra)
	}
	wantInvalid(t, s, blob+blob, "doubled")
}

// TestOnlyUnpaddedBase64URL pins the decision: a blob has one spelling. Standard base64, padding,
// whitespace and line breaks are refused, even around an otherwise good blob.
func TestOnlyUnpaddedBase64URL(t *testing.T) {
	s := seal.NewSealer(mustKeyring(t, keySpec("a", 1)))
	// A blob whose bytes use the two characters where the alphabets differ, and whose length
	// needs padding, so every variant below really differs from the blob.
	c := claims()
	c.OperatorID += "1" // 127 bytes: the encoding needs padding
	var blob string
	for i := 0; ; i++ {
		blob = mustSeal(t, s, c)
		if len(blob)%4 == 0 {
			t.Fatalf("blob of %d characters needs no padding; change the claims", len(blob))
		}
		if strings.Contains(blob, "-") && strings.Contains(blob, "_") {
			break
		}
		if i > 1000 {
			t.Fatal("no suitable blob in 1000 tries")
		}
	}
	raw, err := base64.RawURLEncoding.DecodeString(blob)
	if err != nil {
		t.Fatal(err)
	}
	variants := map[string]string{
		"standard padded":      base64.StdEncoding.EncodeToString(raw),
		"standard unpadded":    base64.RawStdEncoding.EncodeToString(raw),
		"URL padded":           base64.URLEncoding.EncodeToString(raw),
		"trailing newline":     blob + "\n",
		"CRLF inside":          blob[:10] + "\r\n" + blob[10:],
		"leading space":        " " + blob,
		"trailing space":       blob + " ",
		"tab inside":           blob[:5] + "\t" + blob[5:],
		"quoted":               `"` + blob + `"`,
		"percent-encoded dash": strings.Replace(blob, "-", "%2D", 1),
		"NUL at the end":       blob + "\x00",
		"non-ASCII":            blob[:3] + "é" + blob[3:],
	}
	for name, v := range variants {
		if v == blob {
			t.Fatalf("%s: variant equals the blob", name)
		}
		wantInvalid(t, s, v, name)
	}
	if _, err := s.Open(blob); err != nil {
		t.Fatalf("the blob itself: %v", err)
	}
}

// TestOtherAssociatedData seals a blob's own payload with the same keyring under other
// associated data: it must not open as a blob.
func TestOtherAssociatedData(t *testing.T) {
	k := mustKeyring(t, keySpec("a", 1))
	s := seal.NewSealer(k)
	blob := mustSeal(t, s, claims())
	raw, _ := base64.RawURLEncoding.DecodeString(blob)
	payload, err := k.Open(raw, []byte(blobAD))
	if err != nil {
		t.Fatalf("the blob does not open with the documented associated data: %v", err)
	}
	// Sanity: with the right associated data, the re-sealed payload opens.
	if got, err := s.Open(base64.RawURLEncoding.EncodeToString(k.Seal(payload, []byte(blobAD)))); err != nil || got != norm(claims()) {
		t.Fatalf("re-sealed payload: Open = %+v, %v", got, err)
	}
	for _, other := range [][]byte{nil, []byte(""), []byte("mnv.verification.blob.v2"), []byte("mnv.verification.blob.v1 "), []byte("cli_0123456789")} {
		ct := k.Seal(payload, other)
		wantInvalid(t, s, base64.RawURLEncoding.EncodeToString(ct), "associated data "+string(other))
	}
}

func TestOversize(t *testing.T) {
	s := seal.NewSealer(mustKeyring(t, keySpec("a", 1)))
	blob := mustSeal(t, s, claims())
	for _, n := range []int{seal.MaxLen + 1, seal.MaxLen + 4, 1 << 20} {
		huge := strings.Repeat("A", n)
		wantInvalid(t, s, huge, "all A")
		// A good blob padded with a well-formed tail is refused as well.
		wantInvalid(t, s, blob+huge[:n-len(blob)], "good blob plus tail")
	}
	// Refused before decoding: nothing is allocated, however long the input.
	huge := strings.Repeat("A", 1<<20)
	if allocs := testing.AllocsPerRun(10, func() { _, _ = s.Open(huge) }); allocs != 0 {
		t.Errorf("Open of 1 MiB allocated %v times, want 0", allocs)
	}
	if allocs := testing.AllocsPerRun(10, func() { _, _ = s.Open(huge[:seal.MaxLen]) }); allocs == 0 {
		t.Error("Open of MaxLen characters allocated nothing: the test does not see decoding")
	}
}

func TestOpenJunk(t *testing.T) {
	s := seal.NewSealer(mustKeyring(t, keySpec("a", 1)))
	for _, junk := range []string{"", "A", "AA", "AAAA", "AQ", "AQE", strings.Repeat("A", 200), "not a blob", "=", "===="} {
		wantInvalid(t, s, junk, junk)
	}
}

func TestNewSealerNil(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewSealer(nil) did not panic")
		}
	}()
	seal.NewSealer(nil)
}

func TestConcurrentUse(t *testing.T) {
	s := seal.NewSealer(mustKeyring(t, keySpec("a", 1)))
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				blob, err := s.Seal(claims())
				if err != nil {
					t.Error(err)
					return
				}
				if got, err := s.Open(blob); err != nil || got != norm(claims()) {
					t.Errorf("Open = %+v, %v", got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// FuzzOpen: Open never panics, fails only with ErrInvalid, and whatever it accepts seals and
// opens again to the same claims.
func FuzzOpen(f *testing.F) {
	k := mustKeyring(f, keySpec("b", 2)+","+keySpec("a", 1))
	s := seal.NewSealer(k)
	good := mustSeal(f, s, claims())
	old := mustSeal(f, seal.NewSealer(mustKeyring(f, keySpec("a", 1))), claims())
	raw, _ := base64.RawURLEncoding.DecodeString(good)
	for _, seed := range []string{
		good, old, good[:len(good)-1], good + "A", good[1:], "", "A", "AQ", "AQE",
		base64.StdEncoding.EncodeToString(raw),
		base64.RawURLEncoding.EncodeToString(k.Seal([]byte{1}, []byte(blobAD))),
		base64.RawURLEncoding.EncodeToString(k.Seal(nil, []byte(blobAD))),
		base64.RawURLEncoding.EncodeToString(k.Seal([]byte("payload"), nil)),
		strings.Repeat("A", seal.MaxLen), strings.Repeat("_", seal.MaxLen+1),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, blob string) {
		c, err := s.Open(blob)
		if err != nil {
			if !errors.Is(err, seal.ErrInvalid) || err != seal.ErrInvalid {
				t.Fatalf("Open error %v, want ErrInvalid", err)
			}
			if c != (seal.Claims{}) {
				t.Fatalf("claims with an error: %+v", c)
			}
			return
		}
		again, err := s.Seal(c)
		if err != nil {
			t.Fatalf("accepted claims %+v do not seal: %v", c, err)
		}
		c2, err := s.Open(again)
		if err != nil || !equalClaims(c, c2) || c != c2 {
			t.Fatalf("re-sealed claims: Open = %+v, %v; want %+v", c2, err, c)
		}
	})
}
