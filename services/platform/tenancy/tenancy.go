// Package tenancy declares where each table of a schema lives when the database is spread over
// several nodes by client (Citus), and checks a migrated schema against the rule that makes that
// possible. The rule and the classes are docs/operations.md#past-one-postgresql; the same
// declaration drives the catalog test (Check), the hash-partitioned test mode (Partition) and the
// Citus script's statements (CitusStatements).
package tenancy

import (
	"fmt"
	"regexp"
	"strings"
)

// Class is where a table lives.
type Class int

const (
	// Tenant rows belong to one client and are distributed by client_id: every key and foreign
	// key includes client_id, and every statement names it.
	Tenant Class = iota + 1
	// Reference tables are small and copied to every node, so a tenant row may point at them.
	Reference
	// Local tables stay on the coordinator: global queues and lookups that cross clients.
	Local
)

func (c Class) String() string {
	switch c {
	case Tenant:
		return "tenant"
	case Reference:
		return "reference"
	case Local:
		return "coordinator-local"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// Table is one table's class and the one-line reason for it.
type Table struct {
	Name  string
	Class Class
	Why   string
}

// Schema is the declaration of every table a service's schema holds.
type Schema struct {
	Name   string
	Tables []Table
}

// Column is the distribution column of tenant tables.
const Column = "client_id"

// versionTable names the migration tools' bookkeeping (tern's <set>_version), which holds no
// client's data and is always coordinator-local.
var versionTable = regexp.MustCompile(`_version$`)

// RiverTables are River's (the job queue's) tables: a global queue, polled across clients.
func RiverTables() []Table {
	why := "River's job queue: global, polled across clients with SKIP LOCKED"
	var ts []Table
	for _, n := range []string{"river_job", "river_leader", "river_migration", "river_notification", "river_queue", "river_client", "river_client_queue"} {
		ts = append(ts, Table{Name: n, Class: Local, Why: why})
	}
	return ts
}

// class returns the declared class of a table, and whether it is declared. A table may be
// declared without existing (River's optional tables).
func (s Schema) class(name string) (Class, bool) {
	if versionTable.MatchString(name) {
		return Local, true
	}
	for _, t := range s.Tables {
		if t.Name == name {
			return t.Class, true
		}
	}
	return 0, false
}

// order is a table's place in the declaration.
func (s Schema) order(name string) int {
	for i, t := range s.Tables {
		if t.Name == name {
			return i
		}
	}
	return -1
}

// Validate reports declaration mistakes: a table declared twice, with no class or no reason.
func (s Schema) Validate() error {
	seen := map[string]bool{}
	var errs []string
	for _, t := range s.Tables {
		switch {
		case seen[t.Name]:
			errs = append(errs, t.Name+" is declared twice")
		case t.Class < Tenant || t.Class > Local:
			errs = append(errs, t.Name+" has no class")
		case strings.TrimSpace(t.Why) == "":
			errs = append(errs, t.Name+" has no reason")
		}
		seen[t.Name] = true
	}
	if len(errs) > 0 {
		return fmt.Errorf("schema %s: %s", s.Name, strings.Join(errs, "; "))
	}
	return nil
}

// Of returns the tables of one class, in declaration order.
func (s Schema) Of(c Class) []Table {
	var ts []Table
	for _, t := range s.Tables {
		if t.Class == c {
			ts = append(ts, t)
		}
	}
	return ts
}
