package tenancy

import "fmt"

// CitusStatements returns the statements that distribute the declared tables on a Citus
// coordinator whose schemas are migrated: reference tables copied to every node, then tenant
// tables hash-distributed by client_id, all in one colocation group so that a client's rows of
// every table share a node (a join or foreign key on client_id stays on it). Within a schema the
// declaration lists a table after the tables it points at (Check holds it to that), which is the
// order Citus needs. Coordinator-local tables need no statement: they stay plain tables on the
// coordinator.
func CitusStatements(schemas ...Schema) []string {
	var out []string
	for _, s := range schemas {
		for _, t := range s.Of(Reference) {
			out = append(out, fmt.Sprintf("SELECT create_reference_table('%s.%s');", s.Name, t.Name))
		}
	}
	first := ""
	for _, s := range schemas {
		for _, t := range s.Of(Tenant) {
			name := s.Name + "." + t.Name
			if first == "" {
				out = append(out, fmt.Sprintf("SELECT create_distributed_table('%s', '%s');", name, Column))
				first = name
				continue
			}
			out = append(out, fmt.Sprintf("SELECT create_distributed_table('%s', '%s', colocate_with => '%s');", name, Column, first))
		}
	}
	return out
}
