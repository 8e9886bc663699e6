package tenancy

import (
	"context"
	"fmt"
)

// Spread is how a store writes a batch that holds several clients' rows: a group commit of
// concurrent requests (docs/operations.md#past-one-postgresql, "Statements across clients").
type Spread int

const (
	// Together writes each step of the batch as one statement whose items carry their client,
	// joined to the tenant tables on (client_id, id): on one server, one plan and one execution
	// for the whole batch.
	Together Spread = iota
	// PerClient writes each step as one statement per client, each naming its client by a
	// parameter, all queued in one round trip: a database distributed by client_id (Citus)
	// routes each statement to the one node that holds the client's rows, where row locks and
	// data-modifying CTEs run as on one server.
	PerClient
)

// Spreads are every Spread, for the tests that run a batch each way.
var Spreads = []Spread{Together, PerClient}

func (s Spread) String() string {
	if s == PerClient {
		return "per-client"
	}
	return "together"
}

// SpreadOf is the Spread for a migrated schema: PerClient when the database distributes tables
// (the Citus extension is installed) or the schema's tenant tables are partitioned (the
// hash-partitioned test mode, PartitionsVar, which stands in for Citus in CI); Together
// otherwise.
func SpreadOf(ctx context.Context, db DB, s Schema) (Spread, error) {
	names := make([]string, 0, len(s.Tables))
	for _, t := range s.Of(Tenant) {
		names = append(names, t.Name)
	}
	var spread bool
	if err := queryRow(ctx, db, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')
		OR EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relname = ANY($2) AND c.relkind = 'p')`,
		[]any{s.Name, names}, &spread); err != nil {
		return Together, fmt.Errorf("spread of %s: %w", s.Name, err)
	}
	if spread {
		return PerClient, nil
	}
	return Together, nil
}
