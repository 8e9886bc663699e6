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
	{Name: "spend_days", Class: tenancy.Tenant, Why: "a client's ledger summed per day and kind: the spend route's closed days"},
	{Name: "spend_rollup", Class: tenancy.Local, Why: "the spend roll-up's watermark: one row, the day before which every client's days are rolled up"},
	{Name: "spend_marks", Class: tenancy.Local, Why: "the ledger's sequence as the spend roll-up read it over time, which bounds a client's tail after the watermark"},
	{Name: "client_lookups", Class: tenancy.Local, Why: "maps an API key sent without X-CLIENT-ID (its fingerprint) to its client, across clients"},
}, idempotency.Tables(), tenancy.RiverTables())}
