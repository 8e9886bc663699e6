package migrations_test

import (
	"context"
	"io/fs"
	"os"
	"testing"
	"testing/fstest"

	"github.com/mnvhq/mnv/services/accounts/migrations"
	"github.com/mnvhq/mnv/services/platform/idempotency"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
)

// TestUpgradeMatchesFresh: a database created by any shipped version of the migrations
// (testdata/history/<commit>) and migrated to these has the schema of a fresh one.
func TestUpgradeMatchesFresh(t *testing.T) {
	pgtest.CheckUpgrades(t, "accounts", migrations.FS, os.DirFS("testdata/history"), idempotency.Migrations())
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
