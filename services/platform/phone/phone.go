// Package phone parses, masks and hashes mobile numbers.
//
// Numbers enter the system as strict E.164 ("+971501234567") and are checked with
// github.com/nyaruka/phonenumbers, a port of Google's libphonenumber, rather than a pattern: a
// number must be one the library's metadata says is valid. Only this package's parsed form,
// [Number.E164], should be stored, compared, hashed or sealed.
//
// Only the parsing metadata is used. The library's carrier, geocoding and time-zone lookups load
// large data sets on first use and are slow; nothing here touches them.
package phone

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nyaruka/phonenumbers"
	"google.golang.org/protobuf/proto"

	"github.com/mnvhq/mnv/services/platform/crypto"
)

// Number is a valid mobile number, normalised.
type Number struct {
	// E164 is the normalised E.164 form, "+971501234567": the form to store, compare, hash and
	// seal.
	E164 string
	// CountryCode is the country calling code, 971.
	CountryCode int
	// National is the national significant number, "501234567": the digits after the country
	// code, without a national (trunk) prefix. It keeps a leading zero where the number has one
	// (Italian fixed lines).
	National string
	// Region is the phonenumbers region code, "AE": an ISO 3166-1 alpha-2 code, or "001" for
	// non-geographic numbering (+800, +882, …). It is "" when the library cannot tell.
	Region string
}

var (
	// ErrNotE164 is returned by [Parse] for input that is not written as E.164: a '+', then 7 to
	// 15 digits, the first of them not 0. Spaces, dashes, parentheses, dots and letters are
	// refused, not cleaned up.
	ErrNotE164 = errors.New("phone number is not in E.164 form")
	// ErrInvalid is returned by [Parse] for input written as E.164 that is not a valid number:
	// an unknown country code, or a length or prefix the numbering plan does not allow.
	ErrInvalid = errors.New("phone number is not valid")
)

// Parse reads a number in strict E.164 form and validates it against the numbering plans.
//
// The shape is checked first (^\+[1-9]\d{6,14}$), else [ErrNotE164]; then the number must parse
// and be valid according to phonenumbers, else [ErrInvalid]. The result holds the library's
// normalised E.164, which can differ from the input: a national trunk prefix written after the
// country code is dropped (+4407400123456 gives +447400123456).
//
// Errors are the bare sentinel values; they never quote the input.
func Parse(s string) (Number, error) {
	if !IsE164Shape(s) {
		return Number{}, ErrNotE164
	}
	if n, ok := parseAsWritten(s); ok {
		return n, nil
	}
	return parseLibrary(s)
}

// parseAsWritten reads s, which has the E.164 shape, as a country code and the national number
// written after it, and accepts it only when the library says that number is valid as written.
// It gives the same result as the library's Parse for such numbers at about a third of the
// cost: Parse is built for free text (punctuation, letters, extensions, trunk prefixes) and
// spends most of its time on regular expressions that E.164 input never needs. Anything it
// does not accept (a leading zero or trunk prefix after the country code, an invalid number)
// goes through parseLibrary, which normalises or refuses it; TestParseAsWrittenAgrees holds
// the two to the same answers.
func parseAsWritten(s string) (Number, bool) {
	digits := s[1:]
	// Country calling codes are a prefix code: at most one of the first 1–3 digits is one.
	for l := 1; l <= 3 && l < len(digits); l++ {
		cc, _ := strconv.Atoi(digits[:l])
		if phonenumbers.GetRegionCodeForCountryCode(cc) == phonenumbers.UNKNOWN_REGION {
			continue
		}
		national := digits[l:]
		if national[0] == '0' {
			return Number{}, false
		}
		nn, err := strconv.ParseUint(national, 10, 64)
		if err != nil {
			return Number{}, false
		}
		n := &phonenumbers.PhoneNumber{CountryCode: proto.Int32(int32(cc)), NationalNumber: proto.Uint64(nn)} //nolint:gosec // G109: cc has at most 3 digits
		if !phonenumbers.IsValidNumber(n) {
			return Number{}, false
		}
		region := phonenumbers.GetRegionCodeForNumber(n)
		if region == phonenumbers.UNKNOWN_REGION {
			region = ""
		}
		return Number{E164: s, CountryCode: cc, National: national, Region: region}, true
	}
	return Number{}, false
}

// parseLibrary is Parse by the library's own parser.
func parseLibrary(s string) (Number, error) {
	n, err := phonenumbers.Parse(s, "")
	if err != nil || !phonenumbers.IsValidNumber(n) {
		return Number{}, ErrInvalid
	}
	region := phonenumbers.GetRegionCodeForNumber(n)
	if region == phonenumbers.UNKNOWN_REGION {
		region = ""
	}
	return Number{
		E164:        phonenumbers.Format(n, phonenumbers.E164),
		CountryCode: int(n.GetCountryCode()),
		National:    phonenumbers.GetNationalSignificantNumber(n),
		Region:      region,
	}, nil
}

// IsE164Shape reports whether s matches ^\+[1-9]\d{6,14}$: the shape of E.164, without asking
// the library whether the number is valid.
func IsE164Shape(s string) bool {
	if len(s) < 1+7 || len(s) > 1+15 || s[0] != '+' || s[1] == '0' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Mask returns the form of a number that may be shown: the country code, then the first two
// digits of the national number, one '*' per hidden digit, and the last two digits. For
// +971501234567 (country code 971, national number 501234567) it is "+97150*****67".
//
// The country code and national number come from phonenumbers, so the input should be E.164
// (Mask is meant for stored, normalised numbers; a number the library parses but does not
// consider valid is still masked this way). Other rules:
//   - a national number of 4 digits or fewer keeps no leading digits: "+353**34";
//   - a national number of 1 or 2 digits is starred entirely;
//   - input that is not E.164 or that the library cannot parse is starred entirely except for a
//     leading '+' and its last two characters when those are digits ("+*********78"), one '*'
//     per character.
//
// At most 4 digits of the national number are ever shown, and never all of them.
func Mask(e164 string) string {
	if IsE164Shape(e164) {
		if n, err := phonenumbers.Parse(e164, ""); err == nil {
			nat := phonenumbers.GetNationalSignificantNumber(n)
			if nat != "" {
				return "+" + strconv.Itoa(int(n.GetCountryCode())) + maskNational(nat)
			}
		}
	}
	return maskOpaque(e164)
}

// Masked is [Mask] of the number, without parsing it again.
func (n Number) Masked() string {
	if n.National == "" {
		return maskOpaque(n.E164)
	}
	return "+" + strconv.Itoa(n.CountryCode) + maskNational(n.National)
}

// maskNational stars a national significant number (ASCII digits), keeping the first two and
// last two digits when it has more than 4, only the last two when it has 3 or 4, none below.
func maskNational(nat string) string {
	keepHead, keepTail := 2, 2
	switch {
	case len(nat) <= 2:
		keepHead, keepTail = 0, 0
	case len(nat) <= 4:
		keepHead = 0
	}
	return nat[:keepHead] + strings.Repeat("*", len(nat)-keepHead-keepTail) + nat[len(nat)-keepTail:]
}

// maskOpaque masks input that did not parse: a leading '+' is kept, every other character
// becomes '*' except the last two when both are ASCII digits and something precedes them.
func maskOpaque(s string) string {
	var b strings.Builder
	rest := s
	if strings.HasPrefix(rest, "+") {
		b.WriteByte('+')
		rest = rest[1:]
	}
	tail := ""
	if n := len(rest); n > 2 && isDigit(rest[n-1]) && isDigit(rest[n-2]) {
		tail, rest = rest[n-2:], rest[:n-2]
	}
	b.WriteString(strings.Repeat("*", utf8.RuneCountInString(rest)))
	b.WriteString(tail)
	return b.String()
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// minHashKeyLen is the shortest key [NewHasher] accepts: 32 bytes, the strength of
// HMAC-SHA-256.
const minHashKeyLen = 32

// hashDomain prefixes every hashed number, so these hashes cannot collide with other HMACs made
// with the same key, and a future scheme can change the prefix.
const hashDomain = "mnv.number.v1|"

// Hasher computes the keyed hash stored beside an encrypted number so that rows can be found
// by number (equality lookups, per-number rate limits) without decrypting. Without the key, a
// stolen hash cannot be checked against guessed numbers. Every service configured with the same
// key computes the same hash. A Hasher is safe for concurrent use.
type Hasher struct {
	f *crypto.Fingerprinter
}

// NewHasher returns a Hasher keyed with key, which must be at least 32 bytes. The key is copied.
func NewHasher(key []byte) (*Hasher, error) {
	if len(key) < minHashKeyLen {
		return nil, errors.New("phone: hash key must be at least 32 bytes")
	}
	f, err := crypto.NewFingerprinter(string(key))
	if err != nil {
		return nil, fmt.Errorf("phone: %w", err)
	}
	return &Hasher{f: f}, nil
}

// Sum returns HMAC-SHA-256(key, "mnv.number.v1|" + e164), 32 bytes.
//
// The input is hashed as given, not normalised: pass [Number.E164] from [Parse], since two
// spellings of one number hash differently.
func (h *Hasher) Sum(e164 string) []byte { return h.f.Sum(hashDomain + e164) }

// IsRegion reports whether code is a region of the numbering plans (an ISO 3166-1 alpha-2
// country the library has metadata for, "GB"), as Number.Region gives them.
func IsRegion(code string) bool {
	if len(code) != 2 {
		return false
	}
	return phonenumbers.GetSupportedRegions()[code]
}
