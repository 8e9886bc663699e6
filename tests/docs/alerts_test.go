package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	// ruleName is an alerting rule in the Prometheus rules file.
	ruleName = regexp.MustCompile(`(?m)^\s*- alert: (\S+)\s*$`)
	// alertRow is a row of the runbook's alert table: its first cell.
	alertRow = regexp.MustCompile("(?m)^\\| `(Mnv[A-Za-z0-9]+)` \\|")
)

// TestEveryAlertIsExplained holds the runbook's alert table and the rules file to the same
// alerts: an on-call paged by an alert must find it in docs/operations.md.
func TestEveryAlertIsExplained(t *testing.T) {
	base := root(t)
	rules, err := os.ReadFile(filepath.Join(base, "deploy/observability/prometheus-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(base, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Alerts\n")
	if !ok {
		t.Fatal("docs/operations.md has no Alerts section")
	}
	section, _, _ = strings.Cut(section, "\n## ")

	defined := matches(ruleName, string(rules))
	explained := matches(alertRow, section)
	if len(defined) == 0 {
		t.Fatal("no alert found in prometheus-rules.yaml: has its layout changed?")
	}
	for _, a := range defined {
		if !slices.Contains(explained, a) {
			t.Errorf("alert %s has no row in docs/operations.md's Alerts table", a)
		}
	}
	for _, a := range explained {
		if !slices.Contains(defined, a) {
			t.Errorf("docs/operations.md explains %s, which prometheus-rules.yaml does not define", a)
		}
	}
}

func matches(re *regexp.Regexp, s string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}
