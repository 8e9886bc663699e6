package main

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"
)

var tableOf = regexp.MustCompile(`^SELECT create_(?:reference|distributed)_table\('([a-z_]+\.[a-z_]+)'`)

// TestSchemaCitus: the statements distribute every declared table but the coordinator-local
// ones, reference tables first (a tenant table's foreign key needs its reference distributed),
// every tenant table colocated with the first.
func TestSchemaCitus(t *testing.T) {
	var out bytes.Buffer
	if code := execute([]string{"schema", "citus"}, nil, &out, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if lines[0] != "SELECT create_reference_table('accounts.clients');" {
		t.Errorf("first statement %q, want accounts.clients as a reference table", lines[0])
	}
	want := map[string]bool{}
	for _, s := range schemas {
		for _, tb := range s.Tables {
			if tb.Class.String() != "coordinator-local" {
				want[s.Name+"."+tb.Name] = true
			}
		}
	}
	seenTenant := false
	for _, l := range lines {
		m := tableOf.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("not a statement that distributes a table: %s", l)
		}
		name := m[1]
		if !want[name] {
			t.Errorf("statement for %s, which is not a declared tenant or reference table: %s", name, l)
		}
		delete(want, name)
		switch {
		case strings.Contains(l, "create_distributed_table"):
			if seenTenant && !strings.Contains(l, "colocate_with => 'accounts.balances'") {
				t.Errorf("tenant table not colocated with the first: %s", l)
			}
			seenTenant = true
		case seenTenant:
			t.Errorf("reference table after a tenant table: %s", l)
		}
	}
	for name := range want {
		t.Errorf("no statement distributes %s", name)
	}
}

func TestSchemaTables(t *testing.T) {
	var out bytes.Buffer
	if code := execute([]string{"schema", "tables"}, nil, &out, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"accounts.ledger  ", "tenant", "coordinator-local", "verification.client_lookups"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("schema tables does not show %q:\n%s", want, out.String())
		}
	}
}
