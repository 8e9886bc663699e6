package pg_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/services/platform/tenancy"
)

// TestMigrations runs the migration cases on one database, each in schemas of its own: creating
// a database is the slow part.
func TestMigrations(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	tests := []struct {
		name string
		run  func(*testing.T, *pgxpool.Pool)
	}{
		{"Migrate", testMigrate},
		{"MigrateConcurrent", testMigrateConcurrent},
		{"MigrateSchemaName", testMigrateSchemaName},
		{"MigrateFailure", testMigrateFailure},
		{"MigrateBadFiles", testMigrateBadFiles},
		{"MigrateExtraSet", testMigrateExtraSet},
		{"MigrateEmptyMainSet", testMigrateEmptyMainSet},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, pool) })
	}
}

// TestHelpers runs the SQLSTATE, transaction and pool cases on one database.
func TestHelpers(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	pool, err := pg.Open(testCtx(t), url, pg.PoolConfig{MaxConns: 4})
	if err != nil {
		t.Fatalf("pg.Open: %v", err)
	}
	t.Cleanup(pool.Close)
	t.Run("IsUniqueViolation", func(t *testing.T) { testIsUniqueViolation(t, pool) })
	t.Run("InTx", func(t *testing.T) { testInTx(t, pool) })
	t.Run("Open", func(t *testing.T) { testOpen(t, url) })
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newPool opens a pool on a fresh, empty database of the test's own.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pg.Open(testCtx(t), pgtest.NewDatabase(t), pg.PoolConfig{MaxConns: 10, ApplicationName: "platform-pg-test"})
	if err != nil {
		t.Fatalf("pg.Open: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// twoMigrations creates a table and records, in another table, each migration that ran.
func twoMigrations() fstest.MapFS {
	return fstest.MapFS{
		"001_items.sql": {Data: []byte(`
CREATE TABLE {{.schema}}.items (
    id   int  PRIMARY KEY,
    name text NOT NULL CONSTRAINT items_name_key UNIQUE
);
CREATE TABLE {{.schema}}.applied (migration int NOT NULL);
INSERT INTO {{.schema}}.applied VALUES (1);
`)},
		"002_more.sql": {Data: []byte(`
ALTER TABLE {{.schema}}.items ADD COLUMN note text;
INSERT INTO {{.schema}}.applied VALUES (2);
`)},
		// Not a migration: ignored.
		"README.md": {Data: []byte("not SQL")},
	}
}

func scalar[T any](t *testing.T, pool *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := pool.QueryRow(testCtx(t), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

func tableExists(t *testing.T, pool *pgxpool.Pool, schema, table string) bool {
	t.Helper()
	return scalar[bool](t, pool, `SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = $2)`, schema, table)
}

func schemaExists(t *testing.T, pool *pgxpool.Pool, schema string) bool {
	t.Helper()
	return scalar[bool](t, pool, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema)
}

func testMigrate(t *testing.T, pool *pgxpool.Pool) {
	ctx := testCtx(t)
	fsys := twoMigrations()

	if schemaExists(t, pool, "app") {
		t.Fatal("schema app exists before the first migration")
	}
	if err := pg.Migrate(ctx, pool, "app", fsys); err != nil {
		t.Fatalf("first Migrate: %v", err)
	}

	state := func() (version int32, applied string) {
		t.Helper()
		version = scalar[int32](t, pool, `SELECT version FROM app.schema_version`)
		applied = scalar[string](t, pool, `SELECT coalesce(string_agg(migration::text, ',' ORDER BY migration), '') FROM app.applied`)
		return version, applied
	}

	steps := []struct {
		name        string
		fsys        fstest.MapFS
		wantVersion int32
		wantApplied string
	}{
		{"first run applied both", nil, 2, "1,2"},
		{"second run is a no-op", fsys, 2, "1,2"},
		{"third run is a no-op", fsys, 2, "1,2"},
		{"a new migration runs alone", withFile(fsys, "003_third.sql", `INSERT INTO {{.schema}}.applied VALUES (3);`), 3, "1,2,3"},
		{"and then is a no-op too", withFile(fsys, "003_third.sql", `INSERT INTO {{.schema}}.applied VALUES (3);`), 3, "1,2,3"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.fsys != nil {
				if err := pg.Migrate(ctx, pool, "app", s.fsys); err != nil {
					t.Fatalf("Migrate: %v", err)
				}
			}
			v, applied := state()
			if v != s.wantVersion || applied != s.wantApplied {
				t.Errorf("version %d, applied %q; want %d, %q", v, applied, s.wantVersion, s.wantApplied)
			}
		})
	}

	for _, table := range []string{"items", "applied", "schema_version"} {
		if !tableExists(t, pool, "app", table) {
			t.Errorf("table app.%s missing", table)
		}
	}
	// The {{.schema}} placeholder put the tables in app, not in the search path.
	if tableExists(t, pool, "public", "items") {
		t.Error("table items was created in public")
	}
	// The column of migration 2 is there.
	if _, err := pool.Exec(ctx, `INSERT INTO app.items (id, name, note) VALUES (1, 'a', 'n')`); err != nil {
		t.Errorf("insert using migration 2's column: %v", err)
	}
}

func withFile(fsys fstest.MapFS, name, sql string) fstest.MapFS {
	out := fstest.MapFS{}
	for k, v := range fsys {
		out[k] = v
	}
	out[name] = &fstest.MapFile{Data: []byte(sql)}
	return out
}

// testMigrateConcurrent starts replicas together on fresh schemas: every one must succeed and
// every migration must run exactly once.
func testMigrateConcurrent(t *testing.T, pool *pgxpool.Pool) {
	ctx := testCtx(t)
	fsys := twoMigrations()

	tests := []struct {
		name     string
		schema   string
		replicas int
	}{
		{"two replicas", "race_two", 2},
		{"four replicas", "race_four", 4},
		{"two replicas again", "race_again", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := make(chan struct{})
			errs := make([]error, tt.replicas)
			var wg sync.WaitGroup
			for i := range tt.replicas {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					errs[i] = pg.Migrate(ctx, pool, tt.schema, fsys)
				}()
			}
			close(start)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("replica %d: Migrate: %v", i, err)
				}
			}
			rows := scalar[string](t, pool, `SELECT coalesce(string_agg(migration::text, ',' ORDER BY migration), '') FROM `+tt.schema+`.applied`)
			if rows != "1,2" {
				t.Errorf("applied migrations %q, want \"1,2\" (each once)", rows)
			}
			if v := scalar[int32](t, pool, `SELECT version FROM `+tt.schema+`.schema_version`); v != 2 {
				t.Errorf("version = %d, want 2", v)
			}
			if n := scalar[int64](t, pool, `SELECT count(*) FROM `+tt.schema+`.schema_version`); n != 1 {
				t.Errorf("schema_version has %d rows, want 1", n)
			}
		})
	}
}

func testMigrateSchemaName(t *testing.T, pool *pgxpool.Pool) {
	ctx := testCtx(t)
	fsys := twoMigrations()

	tests := []struct {
		name   string
		schema string
		ok     bool
	}{
		{"one letter", "a", true},
		{"letters digits underscore", "svc_2", true},
		{"63 characters", "s" + strings.Repeat("x", 62), true},

		{"empty", "", false},
		{"64 characters", "s" + strings.Repeat("x", 63), false},
		{"upper case", "Rejected", false},
		{"leading digit", "1rejected", false},
		{"leading underscore", "_rejected", false},
		{"dash", "re-jected", false},
		{"space", "re jected", false},
		{"dot", "public.rejected", false},
		{"quote", `rejected"`, false},
		{"semicolon injection", "rejected; DROP TABLE x", false},
		{"comment injection", "rejected--", false},
		{"trailing newline", "rejected\n", false},
		{"non-ASCII", "rejecté", false},
	}
	schemas := func() int64 { return scalar[int64](t, pool, `SELECT count(*) FROM pg_namespace`) }
	before := schemas()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := pg.Migrate(ctx, pool, tt.schema, fsys)
			if tt.ok {
				if err != nil {
					t.Fatalf("Migrate(%q): %v", tt.schema, err)
				}
				if !tableExists(t, pool, tt.schema, "items") {
					t.Errorf("Migrate(%q) created no items table", tt.schema)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "bad schema name") {
				t.Fatalf("Migrate(%q) = %v, want a bad schema name error", tt.schema, err)
			}
		})
	}
	// Nothing of the rejected names reached the database: only the accepted ones are new.
	if added := schemas() - before; added != 3 {
		t.Errorf("%d schemas were created, want 3 (one per accepted name)", added)
	}
	if schemaExists(t, pool, "rejected") || schemaExists(t, pool, "public.rejected") {
		t.Error("a rejected name created a schema")
	}
}

func testMigrateFailure(t *testing.T, pool *pgxpool.Pool) {
	ctx := testCtx(t)

	good := fstest.MapFS{
		"001_ok.sql": {Data: []byte(`CREATE TABLE {{.schema}}.ok_table (id int);`)},
	}
	broken := withFile(good, "002_broken.sql", `
CREATE TABLE {{.schema}}.partial (id int);
INSERT INTO {{.schema}}.partial VALUES (1);
SELECT 1 / 0;
`)
	fixed := withFile(good, "002_broken.sql", `
CREATE TABLE {{.schema}}.partial (id int);
INSERT INTO {{.schema}}.partial VALUES (1);
`)

	steps := []struct {
		name        string
		fsys        fstest.MapFS
		wantErr     bool
		wantVersion int32
		wantPartial bool
	}{
		{"failing migration returns an error", broken, true, 1, false},
		{"retrying still fails the same way", broken, true, 1, false},
		{"fixed migration applies", fixed, false, 2, true},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			err := pg.Migrate(ctx, pool, "fail", s.fsys)
			if (err != nil) != s.wantErr {
				t.Fatalf("Migrate = %v, wantErr %v", err, s.wantErr)
			}
			if s.wantErr && !strings.Contains(err.Error(), "division by zero") {
				t.Errorf("error %q does not carry the cause", err)
			}
			if got := tableExists(t, pool, "fail", "partial"); got != s.wantPartial {
				t.Errorf("table partial exists = %v, want %v", got, s.wantPartial)
			}
			if !tableExists(t, pool, "fail", "ok_table") {
				t.Error("the good migration before the broken one was lost")
			}
			if v := scalar[int32](t, pool, `SELECT version FROM fail.schema_version`); v != s.wantVersion {
				t.Errorf("version = %d, want %d", v, s.wantVersion)
			}
		})
	}

	// A failed run releases its lock: another schema (and this one) can still migrate.
	if err := pg.Migrate(ctx, pool, "after_failure", good); err != nil {
		t.Errorf("Migrate after a failure: %v", err)
	}
}

func testMigrateBadFiles(t *testing.T, pool *pgxpool.Pool) {
	ctx := testCtx(t)
	tests := []struct {
		name string
		fsys fstest.MapFS
	}{
		{"gap in numbering", fstest.MapFS{
			"001_a.sql": {Data: []byte(`SELECT 1;`)},
			"003_c.sql": {Data: []byte(`SELECT 1;`)},
		}},
		{"bad template", fstest.MapFS{
			"001_a.sql": {Data: []byte(`CREATE TABLE {{.schema}.x (id int);`)},
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := pg.Migrate(ctx, pool, fmt.Sprintf("bad_files_%d", i), tt.fsys); err == nil {
				t.Error("Migrate succeeded, want an error")
			}
		})
	}
}

// testMigrateExtraSet runs a second set of migrations, the way platform packages bring their
// own tables into a service's schema, and checks that {{.schema}} names each service's schema.
func testMigrateExtraSet(t *testing.T, pool *pgxpool.Pool) {
	ctx := testCtx(t)
	main := twoMigrations()
	extra := pg.Migrations{Name: "extra", FS: fstest.MapFS{
		"001_extra.sql": {Data: []byte(`
CREATE TABLE {{.schema}}.extra_things (id int);
INSERT INTO {{.schema}}.extra_things VALUES (1);
COMMENT ON TABLE {{.schema}}.extra_things IS 'schema={{.schema}}';
`)},
	}}
	other := pg.Migrations{Name: "other", FS: fstest.MapFS{
		"001_other.sql": {Data: []byte(`CREATE TABLE {{.schema}}.other_things (id int);`)},
	}}

	tests := []struct {
		schema string
	}{
		{"svc_one"},
		{"svc_two"},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			for run := range 2 {
				if err := pg.Migrate(ctx, pool, tt.schema, main, extra, other); err != nil {
					t.Fatalf("Migrate run %d: %v", run+1, err)
				}
			}
			for _, table := range []string{"items", "extra_things", "other_things", "schema_version", "extra_version", "other_version"} {
				if !tableExists(t, pool, tt.schema, table) {
					t.Errorf("table %s.%s missing", tt.schema, table)
				}
			}
			if n := scalar[int64](t, pool, `SELECT count(*) FROM `+tt.schema+`.extra_things`); n != 1 {
				t.Errorf("extra migration ran %d times, want 1", n)
			}
			if v := scalar[int32](t, pool, `SELECT version FROM `+tt.schema+`.extra_version`); v != 1 {
				t.Errorf("extra version = %d, want 1", v)
			}
			comment := scalar[string](t, pool, `SELECT obj_description(($1 || '.extra_things')::regclass, 'pg_class')`, tt.schema)
			if comment != "schema="+tt.schema {
				t.Errorf("comment = %q, want schema=%s", comment, tt.schema)
			}
		})
	}
}

// testMigrateEmptyMainSet: a service with no tables of its own may still bring a platform set.
func testMigrateEmptyMainSet(t *testing.T, pool *pgxpool.Pool) {
	ctx := testCtx(t)
	extra := pg.Migrations{Name: "extra", FS: fstest.MapFS{
		"001_extra.sql": {Data: []byte(`CREATE TABLE {{.schema}}.extra_things (id int);`)},
	}}
	if err := pg.Migrate(ctx, pool, "empty_main", fstest.MapFS{}, extra); err != nil {
		t.Fatal(err)
	}
	if !tableExists(t, pool, "empty_main", "extra_things") {
		t.Fatal("the extra set did not run")
	}
}

func testIsUniqueViolation(t *testing.T, pool *pgxpool.Pool) {
	ctx := testCtx(t)
	if _, err := pool.Exec(ctx, `
CREATE TABLE parent (id int PRIMARY KEY, email text CONSTRAINT parent_email_key UNIQUE);
CREATE TABLE child (id int PRIMARY KEY, parent_id int REFERENCES parent (id));
INSERT INTO parent VALUES (1, 'a@example.com');`); err != nil {
		t.Fatal(err)
	}
	_, uniqueErr := pool.Exec(ctx, `INSERT INTO parent VALUES (2, 'a@example.com')`)
	_, pkeyErr := pool.Exec(ctx, `INSERT INTO parent VALUES (1, 'b@example.com')`)
	_, fkErr := pool.Exec(ctx, `INSERT INTO child VALUES (1, 42)`)
	_, otherErr := pool.Exec(ctx, `SELECT 1 / 0`)
	if uniqueErr == nil || pkeyErr == nil || fkErr == nil || otherErr == nil {
		t.Fatalf("expected database errors, got %v, %v, %v, %v", uniqueErr, pkeyErr, fkErr, otherErr)
	}

	tests := []struct {
		name       string
		err        error
		constraint string
		unique     bool
		fk         bool
	}{
		{"unique, any constraint", uniqueErr, "", true, false},
		{"unique, its constraint", uniqueErr, "parent_email_key", true, false},
		{"unique, another constraint", uniqueErr, "parent_pkey", false, false},
		{"primary key, its constraint", pkeyErr, "parent_pkey", true, false},
		{"primary key, any constraint", pkeyErr, "", true, false},
		{"wrapped unique", fmt.Errorf("store: %w", uniqueErr), "parent_email_key", true, false},
		{"foreign key", fkErr, "", false, true},
		{"foreign key, named", fkErr, "child_parent_id_fkey", false, true},
		{"division by zero", otherErr, "", false, false},
		{"plain error", errors.New("23505"), "", false, false},
		{"nil", nil, "", false, false},
		{"no rows", pgx.ErrNoRows, "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pg.IsUniqueViolation(tt.err, tt.constraint); got != tt.unique {
				t.Errorf("IsUniqueViolation(%v, %q) = %v, want %v", tt.err, tt.constraint, got, tt.unique)
			}
			if got := pg.IsForeignKeyViolation(tt.err); got != tt.fk {
				t.Errorf("IsForeignKeyViolation(%v) = %v, want %v", tt.err, got, tt.fk)
			}
		})
	}
}

func testInTx(t *testing.T, pool *pgxpool.Pool) {
	ctx := testCtx(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	errFn := errors.New("changed my mind")
	tests := []struct {
		name    string
		id      int
		fnErr   error
		wantErr error
		kept    bool
	}{
		{"nil commits", 1, nil, nil, true},
		{"error rolls back", 2, errFn, errFn, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `INSERT INTO t VALUES ($1)`, tt.id); err != nil {
					return err
				}
				return tt.fnErr
			})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("InTx = %v, want %v", err, tt.wantErr)
			}
			if got := scalar[bool](t, pool, `SELECT EXISTS (SELECT 1 FROM t WHERE id = $1)`, tt.id); got != tt.kept {
				t.Errorf("row kept = %v, want %v", got, tt.kept)
			}
		})
	}
}

func testOpen(t *testing.T, url string) {
	ctx := testCtx(t)

	t.Run("application name and limits", func(t *testing.T) {
		pool, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: 3, ApplicationName: "mnv-open-test"})
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		if got := pool.Config().MaxConns; got != 3 {
			t.Errorf("MaxConns = %d, want 3", got)
		}
		if got := scalar[string](t, pool, `SELECT current_setting('application_name')`); got != "mnv-open-test" {
			t.Errorf("application_name = %q", got)
		}
	})
	t.Run("batches plan with their values, by index", func(t *testing.T) {
		// A batch statement's keys come as an array, here of 1 to 8 keys, into a table that is
		// empty when its statistics were taken: every call is planned with its values (a generic
		// plan costs a client_id = $1 for an average client), and a plan must still find rows by
		// the index when the table has grown.
		setup, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer setup.Close()
		if _, err := setup.Exec(ctx, `CREATE TABLE batch_plans (id bigint PRIMARY KEY, v text); ANALYZE batch_plans`); err != nil {
			t.Fatal(err)
		}
		const query = `SELECT count(*) FROM batch_plans WHERE id = ANY($1::bigint[])`
		for _, tt := range []struct {
			batches                            bool
			spread                             tenancy.Spread
			wantGeneric, wantCustom, wantIndex bool
		}{
			{batches: true, spread: tenancy.Together, wantGeneric: true, wantIndex: true},
			{batches: true, spread: tenancy.PerClient, wantCustom: true, wantIndex: true},
			{batches: false},
		} {
			pool, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: 1, Batches: tt.batches, Spread: tt.spread})
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			conn, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			const calls = 8
			for n := 1; n <= calls; n++ {
				ids := make([]int64, n)
				for i := range ids {
					ids[i] = int64(i)
				}
				if _, err := conn.Exec(ctx, query, ids); err != nil {
					t.Fatal(err)
				}
			}
			var name string
			var generic, custom int64
			if err := conn.QueryRow(ctx, `SELECT name, generic_plans, custom_plans FROM pg_prepared_statements
				WHERE statement = $1`, query).Scan(&name, &generic, &custom); err != nil {
				t.Fatal(err)
			}
			if got := custom == calls && generic == 0; got != tt.wantCustom {
				t.Errorf("Batches=%t %v: %d generic and %d custom plans of %d calls, want all custom: %t", tt.batches, tt.spread, generic, custom, calls, tt.wantCustom)
			}
			if got := custom == 0 && generic == calls; got != tt.wantGeneric {
				t.Errorf("Batches=%t %v: %d generic and %d custom plans of %d calls, want all generic: %t", tt.batches, tt.spread, generic, custom, calls, tt.wantGeneric)
			}
			var plan strings.Builder
			rows, err := conn.Query(ctx, `EXPLAIN EXECUTE `+pgx.Identifier{name}.Sanitize()+`('{1,2,3}')`)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan.WriteString(line + "\n")
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if got := !strings.Contains(plan.String(), "Seq Scan"); got != tt.wantIndex {
				t.Errorf("Batches=%t %v: plan of the empty table:\n%s", tt.batches, tt.spread, plan.String())
			}
		}
	})
	t.Run("defaults", func(t *testing.T) {
		pool, err := pg.Open(ctx, url, pg.PoolConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		if got := pool.Config().MaxConns; got != 16 {
			t.Errorf("MaxConns = %d, want 16", got)
		}
		if got := pool.Config().MaxConnLifetime; got != time.Hour {
			t.Errorf("MaxConnLifetime = %v, want 1h", got)
		}
	})

	bad := []struct {
		name string
		url  string
	}{
		{"unparsable url quoting a password", "postgres://user:hunter2secret@[::1:5432/db"},
		{"unknown parameter", "postgres://user:hunter2secret@127.0.0.1:5432/db?pool_max_conns=lots"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			pool, err := pg.Open(ctx, tt.url, pg.PoolConfig{})
			if err == nil {
				pool.Close()
				t.Fatal("Open succeeded, want an error")
			}
			if strings.Contains(err.Error(), "hunter2secret") {
				t.Errorf("error %q quotes the password", err)
			}
		})
	}
}
