package idemkey

import (
	"regexp"
	"strings"
	"testing"
)

// TestPatternIsValid: the pattern the reference shows accepts exactly the keys the services
// take, byte by byte and at the length limits.
func TestPatternIsValid(t *testing.T) {
	re := regexp.MustCompile(Pattern)
	var keys []string
	for b := 0; b < 256; b++ {
		keys = append(keys, string([]byte{byte(b)}), "k"+string([]byte{byte(b)})+"k")
	}
	keys = append(keys, "", strings.Repeat("k", MaxLen), strings.Repeat("k", MaxLen+1), "has space", "ключ", `"quoted"`)
	for _, k := range keys {
		if re.MatchString(k) != Valid(k) {
			t.Errorf("%q: pattern says %v, Valid says %v", k, re.MatchString(k), Valid(k))
		}
	}
	for _, k := range []string{"k", "ios-token-1", "!~", strings.Repeat("k", MaxLen)} {
		if !Valid(k) {
			t.Errorf("%q refused", k)
		}
	}
	for _, k := range []string{"", "has space", " k", "k\t", "ключ", strings.Repeat("k", MaxLen+1)} {
		if Valid(k) {
			t.Errorf("%q accepted", k)
		}
	}
}
