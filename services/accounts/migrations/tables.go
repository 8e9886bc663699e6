package migrations

import (
	"slices"

	"github.com/mnvhq/mnv/services/platform/idempotency"
	"github.com/mnvhq/mnv/services/platform/tenancy"
)

// Tables declares where each table of the schema lives when the database is distributed by
// client (docs/operations.md#past-one-postgresql). Parents come before the tables that point at them.
var Tables = tenancy.Schema{Name: "accounts", Tables: slices.Concat([]tenancy.Table{
	{Name: "clients", Class: tenancy.Reference, Why: "one row per client, read with every authentication and pointed at by every tenant table"},
	{Name: "balances", Class: tenancy.Tenant, Why: "a client's balance row, locked by its debits"},
	{Name: "ledger", Class: tenancy.Tenant, Why: "a client's money entries, append-only"},
	{Name: "api_keys", Class: tenancy.Tenant, Why: "a client's API keys, found by (client, fingerprint)"},
	{Name: "sdk_tokens", Class: tenancy.Tenant, Why: "a client's SDK tokens, found by (client, fingerprint)"},
	{Name: "prices", Class: tenancy.Tenant, Why: "a client's price overrides (the defaults are configuration, not rows), read by its debits"},
	{Name: "web_origins", Class: tenancy.Tenant, Why: "a client's page origins"},
	{Name: "redirect_uris", Class: tenancy.Tenant, Why: "a client's registered redirect URIs"},
	{Name: "client_lookups", Class: tenancy.Local, Why: "maps an API key sent without X-CLIENT-ID (its fingerprint) to its client, across clients"},
}, idempotency.Tables(), tenancy.RiverTables())}
