// Package shellenv writes variables as POSIX sh lines a reader can eval or paste: what mnvctl
// -o env and make run's banner print.
package shellenv

import (
	"fmt"
	"regexp"
	"strings"
)

// Var is one variable to set; an empty Value unsets it (so an old value does not linger).
type Var struct{ Name, Value string }

// Lines are the export (or unset) lines of vars, in order.
func Lines(vars ...Var) string {
	var b strings.Builder
	for _, v := range vars {
		if v.Value == "" {
			fmt.Fprintf(&b, "unset %s\n", v.Name)
			continue
		}
		fmt.Fprintf(&b, "export %s=%s\n", v.Name, Quote(v.Value))
	}
	return b.String()
}

// Quote quotes s for POSIX sh: in single quotes, each single quote inside written as a close
// quote, an escaped quote and an open quote. Values made only of safe characters stay bare, so
// the line reads as people expect.
func Quote(s string) string {
	if safe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var safe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)
