package migrations

import (
	"slices"

	"github.com/mnvhq/mnv/services/platform/idempotency"
	"github.com/mnvhq/mnv/services/platform/tenancy"
)

// Tables declares where each table of the schema lives when the database is distributed by
// client (docs/operations.md#past-one-postgresql). Parents come before the tables that point at
// them.
var Tables = tenancy.Schema{Name: "verification", Tables: slices.Concat([]tenancy.Table{
	{Name: "sessions", Class: tenancy.Tenant, Why: "a client's capture sessions, each the right to one verify"},
	{Name: "transactions", Class: tenancy.Tenant, Why: "a client's browser flows; the browser's transaction id reaches its client through client_lookups"},
	{Name: "verifications", Class: tenancy.Tenant, Why: "a client's verifications, each the record of a charge or a decision"},
	{Name: "stuck_plus_sessions", Class: tenancy.Tenant, Why: "a client's kept stuck-plus numbers, one per browser flow"},
	{Name: "stuck_plus_reveals", Class: tenancy.Tenant, Why: "a client's reveal audit and the charges of its reveals"},
	{Name: "camara_auth_requests", Class: tenancy.Tenant, Why: "a client's CAMARA authorization requests, each with its capture session"},
	{Name: "camara_tokens", Class: tenancy.Tenant, Why: "a client's CAMARA access tokens, each with its capture session"},
	{Name: "usage_days", Class: tenancy.Tenant, Why: "a client's verifications counted per day, status, operator and method: the usage route's closed days"},
	{Name: "workflow_policies", Class: tenancy.Tenant, Why: "a client's verification workflow policy"},
	{Name: "workflows", Class: tenancy.Tenant, Why: "a client's verification workflows, each one number through the policy's channels"},
	{Name: "workflow_steps", Class: tenancy.Tenant, Why: "the steps of a client's workflows, and the charges of its SMS steps"},
	{Name: "workflow_usage_days", Class: tenancy.Tenant, Why: "a client's workflow steps counted per day, channel, country and status: the workflow usage route's closed days"},
	{Name: "workflow_messages", Class: tenancy.Tenant, Why: "the SMSC's message ids of a client's SMS steps, which delivery receipts name"},
	{Name: "unsettled", Class: tenancy.Local, Why: "the settle queue: verifications whose charge is not settled yet, swept across clients by the reconciler"},
	{Name: "relay_queue", Class: tenancy.Local, Why: "the relay queue: what Connect must hear of every client's settles, drained across clients with SKIP LOCKED"},
	{Name: "outbox", Class: tenancy.Local, Why: "the outbox of versions before the relay queue: no longer written, moved to relay jobs across clients at start"},
	{Name: "client_lookups", Class: tenancy.Local, Why: "maps a capability that arrives alone (a browser's transaction id, an OAuth state, a CAMARA request id or token) to its client"},
	{Name: "usage_rollup", Class: tenancy.Local, Why: "the usage roll-up's watermark: one row, the day before which every client's days are rolled up"},
	{Name: "workflow_usage_rollup", Class: tenancy.Local, Why: "the workflow usage roll-up's watermark: one row, the day before which every client's days are rolled up"},
	{Name: "blocked_prefixes", Class: tenancy.Reference, Why: "the number prefixes no code is sent to by SMS, for every client: a block is global"},
	{Name: "camara_keys", Class: tenancy.Local, Why: "the CAMARA provider's keys: one global row read at start, which no tenant row points at or joins"},
}, idempotency.Tables(), tenancy.RiverTables())}
