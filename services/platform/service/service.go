// Package service is the skeleton every mnv service stands on: the part of the configuration
// they all read the same way (Config), and what they all open, in one order, on one closer
// (Base): the database pool, the migrated schema, the job queue, the idempotency store, the
// rate limits and the gRPC server, then run beside the service's own loops and closed the last
// opened first (docs/architecture.md, "Teardown, the last opened first"). A service's app adds
// its domain between them; what wraps accounts' RPCs (its client and the principal cache) is
// accounts' own, so the apps that call accounts dial it themselves, on the Base's closer.
package service

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/grpcclient"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
	"github.com/mnvhq/mnv/services/platform/idempotency"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/lifecycle"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/ratelimit"
	"github.com/mnvhq/mnv/services/platform/tenancy"
)

// Schema is a service's database. Its name (Tables.Name) is the service's too: its pools
// connect as mnv-<name>, its rate limits are kept under its name.
type Schema struct {
	// Tables declares where each table lives on a distributed database (migrations.Tables).
	Tables tenancy.Schema
	// Migrations are the service's own (embedded SQL); idempotency's and River's follow them.
	Migrations fs.FS
	// Then, when set, runs once the migrations are applied (and the test mode's partitioning,
	// tenancy.PartitionFromEnv): what moves the rows an earlier version left behind.
	Then func(ctx context.Context, pool *pgxpool.Pool, log *zap.Logger) error
}

// migrate brings the schema up to date: the service's migrations and idempotency's, River's,
// the test mode's partitioning, then Then.
func (s Schema) migrate(ctx context.Context, pool *pgxpool.Pool, log *zap.Logger) error {
	if err := pg.Migrate(ctx, pool, s.Tables.Name, s.Migrations, idempotency.Migrations()); err != nil {
		return err
	}
	if err := jobs.Migrate(ctx, pool, s.Tables.Name); err != nil {
		return err
	}
	if err := tenancy.PartitionFromEnv(ctx, pool, s.Tables); err != nil {
		return err
	}
	if s.Then != nil {
		return s.Then(ctx, pool, log)
	}
	return nil
}

// Migrate applies s's migrations to the database at url and returns: a service's `migrate`
// command, run once before a new version serves (a Kubernetes init step), so replicas starting
// together do not all queue on the migration lock. Open migrates too, so a lone process needs
// no extra step.
func Migrate(ctx context.Context, url string, s Schema, log *zap.Logger) error {
	pool, err := pg.Open(ctx, url, pg.PoolConfig{MaxConns: 2, ApplicationName: "mnv-" + s.Tables.Name + "-migrate"})
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := s.migrate(ctx, pool, log); err != nil {
		return err
	}
	log.Info("schema migrated", zap.String("schema", s.Tables.Name))
	return nil
}

// Deps is what a service hands Open beside its configuration: what it is, and where it logs
// and counts.
type Deps struct {
	Schema Schema
	// Idempotent names the methods that honour Idempotency-Key (the server's
	// IdempotentMethods).
	Idempotent []string
	Log        *zap.Logger
	// Registerer receives the metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Base is what every service opens, held open until Run ends or Close is called. Its fields are
// the service's to build its domain on; Closer is where the app adds what it opens itself.
type Base struct {
	// Closer closes what the Base and the app opened, the last opened first.
	lifecycle.Closer
	Config  Config
	Keyring *crypto.Keyring
	Pool    *pgxpool.Pool
	// Jobs is the service's River queue: its stores insert jobs from the start; the packages
	// that work jobs add their queues and workers before Run.
	Jobs *jobs.Queue
	// Spread is how the service's stores write a batch of several clients' rows
	// (docs/operations.md#past-one-postgresql): a property of the migrated schema.
	Spread tenancy.Spread
	Idem   *idempotency.Store

	name   string
	log    *zap.Logger
	reg    prometheus.Registerer
	server *grpcserver.Server
	runs   []func(context.Context) error
}

// Open builds the Base: it parses the data keys, opens the pool, migrates the schema, and
// makes the job queue and the idempotency store. What it opened is closed again when it fails.
func Open(ctx context.Context, cfg Config, d Deps) (_ *Base, err error) {
	keyring, err := crypto.ParseKeyring(cfg.DataKeys)
	if err != nil {
		return nil, fmt.Errorf("MNV_DATA_KEYS: %w", err)
	}
	name := d.Schema.Tables.Name
	b := &Base{Config: cfg, Keyring: keyring, name: name, log: d.Log, reg: d.Registerer}
	if b.log == nil {
		b.log = zap.NewNop()
	}
	defer b.CloseOnError(&err)
	if b.Pool, err = b.openPool(ctx, "database pool", name, pg.PoolConfig{MaxConns: int32(cfg.DBMaxConns), ApplicationName: "mnv-" + name}); err != nil {
		return nil, err
	}
	if err := d.Schema.migrate(ctx, b.Pool, b.log); err != nil {
		return nil, err
	}
	if b.Jobs, err = jobs.New(b.Pool, jobs.Options{Schema: name, Log: b.log, Registerer: b.reg, RescueAfter: cfg.Jobs.RescueAfter}); err != nil {
		return nil, err
	}
	// A batch of several clients' rows is one statement on one server, one per client on a
	// database distributed by client (docs/operations.md#past-one-postgresql).
	if b.Spread, err = tenancy.SpreadOf(ctx, b.Pool, d.Schema.Tables); err != nil {
		return nil, err
	}
	b.log.Info("batch statements", zap.Stringer("spread", b.Spread))
	b.Idem = idempotency.New(b.Pool, name, keyring, b.log, d.Idempotent...)
	return b, nil
}

// openPool opens a pool on the service's database, closed by the Base as closeName, its
// gauges registered as metricsName.
func (b *Base) openPool(ctx context.Context, closeName, metricsName string, c pg.PoolConfig) (*pgxpool.Pool, error) {
	pool, err := pg.Open(ctx, b.Config.DatabaseURL, c)
	if err != nil {
		return nil, err
	}
	b.AddFunc(closeName, pool.Close)
	if err := pg.RegisterPool(b.reg, metricsName, pool); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	return pool, nil
}

// OpenBatchPool opens the pool of the service's group-commit batches, of conns connections
// (pg.PoolConfig.Batches, planned as the schema's Spread asks): connections named
// mnv-<service>-batch, gauges <schema>_batch.
func (b *Base) OpenBatchPool(ctx context.Context, conns int32) (*pgxpool.Pool, error) {
	return b.openPool(ctx, "database pool of the batches", b.name+"_batch",
		pg.PoolConfig{MaxConns: conns, ApplicationName: "mnv-" + b.name + "-batch", Batches: true, Spread: b.Spread})
}

// Dial opens a connection to the service called name at addr, with the service's own token
// (Config.Client), closed by the Base.
func (b *Base) Dial(name, addr string) (*grpc.ClientConn, error) {
	conn, err := grpcclient.Dial(addr, b.Config.Client())
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", name, err)
	}
	b.Add(name+" connection", conn.Close)
	return conn, nil
}

// ServerOptions are who the gRPC server admits, beyond its internal callers (Config).
type ServerOptions struct {
	// Policy is the rule of each method (the service's server.Policy()).
	Policy auth.Policy
	// Authenticator resolves client credentials: accounts' credentials, or the principal
	// cache over accounts.
	Authenticator auth.Authenticator
	// AdminToken is the operator's credential; "" admits no operator.
	AdminToken string
	// LimitStreams holds streams to the per-credential limit too, not only unary calls.
	LimitStreams bool
}

// NewServer opens the rate limits and builds the gRPC server with the standard chain
// (grpcserver: request id, logging, metrics, recovery, the guard), then the per-credential
// limit and idempotency; the app registers its services on it. Run serves it.
func (b *Base) NewServer(o ServerOptions) (*grpcserver.Server, error) {
	limits, err := ratelimit.Open(ratelimit.Options{Service: b.name, RedisURL: b.Config.RedisURL, Log: b.log, Registerer: b.reg})
	if err != nil {
		return nil, err
	}
	b.Add("rate limits", limits.Close)
	perCredential := limits.Limiter("credential", ratelimit.Limit{Rate: b.Config.ClientRate, Burst: b.Config.ClientBurst})
	var stream []grpc.StreamServerInterceptor
	if o.LimitStreams {
		stream = append(stream, ratelimit.StreamServerInterceptor(perCredential))
	}
	srv, err := grpcserver.New(grpcserver.Options{
		Logger:          b.log,
		Registerer:      b.reg,
		Guard:           auth.NewGuard(o.Policy, o.Authenticator, auth.NewServiceTokens(b.Config.InternalCallers, o.AdminToken)),
		Unary:           []grpc.UnaryServerInterceptor{ratelimit.UnaryServerInterceptor(perCredential), b.Idem.UnaryInterceptor()},
		Stream:          stream,
		ShutdownTimeout: b.Config.ShutdownTimeout,
		Transport:       b.Config.Transport,
	})
	if err != nil {
		return nil, err
	}
	b.AddFunc("gRPC server", srv.Stop) // its stream workers run from New on
	b.server = srv
	return srv, nil
}

// Go adds run to what Run starts beside the server. An error from it ends Run: the server
// stops, and the others' context ends.
func (b *Base) Go(run func(ctx context.Context) error) { b.runs = append(b.runs, run) }

// Loop is Go for a loop that runs until its context ends.
func (b *Base) Loop(run func(ctx context.Context)) {
	b.Go(func(ctx context.Context) error { run(ctx); return nil })
}

// Listen opens the configured gRPC address.
func (b *Base) Listen() (net.Listener, error) {
	lis, err := net.Listen("tcp", b.Config.GRPCAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (%s): %w", b.Config.GRPCAddr, b.Config.Vars.GRPCAddr, err)
	}
	return lis, nil
}

// Run serves on lis, works the job queue, purges the idempotency keys and runs what Go and
// Loop added until ctx ends, then shuts down gracefully and closes what was opened.
func (b *Base) Run(ctx context.Context, lis net.Listener) (err error) {
	defer func() { err = errors.Join(err, b.Close()) }()
	if b.server == nil {
		return errors.New("service: Run before NewServer")
	}
	g, ctx := errgroup.WithContext(ctx)
	for _, run := range b.runs {
		g.Go(func() error { return run(ctx) })
	}
	g.Go(func() error { return b.Jobs.Run(ctx, b.Config.ShutdownTimeout) })
	g.Go(func() error { b.Idem.Run(ctx); return nil })
	g.Go(func() error { return b.server.Serve(ctx, lis) })
	return g.Wait()
}
