package migrations_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/connect/migrations"
	"github.com/mnvhq/mnv/services/platform/idempotency"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
)

// TestUpgradeMatchesFresh: a database created by any shipped version of the migrations
// (testdata/history/<commit>) and migrated to these has the schema of a fresh one.
func TestUpgradeMatchesFresh(t *testing.T) {
	pgtest.CheckUpgrades(t, "connect", migrations.FS, os.DirFS("testdata/history"), idempotency.Migrations())
}

// TestTablesFollowTheTenancyRule migrates a fresh database as the app does (connect's
// migrations, the idempotency table, River's tables) and holds its catalog to the declaration:
// every table declared, every tenant table keyed and pointed at by client_id, no trigger.
func TestTablesFollowTheTenancyRule(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pg.Open(ctx, pgtest.NewDatabase(t), pg.PoolConfig{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pg.Migrate(ctx, pool, "connect", migrations.FS, idempotency.Migrations()); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Migrate(ctx, pool, "connect"); err != nil {
		t.Fatal(err)
	}
	pgtest.CheckTenancy(t, pool, migrations.Tables)
}

// TestUpgradeKeepsRows fills a database of the schema shipped at 26466c0, with River's tables
// and jobs queued by that version, migrates it to these migrations, and finds every row kept:
// client_id filled in from the parent where the table had none, each job's args naming the
// client of the rows it works on, the counts of the overview as they were.
func TestUpgradeKeepsRows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pg.Open(ctx, pgtest.NewDatabase(t), pg.PoolConfig{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pg.Migrate(ctx, pool, "connect", os.DirFS("testdata/history/26466c0"), idempotency.Migrations()); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Migrate(ctx, pool, "connect"); err != nil {
		t.Fatal(err)
	}
	client, other := uuid.NewString(), uuid.NewString()
	ids := map[string]string{}
	for _, name := range []string{"profile", "job", "integration", "delivery", "sync", "endpoint", "secret", "webhook_delivery", "enrichment", "gone"} {
		ids[name] = uuid.NewString()
	}
	event := "evt_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO connect.profiles (id, client_id, number_sealed, number_hash, number_masked, country_code, source, matched_at)
			VALUES ($1, $2, '\x01', '\x02', '+97150*****67', 'AE', 'API', now())`, []any{ids["profile"], client}},
		{`INSERT INTO connect.verified_numbers (client_id, number_hash, verification_id, verified_at) VALUES ($1, '\x02', gen_random_uuid(), now())`, []any{client}},
		{`INSERT INTO connect.erasures (profile_id, client_id) VALUES (gen_random_uuid(), $1)`, []any{client}},
		{`INSERT INTO connect.enrichments (id, client_id, profile_id, status) VALUES ($1, $2, $3, 'PENDING')`, []any{ids["enrichment"], client, ids["profile"]}},
		{`INSERT INTO connect.import_jobs (id, client_id, file_name, size_bytes, status) VALUES ($1, $2, 'f.csv', 2, 'QUEUED')`, []any{ids["job"], client}},
		{`INSERT INTO connect.import_chunks (job_id, seq, data) VALUES ($1, 0, '\x0102'), ($1, 1, '\x03')`, []any{ids["job"]}},
		{`INSERT INTO connect.integrations (id, client_id, display_name, integration_type, endpoint_url, http_method,
			signing_secret_sealed, trigger_event, field_mappings, batch_size, matched_only, status)
			VALUES ($1, $2, 'crm', 'WEBHOOK', 'https://crm.example.com/', 'POST', '\x01', 'MANUAL', '{}', 10, false, 'ACTIVE')`, []any{ids["integration"], client}},
		{`INSERT INTO connect.deliveries (id, integration_id, client_id, trigger, profile_ids, status, next_attempt_at)
			VALUES ($1, $2, $3, 'MANUAL', ARRAY[$4::uuid], 'PENDING', 'infinity')`, []any{ids["delivery"], ids["integration"], client, ids["profile"]}},
		{`INSERT INTO connect.sync_events (id, integration_id, client_id, delivery_id, trigger, status, record_count, attempt,
			duration_ms, started_at, finished_at) VALUES ($1, $2, $3, $4, 'MANUAL', 'RETRYING', 1, 1, 5, now(), now())`,
			[]any{ids["sync"], ids["integration"], client, ids["delivery"]}},
		{`INSERT INTO connect.webhook_endpoints (id, client_id, url) VALUES ($1, $2, 'https://hooks.example.com/')`, []any{ids["endpoint"], client}},
		{`INSERT INTO connect.webhook_secrets (id, endpoint_id, sealed) VALUES ($1, $2, '\x01')`, []any{ids["secret"], ids["endpoint"]}},
		{`INSERT INTO connect.events (id, client_id, type, data, body, created_at) VALUES ($1, $2, 'profile.created', '{}', '{}', now())`, []any{event, client}},
		{`INSERT INTO connect.webhook_deliveries (id, client_id, endpoint_id, event_id, status) VALUES ($1, $2, $3, $4, 'PENDING')`,
			[]any{ids["webhook_delivery"], client, ids["endpoint"], event}},
		{`INSERT INTO connect.webhook_attempts (delivery_id, attempt, http_status, duration_ms, started_at) VALUES ($1, 1, 500, 5, now())`,
			[]any{ids["webhook_delivery"]}},
		// Jobs of that version: a webhook delivery's without client_id (as versions before
		// MNV_WEBHOOK_PER_CLIENT queued them), one whose delivery is gone, a CRM batch's with it.
		{`INSERT INTO connect.river_job (kind, queue, args) VALUES
			('webhook.deliver', 'webhooks', jsonb_build_object('delivery_id', $1::text, 'endpoint_id', $2::text)),
			('webhook.deliver', 'webhooks', jsonb_build_object('delivery_id', $3::text, 'endpoint_id', $2::text)),
			('connect.delivery', 'deliveries', jsonb_build_object('delivery_id', $4::text, 'integration_id', $5::text, 'client_id', $6::text))`,
			[]any{ids["webhook_delivery"], ids["endpoint"], ids["gone"], ids["delivery"], ids["integration"], client}},
		// Another client's endpoint, so that client_id is taken from each row's own parent.
		{`INSERT INTO connect.webhook_endpoints (id, client_id, url) VALUES (gen_random_uuid(), $1, 'https://hooks.example.com/')`, []any{other}},
	} {
		if _, err := pool.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	if err := pg.Migrate(ctx, pool, "connect", migrations.FS, idempotency.Migrations()); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		what string
		sql  string
		args []any
		want int
	}{
		{"chunks", `SELECT count(*) FROM connect.import_chunks WHERE client_id = $1 AND job_id = $2`, []any{client, ids["job"]}, 2},
		{"secrets", `SELECT count(*) FROM connect.webhook_secrets WHERE client_id = $1 AND endpoint_id = $2`, []any{client, ids["endpoint"]}, 1},
		{"attempts", `SELECT count(*) FROM connect.webhook_attempts WHERE client_id = $1 AND delivery_id = $2`, []any{client, ids["webhook_delivery"]}, 1},
		{"jobs", `SELECT count(*) FROM connect.river_job WHERE args->>'client_id' = $1 AND args->>'delivery_id' IN ($2, $3)`,
			[]any{client, ids["webhook_delivery"], ids["delivery"]}, 2},
	} {
		var n int
		if err := pool.QueryRow(ctx, c.sql, c.args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if n != c.want {
			t.Errorf("%d %s of the client after the upgrade, want %d", n, c.what, c.want)
		}
	}
	var gone bool
	if err := pool.QueryRow(ctx, `SELECT NOT args ? 'client_id' FROM connect.river_job WHERE args->>'delivery_id' = $1`, ids["gone"]).Scan(&gone); err != nil || !gone {
		t.Errorf("the job of a delivery gone: left without a client %v, %v", gone, err)
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM connect.profiles WHERE client_id = $1 AND id = $2)
			+ (SELECT count(*) FROM connect.erasures WHERE client_id = $1)
			+ (SELECT count(*) FROM connect.verified_numbers WHERE client_id = $1)
			+ (SELECT count(*) FROM connect.enrichments WHERE client_id = $1)
			+ (SELECT count(*) FROM connect.import_jobs WHERE client_id = $1)
			+ (SELECT count(*) FROM connect.integrations WHERE client_id = $1)
			+ (SELECT count(*) FROM connect.deliveries WHERE client_id = $1)
			+ (SELECT count(*) FROM connect.sync_events WHERE client_id = $1)
			+ (SELECT count(*) FROM connect.webhook_endpoints WHERE client_id = $1)
			+ (SELECT count(*) FROM connect.events WHERE client_id = $1)
			+ (SELECT count(*) FROM connect.webhook_deliveries WHERE client_id = $1)`, client, ids["profile"]).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 11 {
		t.Errorf("%d of the client's 11 rows of the tables that had client_id are left", rows)
	}
	var profiles, matched int64
	if err := pool.QueryRow(ctx, `SELECT profiles, matched FROM connect.client_stats WHERE client_id = $1`, client).Scan(&profiles, &matched); err != nil || profiles != 1 || matched != 1 {
		t.Errorf("counts of the overview after the upgrade: %d profiles, %d matched, %v; want 1 and 1", profiles, matched, err)
	}
}
