// Package freetext checks the free-text fields of requests (names, labels, metadata ids, reasons)
// by one rule in every service, so a name means the same in accounts, verification and connect.
package freetext

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mnvhq/mnv/services/platform/fault"
)

// Rule bounds a field, in characters (Unicode code points), never in bytes: a name in Arabic
// or Thai takes two or three bytes a character. A field is never blank (only white space).
type Rule struct {
	// Min is the fewest characters. A field with a minimum is told its bounds as a range ("must
	// be 10 to 500 characters"); one without (0: any but blank) is told "must not be blank" or
	// "must be at most 200 characters".
	Min int
	// Max is the most characters.
	Max int
	// Newlines lets line breaks through: a reason may run over several lines, a name may not.
	Newlines bool
	// Controls lets every control character through. Only for a field that is neither stored nor
	// shown to anybody.
	Controls bool
}

// Check returns nil or a fault.Invalid about field.
func (r Rule) Check(field, v string) error {
	n := utf8.RuneCountInString(v)
	switch {
	case r.Min > 0 && (!utf8.ValidString(v) || strings.TrimSpace(v) == "" || n < r.Min || n > r.Max):
		return fault.Invalid(field, "must be %d to %d characters", r.Min, r.Max)
	case !utf8.ValidString(v) || strings.TrimSpace(v) == "":
		return fault.Invalid(field, "must not be blank")
	case n > r.Max:
		return fault.Invalid(field, "must be at most %d characters", r.Max)
	case !r.Controls && strings.ContainsFunc(v, func(c rune) bool { return unicode.IsControl(c) && (c != '\n' || !r.Newlines) }):
		return fault.Invalid(field, "must not contain control characters")
	}
	return nil
}
