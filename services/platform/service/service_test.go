package service_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/auth/authtest"
	"github.com/mnvhq/mnv/services/platform/idempotency"
	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/services/platform/service"
	"github.com/mnvhq/mnv/services/platform/tenancy"
)

// testSchema is a service's database in small: one tenant table of its own, idempotency's and
// River's. then, when set, runs after the migrations.
func testSchema(sql string, then func(context.Context, *pgxpool.Pool, *zap.Logger) error) service.Schema {
	return service.Schema{
		Tables: tenancy.Schema{Name: "svctest", Tables: slices.Concat([]tenancy.Table{
			{Name: "things", Class: tenancy.Tenant, Why: "a client's things"},
		}, idempotency.Tables(), tenancy.RiverTables())},
		Migrations: fstest.MapFS{"001_things.sql": {Data: []byte(sql)}},
		Then:       then,
	}
}

const thingsSQL = `CREATE TABLE {{.schema}}.things (client_id uuid NOT NULL, id bigint NOT NULL, PRIMARY KEY (client_id, id));`

func testConfig(url string) service.Config {
	c := service.DefaultConfig("127.0.0.1:0", testVars)
	c.DatabaseURL, c.DataKeys, c.DBMaxConns = url, testKeys, 4
	c.InternalCallers = authtest.Callers()
	c.ShutdownTimeout = 5 * time.Second
	return c
}

func deps(t *testing.T, s service.Schema, reg prometheus.Registerer) service.Deps {
	return service.Deps{Schema: s, Log: zaptest.NewLogger(t), Registerer: reg}
}

// connections counts the database's connections named like pattern.
func connections(t *testing.T, pool *pgxpool.Pool, pattern string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name LIKE $1`, pattern).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOpenThenCloseLastFirst: Open migrates the schema (the service's migrations, idempotency's,
// River's, then Then) on a pool named for the service; what is opened after it (a batch pool,
// the rate limits, the server, the app's own) is closed before it, and Close leaves no
// connection.
func TestOpenThenCloseLastFirst(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	thenRan := false
	s := testSchema(thingsSQL, func(ctx context.Context, pool *pgxpool.Pool, _ *zap.Logger) error {
		thenRan = true
		_, err := pool.Exec(ctx, `SELECT 1 FROM svctest.things, svctest.river_job, svctest.idempotency_keys LIMIT 1`)
		return err
	})
	reg := prometheus.NewRegistry()
	b, err := service.Open(ctx, testConfig(url), deps(t, s, reg))
	if err != nil {
		t.Fatal(err)
	}
	if !thenRan {
		t.Error("Then did not run")
	}
	if b.Keyring == nil || b.Jobs == nil || b.Idem == nil {
		t.Fatalf("Open left parts unset: %+v", b)
	}
	wantSpread := tenancy.Together
	if os.Getenv(tenancy.PartitionsVar) != "" {
		wantSpread = tenancy.PerClient
	}
	if b.Spread != wantSpread {
		t.Errorf("spread %v, want %v", b.Spread, wantSpread)
	}

	var (
		mu     sync.Mutex
		closed []string
	)
	// Each probe records its name and whether the pool it was opened after still answers.
	probe := func(name string, pool *pgxpool.Pool) {
		b.AddFunc(name, func() {
			err := pool.Ping(ctx)
			mu.Lock()
			defer mu.Unlock()
			closed = append(closed, name)
			if err != nil {
				t.Errorf("%s: its pool was closed before it: %v", name, err)
			}
		})
	}
	probe("after the pool", b.Pool)
	batch, err := b.OpenBatchPool(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	probe("after the batch pool", batch)
	if n := connections(t, b.Pool, "mnv-svctest"); n == 0 {
		t.Error("no connection named mnv-svctest")
	}
	if n := connections(t, b.Pool, "mnv-svctest-batch"); n == 0 {
		t.Error("no connection named mnv-svctest-batch")
	}
	if _, err := b.NewServer(service.ServerOptions{Policy: auth.Policy{}}); err != nil {
		t.Fatal(err)
	}
	probe("after the server", batch)
	// The pools' gauges, labelled by schema, as each service's were before the skeleton.
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	pools := map[string]bool{}
	for _, f := range families {
		if f.GetName() == "mnv_db_pool_max_connections" {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					pools[l.GetName()+"="+l.GetValue()] = true
				}
			}
		}
	}
	if !pools["pool=svctest"] || !pools["pool=svctest_batch"] {
		t.Errorf("pool gauges labelled %v, want pool=svctest and pool=svctest_batch", pools)
	}

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"after the server", "after the batch pool", "after the pool"}
	if !slices.Equal(closed, want) {
		t.Errorf("closed %q, want %q (the last opened first)", closed, want)
	}
	pgtest.WaitNoConnections(t, url, "mnv-svctest%")
}

// TestRunServesAndCloses: Run runs what Go and Loop added beside the server until its context
// ends, then closes everything; an error from one of them ends Run with it.
func TestRunServesAndCloses(t *testing.T) {
	url := pgtest.NewDatabase(t)
	for _, tt := range []struct {
		name    string
		fail    error
		wantErr bool
	}{
		{"until the context ends", nil, false},
		{"until a task fails", errors.New("task failed"), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			b, err := service.Open(ctx, testConfig(url), deps(t, testSchema(thingsSQL, nil), prometheus.NewRegistry()))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.NewServer(service.ServerOptions{Policy: auth.Policy{}}); err != nil {
				_ = b.Close()
				t.Fatal(err)
			}
			looped := make(chan struct{})
			b.Loop(func(ctx context.Context) { close(looped); <-ctx.Done() })
			b.Go(func(ctx context.Context) error {
				<-looped
				if tt.fail != nil {
					return tt.fail
				}
				<-ctx.Done()
				return nil
			})
			lis, err := b.Listen()
			if err != nil {
				_ = b.Close()
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- b.Run(ctx, lis) }()
			<-looped
			if tt.fail == nil {
				cancel()
			}
			select {
			case err := <-done:
				if tt.wantErr != (err != nil) || tt.wantErr && !errors.Is(err, tt.fail) {
					t.Fatalf("Run = %v, want error %v", err, tt.fail)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Run did not return")
			}
			pgtest.WaitNoConnections(t, url, "mnv-svctest%")
			if err := b.Close(); err != nil {
				t.Errorf("Close after Run = %v, want nothing left to close", err)
			}
		})
	}
}

// TestOpenFailsClosed: an Open that fails closes what it had opened, and says why.
func TestOpenFailsClosed(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		edit    func(*service.Config)
		schema  service.Schema
		twice   bool // open twice on one registry: the second registers its metrics again
		wantErr string
	}{
		{"malformed data keys, before anything opens", func(c *service.Config) { c.DataKeys = "nonsense" }, testSchema(thingsSQL, nil), false, "MNV_DATA_KEYS:"},
		{"an unreachable database", func(c *service.Config) { c.DatabaseURL = "postgres://127.0.0.1:1/none?connect_timeout=2" }, testSchema(thingsSQL, nil), false, "ping database"},
		{"a migration that fails", nil, testSchema(`CREATE TABLE nowhere.things (id int);`, nil), false, "migrate svctest (schema)"},
		{"Then fails", nil, testSchema(thingsSQL, func(context.Context, *pgxpool.Pool, *zap.Logger) error { return errors.New("then failed") }), false, "then failed"},
		{"metrics registered twice", nil, testSchema(thingsSQL, nil), true, "register metrics"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := pgtest.NewDatabase(t)
			cfg := testConfig(url)
			if tt.edit != nil {
				tt.edit(&cfg)
			}
			reg := prometheus.NewRegistry()
			if tt.twice {
				first, err := service.Open(ctx, cfg, deps(t, tt.schema, reg))
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = first.Close() }()
			}
			b, err := service.Open(ctx, cfg, deps(t, tt.schema, reg))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				if b != nil {
					_ = b.Close()
				}
				t.Fatalf("Open = %v, want an error containing %q", err, tt.wantErr)
			}
			if b != nil {
				t.Error("a failed Open returned its Base")
			}
			if !tt.twice {
				pgtest.WaitNoConnections(t, url, "mnv-svctest%")
			}
		})
	}
}

// TestMigrate: the migrate command applies the schema and leaves no connection.
func TestMigrate(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	if err := service.Migrate(ctx, url, testSchema(thingsSQL, nil), zaptest.NewLogger(t)); err != nil {
		t.Fatal(err)
	}
	pgtest.WaitNoConnections(t, url, "mnv-svctest%")
	b, err := service.Open(ctx, testConfig(url), deps(t, testSchema(thingsSQL, nil), nil))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	if _, err := b.Pool.Exec(ctx, `INSERT INTO svctest.things VALUES (gen_random_uuid(), 1)`); err != nil {
		t.Fatalf("the migrated table: %v", err)
	}
}
