package migrations

import (
	"slices"

	"github.com/mnvhq/mnv/services/platform/idempotency"
	"github.com/mnvhq/mnv/services/platform/tenancy"
)

// Tables declares where each table of the schema lives when the database is distributed by
// client (docs/operations.md#past-one-postgresql). Parents come before the tables that point at
// them.
var Tables = tenancy.Schema{Name: "connect", Tables: slices.Concat([]tenancy.Table{
	{Name: "profiles", Class: tenancy.Tenant, Why: "a client's identity profiles"},
	{Name: "client_stats", Class: tenancy.Tenant, Why: "a client's profile counts, kept by the statements that change its profiles"},
	{Name: "erasures", Class: tenancy.Tenant, Why: "a client's erased profiles, recorded without their data"},
	{Name: "verified_numbers", Class: tenancy.Tenant, Why: "a client's latest verification of each number, matched against its profiles"},
	{Name: "enrichments", Class: tenancy.Tenant, Why: "a client's charged enrichments, recorded before they are charged"},
	{Name: "import_jobs", Class: tenancy.Tenant, Why: "a client's CSV imports"},
	{Name: "import_chunks", Class: tenancy.Tenant, Why: "the uploaded file of a client's import job"},
	{Name: "integrations", Class: tenancy.Tenant, Why: "a client's CRM integrations"},
	{Name: "deliveries", Class: tenancy.Tenant, Why: "batches of a client's profiles queued for one of its integrations"},
	{Name: "sync_events", Class: tenancy.Tenant, Why: "the attempts of a client's integration deliveries"},
	{Name: "webhook_endpoints", Class: tenancy.Tenant, Why: "a client's event webhook endpoints"},
	{Name: "webhook_secrets", Class: tenancy.Tenant, Why: "the signing secrets of a client's webhook endpoints"},
	{Name: "events", Class: tenancy.Tenant, Why: "events accepted for delivery to a client's endpoints"},
	{Name: "webhook_deliveries", Class: tenancy.Tenant, Why: "one event of a client to one of its endpoints"},
	{Name: "webhook_attempts", Class: tenancy.Tenant, Why: "the attempts of a client's webhook deliveries"},
}, idempotency.Tables(), tenancy.RiverTables())}
