// Package app composes the connect service: configuration, database, the domain, the import
// and delivery workers and the gRPC server. The service's own binary and the all-in-one
// developer binary both start it through here.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	"github.com/mnvhq/mnv/services/connect/internal/delivery"
	"github.com/mnvhq/mnv/services/connect/internal/imports"
	"github.com/mnvhq/mnv/services/connect/internal/integrations"
	"github.com/mnvhq/mnv/services/connect/internal/profiles"
	"github.com/mnvhq/mnv/services/connect/internal/server"
	"github.com/mnvhq/mnv/services/connect/internal/webhook"
	"github.com/mnvhq/mnv/services/connect/migrations"
	"github.com/mnvhq/mnv/services/platform/accountsclient"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
	"github.com/mnvhq/mnv/services/platform/idempotency"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/phone"
)

// Schema is the Postgres schema the service owns.
const Schema = "connect"

// Config is the service's configuration.
type Config struct {
	// GRPCAddr is where the gRPC server listens (MNV_CONNECT_GRPC_ADDR).
	GRPCAddr string
	// DatabaseURL (MNV_CONNECT_DATABASE_URL, else DATABASE_URL).
	DatabaseURL string
	// DBMaxConns bounds the pool (MNV_CONNECT_DB_MAX_CONNS).
	DBMaxConns int
	// AccountsAddr is where accounts listens (MNV_ACCOUNTS_ADDR).
	AccountsAddr string
	// InternalToken authenticates calls between services (MNV_INTERNAL_TOKEN[_FILE]).
	InternalToken string
	// DataKeys seal numbers and integration credentials (MNV_DATA_KEYS[_FILE]).
	DataKeys string
	// NumberHashKey keys the numbers' lookup hash; the same as verification's
	// (MNV_NUMBER_HASH_KEY[_FILE]).
	NumberHashKey string
	// WebhookAllowHTTP, WebhookAllowPrivate and WebhookAllowedNets relax the SSRF policy of
	// integration endpoints (MNV_WEBHOOK_ALLOW_HTTP, MNV_WEBHOOK_ALLOW_PRIVATE,
	// MNV_WEBHOOK_ALLOWED_NETS): never for production.
	WebhookAllowHTTP    bool
	WebhookAllowPrivate bool
	WebhookAllowedNets  []netip.Prefix
	// WebhookTimeout bounds one delivery (MNV_WEBHOOK_TIMEOUT).
	WebhookTimeout time.Duration
	// DeliveryWorkers run in parallel (MNV_DELIVERY_WORKERS).
	DeliveryWorkers int
	// DeliveryBackoff is the first retry delay, doubled each attempt up to a minute
	// (MNV_DELIVERY_BACKOFF).
	DeliveryBackoff time.Duration
	// ImportLease is how long an import job stays with a worker that stops reporting
	// progress before another worker resumes it (MNV_IMPORT_LEASE). One batch must fit in it.
	ImportLease time.Duration
	// ShutdownTimeout bounds the graceful stop (MNV_SHUTDOWN_TIMEOUT).
	ShutdownTimeout time.Duration
}

// DefaultConfig is the configuration with every default set and no secrets.
func DefaultConfig() Config {
	return Config{
		GRPCAddr: "127.0.0.1:9093", DBMaxConns: 32, AccountsAddr: "127.0.0.1:9091",
		WebhookTimeout: 10 * time.Second, DeliveryWorkers: 8, DeliveryBackoff: 2 * time.Second,
		ImportLease: 2 * time.Minute, ShutdownTimeout: 15 * time.Second,
	}
}

// databaseVar overrides DATABASE_URL for this service alone.
const databaseVar = "MNV_CONNECT_DATABASE_URL"

// DatabaseURL reads the database URL alone: all that `migrate` needs, so a migration step
// holds no other secret.
func DatabaseURL(env *config.Env) (string, error) {
	u := env.DatabaseURL(databaseVar)
	return u, env.Err()
}

// LoadConfig reads the configuration from env over the defaults.
func LoadConfig(env *config.Env) (Config, error) {
	c := DefaultConfig()
	c.GRPCAddr = env.String("MNV_CONNECT_GRPC_ADDR", c.GRPCAddr)
	c.DatabaseURL = env.DatabaseURL(databaseVar)
	c.DBMaxConns = env.Int("MNV_CONNECT_DB_MAX_CONNS", c.DBMaxConns)
	c.AccountsAddr = env.String("MNV_ACCOUNTS_ADDR", c.AccountsAddr)
	c.InternalToken = env.Secret("MNV_INTERNAL_TOKEN")
	c.DataKeys = env.Secret("MNV_DATA_KEYS")
	c.NumberHashKey = env.Secret("MNV_NUMBER_HASH_KEY")
	c.WebhookAllowHTTP = env.Bool("MNV_WEBHOOK_ALLOW_HTTP", false)
	c.WebhookAllowPrivate = env.Bool("MNV_WEBHOOK_ALLOW_PRIVATE", false)
	for _, s := range splitList(env.String("MNV_WEBHOOK_ALLOWED_NETS", "")) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return c, fmt.Errorf("MNV_WEBHOOK_ALLOWED_NETS: %q is not a CIDR", s)
		}
		c.WebhookAllowedNets = append(c.WebhookAllowedNets, p.Masked())
	}
	c.WebhookTimeout = env.Duration("MNV_WEBHOOK_TIMEOUT", c.WebhookTimeout)
	c.DeliveryWorkers = env.Int("MNV_DELIVERY_WORKERS", c.DeliveryWorkers)
	c.DeliveryBackoff = env.Duration("MNV_DELIVERY_BACKOFF", c.DeliveryBackoff)
	c.ImportLease = env.Duration("MNV_IMPORT_LEASE", c.ImportLease)
	c.ShutdownTimeout = env.Duration("MNV_SHUTDOWN_TIMEOUT", c.ShutdownTimeout)
	env.Require("MNV_INTERNAL_TOKEN", c.InternalToken)
	env.Require("MNV_DATA_KEYS", c.DataKeys)
	env.Require("MNV_NUMBER_HASH_KEY", c.NumberHashKey)
	if err := env.Err(); err != nil {
		return c, err
	}
	return c, c.Validate()
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// Validate checks values that parse but make no sense.
func (c Config) Validate() error {
	var errs []error
	if c.DeliveryWorkers < 1 || c.DeliveryWorkers > 256 {
		errs = append(errs, errors.New("MNV_DELIVERY_WORKERS: must be between 1 and 256"))
	}
	if c.WebhookTimeout < 100*time.Millisecond || c.DeliveryBackoff < 10*time.Millisecond {
		errs = append(errs, errors.New("MNV_WEBHOOK_TIMEOUT, MNV_DELIVERY_BACKOFF: too small"))
	}
	if c.ImportLease < time.Second {
		errs = append(errs, errors.New("MNV_IMPORT_LEASE: must be at least 1s"))
	}
	if c.DBMaxConns < 2 || c.DBMaxConns > 1000 {
		errs = append(errs, errors.New("MNV_CONNECT_DB_MAX_CONNS: must be between 2 and 1000"))
	}
	return errors.Join(errs...)
}

// App is a running connect service.
type App struct {
	cfg      Config
	pool     *pgxpool.Pool
	accounts *accountsclient.Client
	server   *grpcserver.Server
	imports  *imports.Service
	delivery *delivery.Worker
	idem     *idempotency.Store
}

// Migrate applies the schema's migrations and returns: the `connect migrate` command, run once
// before a new version serves (a Kubernetes init step), so replicas starting together do not
// all queue on the migration lock. New migrates too, so a lone process needs no extra step.
func Migrate(ctx context.Context, databaseURL string, log *zap.Logger) error {
	pool, err := pg.Open(ctx, databaseURL, pg.PoolConfig{MaxConns: 2, ApplicationName: "mnv-connect-migrate"})
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
	return pg.Migrate(ctx, pool, Schema, migrations.FS, idempotency.Migrations())
}

// New connects to the database and accounts, migrates the schema and builds the server.
func New(ctx context.Context, cfg Config, log *zap.Logger, reg prometheus.Registerer) (*App, error) {
	keyring, err := crypto.ParseKeyring(cfg.DataKeys)
	if err != nil {
		return nil, fmt.Errorf("MNV_DATA_KEYS: %w", err)
	}
	hasher, err := phone.NewHasher([]byte(cfg.NumberHashKey))
	if err != nil {
		return nil, fmt.Errorf("MNV_NUMBER_HASH_KEY: %w", err)
	}
	accounts, err := accountsclient.Dial(cfg.AccountsAddr, cfg.InternalToken)
	if err != nil {
		return nil, err
	}
	pool, err := pg.Open(ctx, cfg.DatabaseURL, pg.PoolConfig{MaxConns: int32(cfg.DBMaxConns), ApplicationName: "mnv-connect"})
	if err != nil {
		_ = accounts.Close()
		return nil, err
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		_ = accounts.Close()
		return nil, err
	}
	go profiles.Warm()
	importMetrics, err := imports.NewMetrics(reg)
	if err != nil {
		pool.Close()
		_ = accounts.Close()
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	deliveryMetrics, err := delivery.NewMetrics(reg)
	if err == nil {
		err = pg.RegisterPool(reg, Schema, pool)
	}
	if err != nil {
		pool.Close()
		_ = accounts.Close()
		return nil, fmt.Errorf("register metrics: %w", err)
	}

	numbers := profiles.Numbers{Keyring: keyring, Hasher: hasher}
	policy := webhook.Policy{AllowHTTP: cfg.WebhookAllowHTTP, AllowPrivate: cfg.WebhookAllowPrivate, AllowedNets: cfg.WebhookAllowedNets}
	idem := idempotency.New(pool, Schema, keyring, log, server.IdempotentMethods()...)
	profs := profiles.New(pool, numbers, accounts, idem)
	imps := imports.New(pool, numbers, imports.Config{Poll: 500 * time.Millisecond, Lease: cfg.ImportLease}, log)
	worker := delivery.New(pool, numbers, webhook.NewClient(policy, cfg.WebhookTimeout), delivery.Config{
		Workers: cfg.DeliveryWorkers, Poll: 500 * time.Millisecond, Lease: cfg.WebhookTimeout + time.Minute,
		BackoffBase: cfg.DeliveryBackoff, BackoffMax: webhook.MaxBackoff, MaxAttempts: webhook.MaxAttempts,
	}, log)
	imps.Metrics, worker.Metrics = importMetrics, deliveryMetrics
	srv, err := grpcserver.New(grpcserver.Options{
		Logger:          log,
		Registerer:      reg,
		Guard:           auth.NewGuard(server.Policy(), accounts, auth.NewServiceTokens(cfg.InternalToken, "")),
		Unary:           []grpc.UnaryServerInterceptor{idem.UnaryInterceptor()},
		ShutdownTimeout: cfg.ShutdownTimeout,
	})
	if err != nil {
		pool.Close()
		_ = accounts.Close()
		return nil, err
	}
	connectv1.RegisterConnectServiceServer(srv, &server.Server{
		Profiles: profs, Imports: imps, Integrations: integrations.New(pool, keyring, policy), Log: log,
	})
	connectv1.RegisterConnectInternalServiceServer(srv, &server.Internal{Profiles: profs, Log: log})
	return &App{cfg: cfg, pool: pool, accounts: accounts, server: srv, imports: imps, delivery: worker, idem: idem}, nil
}

// Listen opens the configured gRPC address.
func (a *App) Listen() (net.Listener, error) {
	lis, err := net.Listen("tcp", a.cfg.GRPCAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", a.cfg.GRPCAddr, err)
	}
	return lis, nil
}

// Run serves on lis and runs the import and delivery workers until ctx ends, then shuts down
// gracefully.
func (a *App) Run(ctx context.Context, lis net.Listener) error {
	defer a.pool.Close()
	defer func() { _ = a.accounts.Close() }()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { a.imports.Run(ctx); return nil })
	g.Go(func() error { a.delivery.Run(ctx); return nil })
	g.Go(func() error { a.idem.Run(ctx); return nil })
	g.Go(func() error { return a.server.Serve(ctx, lis) })
	return g.Wait()
}
