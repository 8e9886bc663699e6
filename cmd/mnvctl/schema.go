package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	accounts "github.com/mnvhq/mnv/services/accounts/migrations"
	connect "github.com/mnvhq/mnv/services/connect/migrations"
	"github.com/mnvhq/mnv/services/platform/tenancy"
	verification "github.com/mnvhq/mnv/services/verification/migrations"
)

// schemas are the declarations of every service's tables, in the order they are distributed
// (accounts first: its clients table is the reference the others' rows are about).
var schemas = []tenancy.Schema{accounts.Tables, verification.Tables, connect.Tables}

// newSchemaCommand is the schema group: where each table lives on a distributed database
// (docs/operations.md#past-one-postgresql). It needs no running service.
func newSchemaCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "Where each table lives when the database is distributed by client (no service needed)",
		Args:  noSubcommand,
		RunE:  missingSubcommand,
	}
	tables := &cobra.Command{
		Use:   "tables",
		Short: "List every table with its class (tenant, reference, coordinator-local) and why",
		Args:  exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "TABLE\tCLASS\tWHY")
			for _, s := range schemas {
				for _, t := range s.Tables {
					fmt.Fprintf(w, "%s.%s\t%s\t%s\n", s.Name, t.Name, t.Class, t.Why)
				}
			}
			return w.Flush()
		},
	}
	citus := &cobra.Command{
		Use:   "citus",
		Short: "Print the SQL that distributes the migrated tables on a Citus coordinator",
		Long: "Prints one statement per line: create_reference_table for reference tables, then\n" +
			"create_distributed_table by client_id for every tenant table, colocated. Run them once on the\n" +
			"coordinator after every service's migrate, e.g. mnvctl schema citus | psql \"$COORDINATOR_URL\".",
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, stmt := range tenancy.CitusStatements(schemas...) {
				fmt.Fprintln(cmd.OutOrStdout(), stmt)
			}
			return nil
		},
	}
	cmd.AddCommand(tables, citus)
	return cmd
}
