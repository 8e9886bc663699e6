// Package pg holds what every service needs of PostgreSQL: a pool with explicit limits, schema
// migrations from embedded SQL, transaction (plain and piped) and savepoint callbacks, SQLSTATE
// helpers, the pool's metrics (PoolCollector), and a span per query when tracing is on.
package pg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"

	"github.com/mnvhq/mnv/services/platform/tenancy"
	"github.com/mnvhq/mnv/services/platform/tracing"
)

// PoolConfig sets the limits of a pool. Zero values take the defaults.
type PoolConfig struct {
	MaxConns        int32
	MinConns        int32
	MaxConnLifetime time.Duration
	// ApplicationName shows in pg_stat_activity, so an operator can tell the services apart.
	ApplicationName string
	// Batches is for a pool that runs a few statements over arrays of varying length, each row
	// found by a key (group-commit batches). Its plans never use a sequential scan, as the table
	// may have been small when the statistics were taken (a record plan made on a fresh database
	// took 105 ms a call once the sessions had grown); no statement of such a pool needs one.
	// How its statements are planned follows from how they name clients (Spread). Not for a
	// pool of ad hoc reads.
	Batches bool
	// Spread is how the batch statements of a Batches pool name their clients
	// (docs/operations.md#past-one-postgresql). Together, a statement joins its items' clients:
	// its plan does not depend on which clients a batch holds, so it is planned once and kept
	// (force_generic_plan); planning every call cost about as much as executing, in make bench's
	// verifies. PerClient, a statement names one client (client_id = $n), which a generic plan
	// costs for an average client: for one client far larger than the others it read every
	// session of the client per batch (make bench, C verify one: 118 req/s with generic plans,
	// 943 with custom ones), so each call is planned with its values (force_custom_plan).
	Spread tenancy.Spread
}

// Open connects a pool to url and checks that the server answers.
func Open(ctx context.Context, url string, c PoolConfig) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The parse error may quote the URL, password included.
		return nil, errors.New("database url does not parse")
	}
	cfg.MaxConns = 16
	if c.MaxConns > 0 {
		cfg.MaxConns = c.MaxConns
	}
	if c.MinConns > 0 {
		cfg.MinConns = c.MinConns
	}
	cfg.MaxConnLifetime = time.Hour
	if c.MaxConnLifetime > 0 {
		cfg.MaxConnLifetime = c.MaxConnLifetime
	}
	cfg.MaxConnIdleTime = 5 * time.Minute
	if c.ApplicationName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = c.ApplicationName
	}
	if c.Batches {
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
		if c.Spread == tenancy.PerClient {
			cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
		}
		cfg.ConnConfig.RuntimeParams["enable_seqscan"] = "off"
	}
	if tracing.Enabled() {
		// A span per query, batch, COPY and prepare, as a child of the request's span (a query
		// outside any traced request, a worker's poll, records none); the SQL text only, never
		// its arguments. Pool acquires are left out: a span each would double every trace, and
		// the pool's gauges (PoolCollector) show saturation. The tracer lives here, not in
		// tracing, so a process without a database (the gateway) links no database driver.
		cfg.ConnConfig.Tracer = otelpgx.NewTracer(otelpgx.WithDisableAcquireTracer())
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	return pool, nil
}

var schemaName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// Migrations is one set of numbered migrations (files NNN_name.sql) with its own version table
// (schema.<Name>_version). A service has its own set ("schema"); a platform package that needs
// tables in every service's schema (idempotency keys) brings another. The SQL may refer to the
// schema as {{.schema}}.
type Migrations struct {
	Name string
	FS   fs.FS
}

// Migrate brings schema up to the newest migration of each set, in order, run by tern. The
// schema and the version tables are created when missing. Concurrent replicas starting together
// are serialised by advisory locks, so each migration runs once.
func Migrate(ctx context.Context, pool *pgxpool.Pool, schema string, fsys fs.FS, more ...Migrations) error {
	if !schemaName.MatchString(schema) {
		return fmt.Errorf("migrate: bad schema name %q", schema)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: acquire: %w", schema, err)
	}
	defer conn.Release()

	// CREATE SCHEMA IF NOT EXISTS is not safe against a concurrent twin; the lock makes it so.
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext('mnv.migrate.' || $1))`, schema); err != nil {
		return fmt.Errorf("migrate %s: lock: %w", schema, err)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext('mnv.migrate.' || $1))`, schema)
	}()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
		return fmt.Errorf("migrate %s: create schema: %w", schema, err)
	}
	for _, set := range append([]Migrations{{Name: "schema", FS: fsys}}, more...) {
		if files, err := migrate.FindMigrations(set.FS); err != nil {
			return fmt.Errorf("migrate %s (%s): %w", schema, set.Name, err)
		} else if len(files) == 0 {
			// A service may have no tables of its own yet and still use a platform set.
			continue
		}
		m, err := migrate.NewMigrator(ctx, conn.Conn(), schema+"."+set.Name+"_version")
		if err != nil {
			return fmt.Errorf("migrate %s: %w", schema, err)
		}
		m.Data["schema"] = schema
		if err := m.LoadMigrations(set.FS); err != nil {
			return fmt.Errorf("migrate %s (%s): load: %w", schema, set.Name, err)
		}
		if err := m.Migrate(ctx); err != nil {
			return fmt.Errorf("migrate %s (%s): %w", schema, set.Name, err)
		}
	}
	return nil
}

// DB is what both a pool and a transaction offer, so a store method serves either.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// InTx runs fn in a transaction, committing when fn returns nil and rolling back otherwise.
func InTx(ctx context.Context, pool *pgxpool.Pool, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, pool, fn)
}

// ErrNoTx is work that needs a transaction (a savepoint, a lock held until commit) given a
// pool: a bug of its caller.
var ErrNoTx = errors.New("pg: needs a transaction")

// InSavepoint runs fn inside a savepoint of the transaction db, released when fn returns nil
// and rolled back to otherwise: fn's writes are then undone and the transaction goes on, even
// after a statement of fn failed. What fn writes commits with the transaction, not before. fn
// gets the savepoint as a DB; a transaction is one connection, so statements fn runs through
// db are the savepoint's too. A db that is not a transaction is ErrNoTx, fn not run.
func InSavepoint(ctx context.Context, db DB, fn func(db DB) error) error {
	tx, ok := db.(pgx.Tx)
	if !ok {
		return fmt.Errorf("savepoint: %w", ErrNoTx)
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	if err := fn(sp); err != nil {
		// The caller's transaction goes on after this, so a failed rollback must be told: it
		// would go on with fn's writes, or aborted.
		if rerr := sp.Rollback(ctx); rerr != nil {
			return errors.Join(err, fmt.Errorf("roll back to savepoint: %w", rerr))
		}
		return err
	}
	if err := sp.Commit(ctx); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}

// SQLSTATE codes we act on.
const (
	codeUniqueViolation = "23505"
	codeFKViolation     = "23503"
)

// IsUniqueViolation reports whether err is a unique violation, of constraint when it is not
// empty.
func IsUniqueViolation(err error, constraint string) bool {
	return isCode(err, codeUniqueViolation, constraint)
}

// IsForeignKeyViolation reports whether err is a foreign-key violation.
func IsForeignKeyViolation(err error) bool { return isCode(err, codeFKViolation, "") }

func isCode(err error, code, constraint string) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != code {
		return false
	}
	return constraint == "" || pgErr.ConstraintName == constraint
}
