package jobs_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
)

// TestMigrateDropsUnusedIndexes: after Migrate (twice, as replicas starting together would),
// River's job table keeps the indexes River's queries use and has no GIN index of args or
// metadata, whose upkeep every job insert and completion would pay.
func TestMigrateDropsUnusedIndexes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pg.Open(ctx, pgtest.NewDatabase(t), pg.PoolConfig{MaxConns: 4, ApplicationName: "jobs-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE SCHEMA svc`); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := jobs.Migrate(ctx, pool, "svc"); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := pool.Query(ctx, `SELECT indexname FROM pg_indexes WHERE schemaname = 'svc' AND tablename = 'river_job'`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"river_job_pkey", "river_job_prioritized_fetching_index", "river_job_kind", "river_job_unique_idx", "river_job_state_and_finalized_at_index"} {
		if !slices.Contains(got, want) {
			t.Errorf("index %s missing; river_job has %v", want, got)
		}
	}
	for _, gone := range []string{"river_job_args_index", "river_job_metadata_index"} {
		if slices.Contains(got, gone) {
			t.Errorf("index %s still there; river_job has %v", gone, got)
		}
	}
}
