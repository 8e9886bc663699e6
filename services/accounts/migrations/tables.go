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
	{Name: "people", Class: tenancy.Reference, Why: "a person of the console, who may belong to several clients; read with every session"},
	{Name: "passkeys", Class: tenancy.Reference, Why: "a person's passkeys, found by credential id at sign-in before any client is known"},
	{Name: "memberships", Class: tenancy.Tenant, Why: "a person's role in a client"},
	{Name: "invitations", Class: tenancy.Tenant, Why: "a client's invitations, found by (client, fingerprint)"},
	{Name: "console_sessions", Class: tenancy.Tenant, Why: "a person's sessions in a client, found by (client, fingerprint)"},
	{Name: "sso_providers", Class: tenancy.Tenant, Why: "a client's single sign-on provider"},
	{Name: "audit_events", Class: tenancy.Tenant, Why: "what a client's people did"},
	{Name: "webauthn_ceremonies", Class: tenancy.Local, Why: "a WebAuthn challenge between two calls, before any client is known; five minutes"},
	{Name: "spend_days", Class: tenancy.Tenant, Why: "a client's ledger summed per day and kind: the spend route's closed days"},
	{Name: "spend_rollup", Class: tenancy.Local, Why: "the spend roll-up's watermark: one row, the day before which every client's days are rolled up"},
	{Name: "spend_marks", Class: tenancy.Local, Why: "the ledger's sequence as the spend roll-up read it over time, which bounds a client's tail after the watermark"},
	{Name: "client_lookups", Class: tenancy.Local, Why: "maps an API key sent without X-CLIENT-ID (its fingerprint) to its client, across clients"},
}, idempotency.Tables(), tenancy.RiverTables())}
