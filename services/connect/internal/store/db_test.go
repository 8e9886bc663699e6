package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mnvhq/mnv/services/connect/migrations"
	"github.com/mnvhq/mnv/services/platform/idempotency"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/services/platform/tenancy"
)

// migratedPool opens a pool on a fresh database of the test's own with connect's schema
// migrated, closed when the test ends.
func migratedPool(ctx context.Context, t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pg.Open(ctx, pgtest.NewDatabase(t), pg.PoolConfig{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pg.Migrate(ctx, pool, "connect", migrations.FS, idempotency.Migrations()); err != nil {
		t.Fatal(err)
	}
	// make test-partitioned: the tenant tables hash-partitioned by client_id, as the app does.
	if err := tenancy.PartitionFromEnv(ctx, pool, migrations.Tables); err != nil {
		t.Fatal(err)
	}
	return pool
}
