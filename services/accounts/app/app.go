// Package app composes the accounts service: configuration, database, domain and gRPC server.
// The service's own binary (cmd/accounts) and the all-in-one developer binary both start it
// through here.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/accounts/internal/clients"
	"github.com/mnvhq/mnv/services/accounts/internal/credentials"
	"github.com/mnvhq/mnv/services/accounts/internal/principals"
	"github.com/mnvhq/mnv/services/accounts/internal/server"
	"github.com/mnvhq/mnv/services/accounts/internal/store"
	"github.com/mnvhq/mnv/services/accounts/migrations"
	"github.com/mnvhq/mnv/services/connect/connectclient"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/grpcclient"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
	"github.com/mnvhq/mnv/services/platform/idempotency"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/lifecycle"
	"github.com/mnvhq/mnv/services/platform/outbox"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/ratelimit"
	"github.com/mnvhq/mnv/services/platform/tenancy"
	"github.com/mnvhq/mnv/services/platform/tracing"
)

// Schema is the Postgres schema the service owns.
const Schema = "accounts"

// Config is the service's configuration.
type Config struct {
	// GRPCAddr is where the gRPC server listens (MNV_ACCOUNTS_GRPC_ADDR).
	GRPCAddr string
	// DatabaseURL (MNV_ACCOUNTS_DATABASE_URL, else DATABASE_URL).
	DatabaseURL string
	// DBMaxConns bounds the pool (MNV_ACCOUNTS_DB_MAX_CONNS).
	DBMaxConns int
	// Pepper keys the fingerprints of credentials (MNV_PEPPER or MNV_PEPPER_FILE).
	Pepper string
	// DataKeys seal personal data at rest (MNV_DATA_KEYS or MNV_DATA_KEYS_FILE): "id:base64,...",
	// the first one current.
	DataKeys string
	// InternalCallers are the digests of the tokens of the services that call accounts'
	// internal methods, by caller (MNV_INTERNAL_CALLERS).
	InternalCallers auth.Callers
	// Transport is the gRPC server's TLS and health port (MNV_GRPC_TLS_CERT, MNV_GRPC_TLS_KEY,
	// MNV_GRPC_HEALTH_ADDR).
	Transport grpcserver.Transport
	// AdminToken authenticates the operator (MNV_ADMIN_TOKEN[_FILE]).
	AdminToken string
	// Prices override the default prices (MNV_PRICES), e.g. "VERIFICATION=2,STUCK_PLUS_REVEAL=0".
	Prices string
	// ClientRate and ClientBurst bound the requests per second of each client credential, API
	// key or SDK token (MNV_CLIENT_RATE, MNV_CLIENT_BURST); a rate of 0 disables the limit.
	ClientRate  float64
	ClientBurst int
	// RedisURL shares the rate limits between replicas (MNV_REDIS_URL[_FILE]); empty: each
	// replica keeps its own.
	RedisURL string
	// Jobs configures the service's River queue (MNV_JOBS_RESCUE_AFTER).
	Jobs jobs.Config
	// ShutdownTimeout bounds the graceful stop (MNV_SHUTDOWN_TIMEOUT).
	ShutdownTimeout time.Duration
	// ConnectAddr is where connect listens, which delivers accounts' events to the clients'
	// webhook endpoints (MNV_CONNECT_ADDR). Empty: events are still written with their facts,
	// and wait in accounts' queue until a process with an address forwards them.
	ConnectAddr string
	// InternalToken is accounts' own credential, presented to connect (MNV_INTERNAL_TOKEN[_FILE]);
	// required when ConnectAddr is set.
	InternalToken string
	// TLSCAFile, when set, makes the calls to connect TLS, verified against it (MNV_GRPC_TLS_CA).
	TLSCAFile string
	// LowBalance is the balance.low threshold of the clients without one of their own
	// (MNV_LOW_BALANCE_THRESHOLD); 0 sends none.
	LowBalance int64
	// ExpiryNotice is how long before a balance expires balance.expiring is sent
	// (MNV_BALANCE_EXPIRY_NOTICE); ExpiryCheckEvery is how often the elected replica looks
	// (MNV_BALANCE_EXPIRY_CHECK_EVERY).
	ExpiryNotice     time.Duration
	ExpiryCheckEvery time.Duration
}

// DefaultConfig is the configuration with every default set and no secrets.
func DefaultConfig() Config {
	return Config{
		Jobs:     jobs.Config{RescueAfter: jobs.DefaultRescueAfter},
		GRPCAddr: "127.0.0.1:9091", DBMaxConns: 32, ShutdownTimeout: 15 * time.Second, ClientRate: 50, ClientBurst: 100,
		ConnectAddr: "127.0.0.1:9093", ExpiryNotice: 7 * 24 * time.Hour, ExpiryCheckEvery: time.Minute,
	}
}

// databaseVar overrides DATABASE_URL for this service alone.
const databaseVar = "MNV_ACCOUNTS_DATABASE_URL"

// DatabaseURL reads the database URL alone: all that `migrate` needs, so a migration step
// holds no other secret.
func DatabaseURL(env *config.Env) (string, error) {
	u := env.DatabaseURL(databaseVar)
	return u, env.Err()
}

// LoadConfig reads the configuration from env over the defaults.
func LoadConfig(env *config.Env) (Config, error) {
	c := DefaultConfig()
	c.GRPCAddr = env.String("MNV_ACCOUNTS_GRPC_ADDR", c.GRPCAddr)
	c.DatabaseURL = env.DatabaseURL(databaseVar)
	c.DBMaxConns = env.Int("MNV_ACCOUNTS_DB_MAX_CONNS", c.DBMaxConns)
	c.Pepper = env.Secret("MNV_PEPPER")
	c.DataKeys = env.Secret("MNV_DATA_KEYS")
	c.AdminToken = env.Secret("MNV_ADMIN_TOKEN")
	c.Prices = env.String("MNV_PRICES", "")
	c.ClientRate = env.Float("MNV_CLIENT_RATE", c.ClientRate)
	c.ClientBurst = env.Int("MNV_CLIENT_BURST", c.ClientBurst)
	c.RedisURL = env.Secret("MNV_REDIS_URL")
	c.ShutdownTimeout = env.Duration("MNV_SHUTDOWN_TIMEOUT", c.ShutdownTimeout)
	c.Jobs = jobs.LoadConfig(env)
	c.ConnectAddr = env.String("MNV_CONNECT_ADDR", c.ConnectAddr)
	c.InternalToken = env.Secret("MNV_INTERNAL_TOKEN")
	c.TLSCAFile = env.String("MNV_GRPC_TLS_CA", "")
	c.LowBalance = int64(env.Int("MNV_LOW_BALANCE_THRESHOLD", int(c.LowBalance)))
	c.ExpiryNotice = env.Duration("MNV_BALANCE_EXPIRY_NOTICE", c.ExpiryNotice)
	c.ExpiryCheckEvery = env.Duration("MNV_BALANCE_EXPIRY_CHECK_EVERY", c.ExpiryCheckEvery)
	if c.ConnectAddr != "" {
		env.Require("MNV_INTERNAL_TOKEN", c.InternalToken)
	}
	env.Require("MNV_PEPPER", c.Pepper)
	env.Require("MNV_DATA_KEYS", c.DataKeys)
	env.Require("MNV_ADMIN_TOKEN", c.AdminToken)
	callers, cerr := auth.LoadCallers(env)
	transport, terr := grpcserver.LoadTransport(env)
	c.InternalCallers, c.Transport = callers, transport
	if err := errors.Join(env.Err(), cerr, terr); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Validate checks values that parse but make no sense.
func (c Config) Validate() error {
	var errs []error
	if err := c.Jobs.Validate(outbox.AttemptTimeout); err != nil {
		errs = append(errs, err)
	}
	if c.DBMaxConns < 2 || c.DBMaxConns > 1000 {
		errs = append(errs, errors.New("MNV_ACCOUNTS_DB_MAX_CONNS: must be between 2 and 1000"))
	}
	if len(c.AdminToken) < 32 {
		errs = append(errs, errors.New("MNV_ADMIN_TOKEN: must be at least 32 characters"))
	}
	if c.ClientRate < 0 || c.ClientBurst < 1 {
		errs = append(errs, errors.New("MNV_CLIENT_RATE, MNV_CLIENT_BURST: must not be negative (burst at least 1)"))
	}
	if c.LowBalance < 0 || c.LowBalance > billing.MaxAmount {
		errs = append(errs, fmt.Errorf("MNV_LOW_BALANCE_THRESHOLD: must be between 0 and %d", int64(billing.MaxAmount)))
	}
	if c.ExpiryNotice < 0 || c.ExpiryNotice > 365*24*time.Hour {
		errs = append(errs, errors.New("MNV_BALANCE_EXPIRY_NOTICE: must be between 0 and 8760h"))
	}
	if c.ExpiryCheckEvery < time.Second || c.ExpiryCheckEvery > 24*time.Hour {
		errs = append(errs, errors.New("MNV_BALANCE_EXPIRY_CHECK_EVERY: must be between 1s and 24h"))
	}
	if c.InternalToken != "" && c.InternalToken == c.AdminToken {
		errs = append(errs, errors.New("MNV_INTERNAL_TOKEN: is the admin token (MNV_ADMIN_TOKEN); they must differ"))
	}
	if c.InternalCallers.Accepts(c.AdminToken) {
		errs = append(errs, errors.New("MNV_ADMIN_TOKEN: is an internal caller's token (MNV_INTERNAL_CALLERS); they must differ"))
	}
	return errors.Join(errs...)
}

// App is a running accounts service.
type App struct {
	cfg    Config
	server *grpcserver.Server
	creds  *credentials.Service
	idem   *idempotency.Store
	// jobs is the service's River queue: events' forward jobs and the expiry job.
	jobs *jobs.Queue
	// listener feeds the WatchPrincipals streams from the database, over pool.
	listener *pg.Listener
	pool     *pgxpool.Pool
	log      *zap.Logger
	// closer holds what New opened, closed by Run's end or Close.
	closer lifecycle.Closer
}

// Migrate applies the schema's migrations and returns: the `accounts migrate` command, run once
// before a new version serves (a Kubernetes init step), so replicas starting together do not
// all queue on the migration lock. New migrates too, so a lone process needs no extra step.
func Migrate(ctx context.Context, databaseURL string, log *zap.Logger) error {
	pool, err := pg.Open(ctx, databaseURL, pg.PoolConfig{MaxConns: 2, ApplicationName: "mnv-accounts-migrate"})
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := migrate(ctx, pool); err != nil {
		return err
	}
	log.Info("schema migrated", zap.String("schema", Schema))
	return nil
}

func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if err := pg.Migrate(ctx, pool, Schema, migrations.FS, idempotency.Migrations()); err != nil {
		return err
	}
	if err := jobs.Migrate(ctx, pool, Schema); err != nil {
		return err
	}
	return tenancy.PartitionFromEnv(ctx, pool, migrations.Tables)
}

// New connects to the database, migrates the schema and builds the server. reg receives the
// service's metrics.
func New(ctx context.Context, cfg Config, log *zap.Logger, reg prometheus.Registerer) (_ *App, err error) {
	fp, err := crypto.NewFingerprinter(cfg.Pepper)
	if err != nil {
		return nil, fmt.Errorf("MNV_PEPPER: %w", err)
	}
	keyring, err := crypto.ParseKeyring(cfg.DataKeys)
	if err != nil {
		return nil, fmt.Errorf("MNV_DATA_KEYS: %w", err)
	}
	prices, err := billing.ParsePrices(cfg.Prices)
	if err != nil {
		return nil, fmt.Errorf("MNV_PRICES: %w", err)
	}
	a := &App{cfg: cfg, log: log}
	defer a.closer.CloseOnError(&err)
	pool, err := pg.Open(ctx, cfg.DatabaseURL, pg.PoolConfig{MaxConns: int32(cfg.DBMaxConns), ApplicationName: "mnv-accounts"})
	if err != nil {
		return nil, err
	}
	a.closer.AddFunc("database pool", pool.Close)
	if err := migrate(ctx, pool); err != nil {
		return nil, err
	}

	// The one engine of accounts' background work: the stores write events' forward jobs in
	// the transactions of their facts (box), and the expiry job runs on it.
	queue, err := jobs.New(pool, jobs.Options{Schema: Schema, Log: log, Registerer: reg, RescueAfter: cfg.Jobs.RescueAfter})
	if err != nil {
		return nil, err
	}
	a.jobs = queue
	box := outbox.New(queue)

	// A batch of several clients' debits is one statement per step on one server, one per
	// client on a database distributed by client (docs/operations.md#past-one-postgresql).
	spread, err := tenancy.SpreadOf(ctx, pool, migrations.Tables)
	if err != nil {
		return nil, err
	}
	log.Info("batch statements", zap.Stringer("spread", spread))
	// Each domain package sees the store through its own port; the store is the same.
	credStores := pg.NewStores(pool, func(db pg.DB) credentials.Store { return store.New(db).WithOutbox(box) })
	ledgerStores := pg.NewStores(pool, func(db pg.DB) billing.Store { return store.New(db).WithOutbox(box).WithSpread(spread) })
	clientStores := pg.NewStores(pool, func(db pg.DB) clients.Store { return store.New(db).WithOutbox(box) })
	creds := credentials.New(credStores.Pool(), credStores, fp, log)
	ledger := billing.NewLedger(ledgerStores.Pool(), ledgerStores, prices)
	ledger.LowBalance = cfg.LowBalance
	batchPool, err := pg.Open(ctx, cfg.DatabaseURL, pg.PoolConfig{
		MaxConns: billing.BatchConns, ApplicationName: "mnv-accounts-batch", Batches: true, Spread: spread,
	})
	if err != nil {
		return nil, err
	}
	a.closer.AddFunc("database pool of the debit batches", batchPool.Close)
	ledger.WithBatchStore(pg.NewStores(batchPool, func(db pg.DB) billing.Store { return store.New(db).WithOutbox(box).WithSpread(spread) }).Piped())
	river.AddWorker(queue.Workers(), &billing.ExpiryWorker{Ledger: ledger, Notice: cfg.ExpiryNotice})
	queue.AddQueue(billing.ExpiryQueue, 1)
	queue.AddPeriodic(billing.ExpiryJob(cfg.ExpiryCheckEvery))
	if cfg.ConnectAddr != "" {
		conn, err := grpcclient.Dial(cfg.ConnectAddr, grpcclient.Options{Token: cfg.InternalToken, CAFile: cfg.TLSCAFile})
		if err != nil {
			return nil, fmt.Errorf("dial connect: %w", err)
		}
		a.closer.Add("connect connection", conn.Close)
		outbox.Register(queue.Workers(), connectclient.NewPublisher(conn))
		queue.AddQueue(outbox.Queue, forwardWorkers)
	}
	metrics, err := billing.NewMetrics(reg)
	if err == nil {
		err = pg.RegisterPool(reg, Schema, pool)
	}
	if err == nil {
		err = pg.RegisterPool(reg, Schema+"_batch", batchPool)
	}
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	ledger.Metrics = metrics
	ledger.Traced = tracing.Enabled()
	deps := server.Deps{
		Clients: clients.New(clientStores.Pool(), clientStores, keyring, creds, ledger), Credentials: creds, Ledger: ledger,
		Log: log, Now: time.Now,
	}
	idem := idempotency.New(pool, Schema, keyring, log, server.IdempotentMethods()...)
	limits, err := ratelimit.Open(ratelimit.Options{Service: "accounts", RedisURL: cfg.RedisURL, Log: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	a.closer.Add("rate limits", limits.Close)
	perCredential := limits.Limiter("credential", ratelimit.Limit{Rate: cfg.ClientRate, Burst: cfg.ClientBurst})
	srv, err := grpcserver.New(grpcserver.Options{
		Logger:          log,
		Registerer:      reg,
		Guard:           auth.NewGuard(server.Policy(), creds, auth.NewServiceTokens(cfg.InternalCallers, cfg.AdminToken)),
		Unary:           []grpc.UnaryServerInterceptor{ratelimit.UnaryServerInterceptor(perCredential), idem.UnaryInterceptor()},
		ShutdownTimeout: cfg.ShutdownTimeout,
		Transport:       cfg.Transport,
	})
	if err != nil {
		return nil, err
	}
	a.closer.AddFunc("gRPC server", srv.Stop) // its stream workers run from New on
	accountsv1.RegisterAccountsServiceServer(srv, &server.Public{Deps: deps})
	hub, err := principals.NewHub(reg)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	a.pool = pool
	a.listener = &pg.Listener{Channel: principals.Channel, ApplicationName: "mnv-accounts-listen", Beat: principalBeat, Handler: hub, Log: log}
	accountsv1.RegisterAccountsInternalServiceServer(srv, &server.Internal{Deps: deps, Watch: server.Watch{Hub: hub, HeartbeatEvery: principalBeat}})
	accountsv1.RegisterAccountsAdminServiceServer(srv, &server.Admin{Deps: deps})
	a.server, a.creds, a.idem = srv, creds, idem
	return a, nil
}

// principalBeat is how often the listen connection is proved and the WatchPrincipals streams
// hear a heartbeat; callers stop trusting their cache after a few missed (accountsclient).
const principalBeat = 250 * time.Millisecond

// forwardWorkers forward events to connect at once: a publish is one short call, so a few keep
// up with accounts' events.
const forwardWorkers = 4

// Run serves on lis until ctx ends, then shuts down gracefully and closes what New opened.
func (a *App) Run(ctx context.Context, lis net.Listener) (err error) {
	defer func() { err = errors.Join(err, a.Close()) }()
	if a.cfg.ConnectAddr == "" {
		// Said at every start: nothing else shows that clients' webhooks get nothing from here.
		a.log.Warn("MNV_CONNECT_ADDR is empty: accounts' events (balance, API keys) are written but not forwarded to connect; they wait in the queue until a replica with MNV_CONNECT_ADDR runs")
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return a.jobs.Run(ctx, a.cfg.ShutdownTimeout) })
	g.Go(func() error { a.creds.Run(ctx); return nil })
	g.Go(func() error { a.idem.Run(ctx); return nil })
	g.Go(func() error { a.listener.Listen(ctx, a.pool); return nil })
	g.Go(func() error { return a.server.Serve(ctx, lis) })
	return g.Wait()
}

// Close releases what New opened, the last opened first. Run closes them itself; Close is for an
// App that is never run (say, when Listen fails).
func (a *App) Close() error { return a.closer.Close() }

// Listen opens the configured gRPC address.
func (a *App) Listen() (net.Listener, error) {
	lis, err := net.Listen("tcp", a.cfg.GRPCAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (MNV_ACCOUNTS_GRPC_ADDR): %w", a.cfg.GRPCAddr, err)
	}
	return lis, nil
}
