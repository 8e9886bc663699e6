package migrations_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/services/platform/idempotency"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/services/platform/tenancy"
	"github.com/mnvhq/mnv/services/verification/migrations"
)

// TestUpgradeMatchesFresh: a database created by any shipped version of the migrations
// (testdata/history/<commit>) and migrated to these has the schema of a fresh one.
func TestUpgradeMatchesFresh(t *testing.T) {
	pgtest.CheckUpgrades(t, "verification", migrations.FS, os.DirFS("testdata/history"), idempotency.Migrations())
}

// TestTablesFollowTheTenantRule: the migrated schema, River's tables included (the app migrates
// them), is what its declaration says it is: every table declared, and each tenant table
// distributable by client_id (docs/operations.md#past-one-postgresql).
func TestTablesFollowTheTenantRule(t *testing.T) {
	ctx := context.Background()
	pool, err := pg.Open(ctx, pgtest.NewDatabase(t), pg.PoolConfig{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pg.Migrate(ctx, pool, "verification", migrations.FS, idempotency.Migrations()); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Migrate(ctx, pool, "verification"); err != nil {
		t.Fatal(err)
	}
	problems, err := tenancy.Check(ctx, pool, migrations.Tables)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("the schema breaks the tenant rule:\n%s", strings.Join(problems, "\n"))
	}
}
