package migrations_test

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mnvhq/mnv/services/accounts/migrations"
	"github.com/mnvhq/mnv/services/platform/idempotency"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
)

// TestUpgradeMatchesFresh: a database created by any shipped version of the migrations
// (testdata/history/<commit>) and migrated to these has the schema of a fresh one.
func TestUpgradeMatchesFresh(t *testing.T) {
	pgtest.CheckUpgrades(t, "accounts", migrations.FS, os.DirFS("testdata/history"), idempotency.Migrations())
}

// TestTablesFollowTheTenancyRule: the schema the service migrates (its migrations, the
// idempotency keys' and River's, as app.migrate runs them) keeps the rule that lets it be
// distributed by client, for the declaration in Tables
// (docs/operations.md#past-one-postgresql).
func TestTablesFollowTheTenancyRule(t *testing.T) {
	ctx := context.Background()
	pool := open(t)
	if err := pg.Migrate(ctx, pool, "accounts", migrations.FS, idempotency.Migrations()); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Migrate(ctx, pool, "accounts"); err != nil {
		t.Fatal(err)
	}
	pgtest.CheckTenancy(t, pool, migrations.Tables)
}

// TestUpgradeKeepsRowsKeyedByClient: rows written under the schema shipped at 26466c0 survive
// the migration to keys by client: a rotated key still points at its replacement, every API
// key gets its entry in client_lookups (so one sent without X-CLIENT-ID still authenticates),
// the ledger keeps its entries and becomes append-only by privileges, and no trigger is left.
func TestUpgradeKeepsRowsKeyedByClient(t *testing.T) {
	ctx := context.Background()
	pool := open(t)
	if err := pg.Migrate(ctx, pool, "accounts", os.DirFS("testdata/history/26466c0"), idempotency.Migrations()); err != nil {
		t.Fatal(err)
	}
	const a, b = "00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b"
	const oldKey, newKey, tokenA = "10000000-0000-4000-8000-000000000001", "10000000-0000-4000-8000-000000000002", "20000000-0000-4000-8000-000000000001"
	exec(t, pool, `INSERT INTO accounts.clients (id, name, contact_sealed, status, secret_fingerprint)
		VALUES ($1, 'a', '\x00', 'ACTIVE', '\x00'), ($2, 'b', '\x00', 'ACTIVE', '\x00')`, a, b)
	exec(t, pool, `INSERT INTO accounts.balances (client_id, balance) VALUES ($1, 9), ($2, 0)`, a, b)
	exec(t, pool, `INSERT INTO accounts.ledger (id, client_id, kind, amount, balance_after, reference)
		VALUES (gen_random_uuid(), $1, 'TOP_UP', 10, 10, 'initial-balance'),
		       (gen_random_uuid(), $1, 'VERIFICATION', -1, 9, 'verification:1')`, a)
	exec(t, pool, `INSERT INTO accounts.api_keys (id, client_id, name, role, fingerprint, hint)
		VALUES ($2, $1, 'default', 'ADMIN', '\x02', 'h'), ($3, $1, 'default', 'ADMIN', '\x01', 'h'),
		       (gen_random_uuid(), $4, 'default', 'ADMIN', '\x0b', 'h')`, a, newKey, oldKey, b)
	exec(t, pool, `UPDATE accounts.api_keys SET revoked_at = now(), replaced_by = $2 WHERE id = $1`, oldKey, newKey)
	exec(t, pool, `INSERT INTO accounts.sdk_tokens (id, client_id, label, fingerprint, hint) VALUES ($2, $1, 'app', '\x03', 'h')`, a, tokenA)
	exec(t, pool, `INSERT INTO accounts.prices (client_id, kind, amount) VALUES ($1, 'VERIFICATION', 2)`, a)

	if err := pg.Migrate(ctx, pool, "accounts", migrations.FS, idempotency.Migrations()); err != nil {
		t.Fatal(err)
	}
	var replacedBy string
	if err := pool.QueryRow(ctx, `SELECT replaced_by::text FROM accounts.api_keys WHERE client_id = $1 AND id = $2`, a, oldKey).Scan(&replacedBy); err != nil || replacedBy != newKey {
		t.Errorf("the rotated key is replaced by %q (%v), want %s", replacedBy, err, newKey)
	}
	lookups := map[string]string{}
	rows, err := pool.Query(ctx, `SELECT encode(key, 'hex'), client_id::text FROM accounts.client_lookups WHERE kind = 'api_key'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var fp, client string
		if err := rows.Scan(&fp, &client); err != nil {
			t.Fatal(err)
		}
		lookups[fp] = client
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"01": a, "02": a, "0b": b}; !maps.Equal(lookups, want) {
		t.Errorf("client_lookups %v, want %v", lookups, want)
	}
	for table, want := range map[string]int{"ledger": 2, "sdk_tokens": 1, "prices": 1, "balances": 1} {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM accounts.`+table+` WHERE client_id = $1`, a).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("%s has %d rows of the client, want %d", table, n, want)
		}
	}
	var ref string
	if err := pool.QueryRow(ctx, `SELECT reference FROM accounts.ledger WHERE client_id = $1 AND ref_key = $2`, a, a+"/verification:1").Scan(&ref); err != nil {
		t.Errorf("the debit by its reference: %v", err)
	}
	// A reference is unique per client, as before.
	_, err = pool.Exec(ctx, `INSERT INTO accounts.ledger (id, client_id, kind, amount, balance_after, reference)
		VALUES (gen_random_uuid(), $1, 'VERIFICATION', -1, 8, 'verification:1')`, a)
	if !pg.IsUniqueViolation(err, "ledger_ref_key") {
		t.Errorf("a reference used twice: %v, want a violation of ledger_ref_key", err)
	}
	var triggers int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
		WHERE c.relnamespace = 'accounts'::regnamespace AND NOT t.tgisinternal`).Scan(&triggers); err != nil || triggers != 0 {
		t.Errorf("%d triggers left in accounts (%v), want none", triggers, err)
	}
	var granted []string
	if err := pool.QueryRow(ctx, `SELECT coalesce(array_agg(DISTINCT a.privilege_type), '{}')
		FROM pg_class c, aclexplode(c.relacl) a WHERE c.oid = 'accounts.ledger'::regclass
		  AND a.privilege_type IN ('UPDATE', 'DELETE', 'TRUNCATE')`).Scan(&granted); err != nil || len(granted) > 0 {
		t.Errorf("the ledger grants %v (%v), want no UPDATE, DELETE or TRUNCATE to anyone", granted, err)
	}
}

func open(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pg.Open(context.Background(), pgtest.NewDatabase(t), pg.PoolConfig{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func exec(t *testing.T, db pg.DB, sql string, args ...any) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestExistingClientsKeepTheirOperators: a client created before operators were enabled per
// client keeps what it could use then (every operator, header enrichment); one created after
// has the default set (NULL).
func TestExistingClientsKeepTheirOperators(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	pool, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	before := fstest.MapFS{}
	for _, name := range []string{"001_init.sql", "002_ledger_ref_key.sql", "003_web_origins.sql", "004_events.sql"} {
		b, err := fs.ReadFile(migrations.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		before[name] = &fstest.MapFile{Data: b}
	}
	if err := pg.Migrate(ctx, pool, "accounts", before, idempotency.Migrations()); err != nil {
		t.Fatal(err)
	}
	insert := `INSERT INTO accounts.clients (id, name, contact_sealed, status, secret_fingerprint)
		VALUES ($1, 'c', '\x00', 'ACTIVE', '\x00')`
	const old, fresh = "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"
	if _, err := pool.Exec(ctx, insert, old); err != nil {
		t.Fatal(err)
	}
	if err := pg.Migrate(ctx, pool, "accounts", migrations.FS, idempotency.Migrations()); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, insert, fresh); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]*string{old: ptr(`{"*": ["HEADER_ENRICHMENT"]}`), fresh: nil} {
		var got *string
		if err := pool.QueryRow(ctx, `SELECT operators::text FROM accounts.clients WHERE id = $1`, id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if (got == nil) != (want == nil) || (got != nil && *got != *want) {
			t.Errorf("client %s: operators %v, want %v", id, deref(got), deref(want))
		}
	}
	// Anything but an object is refused.
	if _, err := pool.Exec(ctx, `UPDATE accounts.clients SET operators = '["sandbox"]' WHERE id = $1`, old); err == nil {
		t.Error("an array was accepted as operators")
	}
}

func ptr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}
