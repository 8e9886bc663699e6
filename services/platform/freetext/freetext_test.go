package freetext_test

import (
	"errors"
	"testing"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/freetext"
)

func TestCheck(t *testing.T) {
	name := freetext.Rule{Max: 5}
	reason := freetext.Rule{Min: 3, Max: 6, Newlines: true}
	tests := []struct {
		name string
		rule freetext.Rule
		v    string
		want string // the message, "" when v passes
	}{
		{"plain", name, "Ann", ""},
		{"max counted in characters, not bytes", name, "ééééé", ""},
		{"one character over", name, "éééééé", "label: must be at most 5 characters"},
		{"empty", name, "", "label: must not be blank"},
		{"white space only", name, " \t ", "label: must not be blank"},
		{"not UTF-8", name, "a\xffb", "label: must not be blank"},
		{"tab", name, "a\tb", "label: must not contain control characters"},
		{"NUL", name, "a\x00b", "label: must not contain control characters"},
		{"C1 control", name, "a\u0085b", "label: must not contain control characters"},
		{"line break in a name", name, "a\nb", "label: must not contain control characters"},
		{"zero-width joiner is not a control", name, "a\u200db", ""},
		{"line break in a reason", reason, "ab\ncd", ""},
		{"carriage return in a reason", reason, "ab\rcd", "label: must not contain control characters"},
		{"range: at the minimum", reason, "abc", ""},
		{"range: too short", reason, "ab", "label: must be 3 to 6 characters"},
		{"range: too long", reason, "abcdefg", "label: must be 3 to 6 characters"},
		{"range: blank", reason, "      ", "label: must be 3 to 6 characters"},
		{"range: not UTF-8", reason, "abc\xff", "label: must be 3 to 6 characters"},
		{"controls allowed", freetext.Rule{Min: 3, Max: 6, Controls: true}, "a\tb\x00c", ""},
		{"controls allowed, still bounded", freetext.Rule{Min: 3, Max: 6, Controls: true}, "\t", "label: must be 3 to 6 characters"},
		{"a minimum of one is a range too", freetext.Rule{Min: 1, Max: 5}, "", "label: must be 1 to 5 characters"},
		{"a minimum of one, over", freetext.Rule{Min: 1, Max: 5}, "abcdef", "label: must be 1 to 5 characters"},
		{"a minimum of one, a control", freetext.Rule{Min: 1, Max: 5}, "a\x7fb", "label: must not contain control characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.rule.Check("label", tt.v)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Check(%q) = %v, want nil", tt.v, err)
				}
				return
			}
			var f *fault.Error
			if !errors.As(err, &f) || f.Reason != fault.InvalidArgument || f.Field != "label" || f.Msg != tt.want {
				t.Fatalf("Check(%q) = %#v, want INVALID_ARGUMENT on label: %q", tt.v, err, tt.want)
			}
		})
	}
}
