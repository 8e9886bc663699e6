package phone_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nyaruka/phonenumbers"

	"github.com/mnvhq/mnv/services/platform/phone"
)

func TestParseValid(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want phone.Number
	}{
		{"AE mobile", "+971501234567", phone.Number{E164: "+971501234567", CountryCode: 971, National: "501234567", Region: "AE"}},
		{"GB mobile", "+447400123456", phone.Number{E164: "+447400123456", CountryCode: 44, National: "7400123456", Region: "GB"}},
		{"US", "+12025550123", phone.Number{E164: "+12025550123", CountryCode: 1, National: "2025550123", Region: "US"}},
		{"DE mobile", "+4915123456789", phone.Number{E164: "+4915123456789", CountryCode: 49, National: "15123456789", Region: "DE"}},
		{"IN mobile", "+919876543210", phone.Number{E164: "+919876543210", CountryCode: 91, National: "9876543210", Region: "IN"}},
		{"FR mobile", "+33612345678", phone.Number{E164: "+33612345678", CountryCode: 33, National: "612345678", Region: "FR"}},
		{"IT keeps its leading zero", "+390612345678", phone.Number{E164: "+390612345678", CountryCode: 39, National: "0612345678", Region: "IT"}},
		{"non-geographic +800", "+80012345678", phone.Number{E164: "+80012345678", CountryCode: 800, National: "12345678", Region: "001"}},

		// Normalisation: a trunk prefix written after the country code is dropped.
		{"GB with trunk 0 after the country code", "+4407400123456", phone.Number{E164: "+447400123456", CountryCode: 44, National: "7400123456", Region: "GB"}},
		{"AE with trunk 0 after the country code", "+9710501234567", phone.Number{E164: "+971501234567", CountryCode: 971, National: "501234567", Region: "AE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := phone.Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("Parse(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			// The normalised form is a fixed point.
			again, err := phone.Parse(got.E164)
			if err != nil || again != got {
				t.Errorf("Parse(%q) = %+v, %v; want %+v", got.E164, again, err, got)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"empty", "", phone.ErrNotE164},
		{"only plus", "+", phone.ErrNotE164},
		{"missing plus", "971501234567", phone.ErrNotE164},
		{"00 instead of plus", "00971501234567", phone.ErrNotE164},
		{"double plus", "++971501234567", phone.ErrNotE164},
		{"spaces", "+971 50 123 4567", phone.ErrNotE164},
		{"dashes", "+971-50-123-4567", phone.ErrNotE164},
		{"parentheses", "+1(202)5550123", phone.ErrNotE164},
		{"dots", "+971.50.123.4567", phone.ErrNotE164},
		{"leading space", " +971501234567", phone.ErrNotE164},
		{"trailing newline", "+971501234567\n", phone.ErrNotE164},
		{"letter", "+97150123456a", phone.ErrNotE164},
		{"vanity letters", "+1800FLOWERS", phone.ErrNotE164},
		{"extension", "+12025550123;ext=1", phone.ErrNotE164},
		{"full-width digits", "+９７１５０１２３４５６７", phone.ErrNotE164},
		{"Arabic-Indic digits", "+٩٧١٥٠١٢٣٤٥٦٧", phone.ErrNotE164},
		{"country code 0", "+0971501234567", phone.ErrNotE164},
		{"6 digits: too short", "+123456", phone.ErrNotE164},
		{"16 digits: too long", "+1234567890123456", phone.ErrNotE164},

		// E.164 in shape, but not a valid number (each checked against the library below).
		{"unassigned country code 999", "+99912345678", phone.ErrInvalid},
		{"GB too short", "+44740012", phone.ErrInvalid},
		{"GB one digit short", "+4474001234", phone.ErrInvalid},
		{"AE too short", "+97150123", phone.ErrInvalid},
		{"NANP area code of another length", "+1242359123", phone.ErrInvalid},
		{"15 digits, too long for GB", "+447400123456789", phone.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := phone.Parse(tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Parse(%q) = %+v, %v; want %v", tt.in, got, err, tt.want)
			}
			if got != (phone.Number{}) {
				t.Errorf("Parse(%q) returned %+v with its error", tt.in, got)
			}
			if len(tt.in) > 3 && strings.Contains(err.Error(), tt.in[1:]) {
				t.Errorf("error %q quotes the input", err)
			}
			if tt.want == phone.ErrInvalid {
				// The shape is fine: the library itself must be what refuses it.
				if n, perr := phonenumbers.Parse(tt.in, ""); perr == nil && phonenumbers.IsValidNumber(n) {
					t.Errorf("phonenumbers says %q is valid; the test case is wrong", tt.in)
				}
			}
		})
	}
}

func TestMask(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"documented example (AE)", "+971501234567", "+97150*****67"},
		{"GB", "+447400123456", "+4474******56"},
		{"US", "+12025550123", "+120******23"},
		{"DE", "+4915123456789", "+4915*******89"},
		{"IN", "+919876543210", "+9198******10"},
		{"IT leading zero", "+390612345678", "+3906******78"},
		{"non-normalised input is masked normalised", "+4407400123456", "+4474******56"},

		// Parses but is not valid: still masked around the country code.
		{"5-digit national", "+97150123", "+97150*23"},
		{"4-digit national", "+3531234", "+353**34"},
		{"4-digit national, no region", "+2901234", "+290**34"},

		// Does not parse: everything but a leading '+' and the last two digits.
		{"unknown country code", "+99912345678", "+*********78"},
		{"missing plus", "971501234567", "**********67"},
		{"spaces", "+971 50 123 4567", "+*************67"},
		{"letters", "+1800FLOWERS", "+***********"},
		{"trailing letter", "+97150123456x", "+************"},
		{"multi-byte runes", "+٩٧١٥٠", "+*****"},
		{"three characters", "+123", "+*23"},
		{"two digits", "+12", "+**"},
		{"two digits, no plus", "12", "**"},
		{"one digit", "7", "*"},
		{"only plus", "+", "+"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := phone.Mask(tt.in)
			if got != tt.want {
				t.Fatalf("Mask(%q) = %q, want %q", tt.in, got, tt.want)
			}
			checkMaskInvariants(t, tt.in, got)
			// A parsed number masks itself the same way, without parsing again.
			if n, err := phone.Parse(tt.in); err == nil && n.Masked() != got {
				t.Fatalf("Parse(%q).Masked() = %q, want %q", tt.in, n.Masked(), got)
			}
		})
	}
}

// TestMaskProperties masks many generated numbers, valid or not, and checks the invariants.
func TestMaskProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 5_000; i++ {
		n := 1 + r.IntN(18) // 1..18 digits: below, within and above E.164 lengths
		var b strings.Builder
		if r.IntN(10) > 0 {
			b.WriteByte('+')
		}
		for j := 0; j < n; j++ {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
		in := b.String()
		checkMaskInvariants(t, in, phone.Mask(in))
	}
}

// checkMaskInvariants asserts that a mask shows at most 4 national digits and never all of them,
// and, for a number the library parses, that it is the country code followed by one character
// per national digit.
func checkMaskInvariants(t *testing.T, in, got string) {
	t.Helper()
	digits := func(s string) int {
		c := 0
		for _, r := range s {
			if r >= '0' && r <= '9' {
				c++
			}
		}
		return c
	}
	if n, err := phonenumbers.Parse(in, ""); err == nil && isE164Shape(in) {
		cc := "+" + strconv.Itoa(int(n.GetCountryCode()))
		nat := phonenumbers.GetNationalSignificantNumber(n)
		rest, ok := strings.CutPrefix(got, cc)
		if !ok {
			t.Fatalf("Mask(%q) = %q does not start with the country code %s", in, got, cc)
		}
		if len(rest) != len(nat) {
			t.Errorf("Mask(%q) = %q: %d national characters, want %d", in, got, len(rest), len(nat))
		}
		if c := digits(rest); c > 4 || c >= len(nat) {
			t.Errorf("Mask(%q) = %q shows %d of %d national digits", in, got, c, len(nat))
		}
		if strings.Trim(rest, "*0123456789") != "" {
			t.Errorf("Mask(%q) = %q has unexpected characters", in, got)
		}
		return
	}
	if c := digits(got); c > 2 {
		t.Errorf("Mask(%q) = %q shows %d digits of an unparsable input", in, got, c)
	}
	if got != "" && got == in && digits(in) > 0 {
		t.Errorf("Mask(%q) returned its input", in)
	}
}

func isE164Shape(s string) bool {
	if len(s) < 8 || len(s) > 16 || s[0] != '+' || s[1] == '0' {
		return false
	}
	return strings.Trim(s[1:], "0123456789") == ""
}

func TestNewHasherKeyLength(t *testing.T) {
	tests := []struct {
		name    string
		key     []byte
		wantErr bool
	}{
		{"nil", nil, true},
		{"empty", []byte{}, true},
		{"31 bytes", bytes.Repeat([]byte{1}, 31), true},
		{"32 bytes", bytes.Repeat([]byte{1}, 32), false},
		{"64 bytes", bytes.Repeat([]byte{1}, 64), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := phone.NewHasher(tt.key)
			if (err != nil) != tt.wantErr {
				t.Fatalf("NewHasher(%d bytes) error = %v, wantErr %v", len(tt.key), err, tt.wantErr)
			}
			if tt.wantErr != (h == nil) {
				t.Fatalf("NewHasher(%d bytes) = %v, %v", len(tt.key), h, err)
			}
		})
	}
}

func mustHasher(t *testing.T, key string) *phone.Hasher {
	t.Helper()
	h, err := phone.NewHasher([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestHasher(t *testing.T) {
	const keyA = "0123456789abcdef0123456789abcdef"
	const keyB = "0123456789abcdef0123456789abcdeF"
	const number = "+971501234567"
	ha, ha2, hb := mustHasher(t, keyA), mustHasher(t, keyA), mustHasher(t, keyB)

	sum := ha.Sum(number)
	t.Run("known answer", func(t *testing.T) {
		// printf 'mnv.number.v1|+971501234567' |
		//   openssl dgst -sha256 -mac HMAC -macopt key:0123456789abcdef0123456789abcdef
		const want = "f4bd2acc3c745db5f630d8ff29c81979154603d2b8d0a29e93f8b2f8d8de1850"
		if got := hex.EncodeToString(sum); got != want {
			t.Errorf("Sum = %s, want %s", got, want)
		}
	})
	t.Run("deterministic", func(t *testing.T) {
		if !bytes.Equal(ha.Sum(number), sum) {
			t.Error("two Sums of one number differ")
		}
		if !bytes.Equal(ha2.Sum(number), sum) {
			t.Error("two Hashers with one key disagree")
		}
	})
	t.Run("differs by key", func(t *testing.T) {
		if bytes.Equal(hb.Sum(number), sum) {
			t.Error("different keys gave the same Sum")
		}
	})
	t.Run("differs by number", func(t *testing.T) {
		for _, other := range []string{"+971501234568", "+97150123456", "971501234567", ""} {
			if bytes.Equal(ha.Sum(other), sum) {
				t.Errorf("Sum(%q) equals Sum(%q)", other, number)
			}
		}
	})
	t.Run("key is copied", func(t *testing.T) {
		key := []byte(keyA)
		h := mustHasher(t, string(key))
		h2, err := phone.NewHasher(key)
		if err != nil {
			t.Fatal(err)
		}
		key[0] ^= 0xff
		if !bytes.Equal(h2.Sum(number), h.Sum(number)) {
			t.Error("changing the caller's key slice changed the Hasher")
		}
	})
	t.Run("concurrent use", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 100; j++ {
					if !bytes.Equal(ha.Sum(number), sum) {
						t.Error("concurrent Sum differs")
						return
					}
				}
			}()
		}
		wg.Wait()
	})
}

func ExampleParse() {
	n, err := phone.Parse("+4407400123456")
	fmt.Println(n.E164, n.CountryCode, n.National, n.Region, err)
	_, err = phone.Parse("+44 7400 123456")
	fmt.Println(err)
	// Output:
	// +447400123456 44 7400123456 GB <nil>
	// phone number is not in E.164 form
}

func ExampleMask() {
	fmt.Println(phone.Mask("+971501234567"))
	// Output: +97150*****67
}

func TestIsRegion(t *testing.T) {
	for code, want := range map[string]bool{"GB": true, "AE": true, "US": true, "gb": false, "ZZ": false, "001": false, "": false, "G": false} {
		if got := phone.IsRegion(code); got != want {
			t.Errorf("IsRegion(%q) = %v, want %v", code, got, want)
		}
	}
}
