package pgtest

import (
	"context"
	"io/fs"
	"slices"
	"testing"

	"github.com/mnvhq/mnv/services/platform/pg"
)

// CheckUpgrades migrates a database from each set of migrations that ever shipped (a directory
// of history per release, e.g. testdata/history/<commit>) to current, and requires the schema a
// fresh database gets from current. It fails when a migration was edited after it shipped:
// databases created from the earlier text never receive the edit. more are the schema's other
// migration sets (the platform's), applied on both paths.
func CheckUpgrades(t *testing.T, schema string, current, history fs.FS, more ...pg.Migrations) {
	t.Helper()
	apply := func(t *testing.T, url string, fsys fs.FS) {
		t.Helper()
		ctx := context.Background()
		pool, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		if err := pg.Migrate(ctx, pool, schema, fsys, more...); err != nil {
			t.Fatal(err)
		}
	}
	fresh := NewDatabase(t)
	apply(t, fresh, current)
	want := SchemaShape(t, fresh, schema)

	releases, err := fs.ReadDir(history, ".")
	if err != nil || len(releases) == 0 {
		t.Fatalf("no shipped migrations in the history: %v", err)
	}
	for _, r := range releases {
		t.Run(r.Name(), func(t *testing.T) {
			shipped, err := fs.Sub(history, r.Name())
			if err != nil {
				t.Fatal(err)
			}
			url := NewDatabase(t)
			apply(t, url, shipped)
			apply(t, url, current)
			if got := SchemaShape(t, url, schema); !slices.Equal(got, want) {
				t.Errorf("upgraded from %s, the schema differs from a fresh one (- fresh, + upgraded):\n%s", r.Name(), ShapeDiff(want, got))
			}
		})
	}
}
