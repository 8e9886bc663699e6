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
	"github.com/riverqueue/river"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	"github.com/mnvhq/mnv/services/accounts/accountsclient"
	"github.com/mnvhq/mnv/services/accounts/accountsclient/principalcache"
	"github.com/mnvhq/mnv/services/connect/internal/crm/integrations"
	"github.com/mnvhq/mnv/services/connect/internal/crm/push"
	"github.com/mnvhq/mnv/services/connect/internal/eventhooks/delivery"
	"github.com/mnvhq/mnv/services/connect/internal/eventhooks/endpoints"
	"github.com/mnvhq/mnv/services/connect/internal/imports"
	"github.com/mnvhq/mnv/services/connect/internal/outbound"
	"github.com/mnvhq/mnv/services/connect/internal/profiles"
	"github.com/mnvhq/mnv/services/connect/internal/retention"
	"github.com/mnvhq/mnv/services/connect/internal/server"
	"github.com/mnvhq/mnv/services/connect/internal/store"
	"github.com/mnvhq/mnv/services/connect/migrations"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/grpcclient"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
	"github.com/mnvhq/mnv/services/platform/idempotency"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/lifecycle"
	"github.com/mnvhq/mnv/services/platform/outbox"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/platform/purge"
	"github.com/mnvhq/mnv/services/platform/ratelimit"
	"github.com/mnvhq/mnv/services/platform/tenancy"
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
	// InternalToken is connect's own credential, presented to accounts
	// (MNV_INTERNAL_TOKEN[_FILE]).
	InternalToken string
	// TLSCAFile, when set, makes the calls to accounts TLS, verified against it
	// (MNV_GRPC_TLS_CA).
	TLSCAFile string
	// InternalCallers are the digests of the callers' tokens (MNV_INTERNAL_CALLERS).
	InternalCallers auth.Callers
	// Transport is the gRPC server's TLS and health port (MNV_GRPC_TLS_CERT, MNV_GRPC_TLS_KEY,
	// MNV_GRPC_HEALTH_ADDR).
	Transport grpcserver.Transport
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
	// AdminToken, when set, lets the operator (mnvctl) call WebhookAdminService; the same
	// credential as accounts' (MNV_ADMIN_TOKEN[_FILE]). Unset: every admin call is refused.
	AdminToken string
	// WebhookSecretOverlap is how long a rotated-out webhook secret keeps signing when the
	// request names no overlap (MNV_WEBHOOK_SECRET_OVERLAP).
	WebhookSecretOverlap time.Duration
	// WebhookTimeout bounds one delivery (MNV_WEBHOOK_TIMEOUT).
	WebhookTimeout time.Duration
	// DeliveryWorkers work the deliveries' River queue in each replica (MNV_DELIVERY_WORKERS).
	DeliveryWorkers int
	// DeliveryPerIntegration bounds the batches of one integration sent at once by a replica,
	// so a slow endpoint holds a few workers (MNV_DELIVERY_PER_INTEGRATION).
	DeliveryPerIntegration int
	// DeliveryBackoff is the first retry delay, doubled each attempt up to a minute
	// (MNV_DELIVERY_BACKOFF).
	DeliveryBackoff time.Duration
	// WebhookWorkers deliver events to webhook endpoints at once in this process
	// (MNV_WEBHOOK_WORKERS); WebhookPerEndpoint of them at most to one endpoint
	// (MNV_WEBHOOK_PER_ENDPOINT), so a slow endpoint never holds them all, and WebhookPerClient
	// at most to one client's endpoints together (MNV_WEBHOOK_PER_CLIENT), so a client with
	// many slow endpoints does not either.
	// WebhookPerClient 0 is half the workers, at least an endpoint's share.
	WebhookWorkers     int
	WebhookPerEndpoint int
	WebhookPerClient   int
	// WebhookBackoff is an event delivery's first retry delay, doubled each attempt up to
	// outbound.MaxBackoff, with jitter (MNV_WEBHOOK_BACKOFF); WebhookMaxAttempts bound its attempts
	// (MNV_WEBHOOK_MAX_ATTEMPTS).
	WebhookBackoff     time.Duration
	WebhookMaxAttempts int
	// WebhookDisableAfter is how long an endpoint may fail without a success before it is
	// disabled (MNV_WEBHOOK_DISABLE_AFTER).
	WebhookDisableAfter time.Duration
	// ImportLease is how long an import job stays with a worker that stops reporting
	// progress before another worker resumes it (MNV_IMPORT_LEASE). One batch must fit in it.
	ImportLease time.Duration
	// EnrichmentSettleAfter is how old an enrichment left PENDING (its charge's outcome
	// unknown) must be before the reconciler settles it (MNV_ENRICHMENT_SETTLE_AFTER); longer
	// than a debit can take, since the reconciler refunds the charge of an erased profile.
	// EnrichmentReconcileEvery is how often it looks (MNV_ENRICHMENT_RECONCILE_EVERY).
	EnrichmentSettleAfter    time.Duration
	EnrichmentReconcileEvery time.Duration
	// ClientRate and ClientBurst bound the requests per second of each client credential
	// (MNV_CLIENT_RATE, MNV_CLIENT_BURST); a rate of 0 disables the limit.
	ClientRate  float64
	ClientBurst int
	// PrincipalCache keeps the principals accounts resolved, dropped when accounts pushes a
	// change (MNV_PRINCIPAL_CACHE_SIZE, MNV_PRINCIPAL_CACHE_MAX_AGE).
	PrincipalCache principalcache.Config
	// RedisURL shares the rate limits between replicas (MNV_REDIS_URL[_FILE]); empty: each
	// replica keeps its own.
	RedisURL string
	// Retention is how long finished deliveries, sync events and finished import jobs are kept
	// (MNV_RETENTION_DELIVERIES, MNV_RETENTION_SYNC_EVENTS, MNV_RETENTION_IMPORT_JOBS; 0 keeps
	// them), purged every PurgeEvery (MNV_PURGE_EVERY).
	Retention  retention.Config
	PurgeEvery time.Duration
	// Jobs configures the service's River queue (MNV_JOBS_RESCUE_AFTER).
	Jobs jobs.Config
	// ShutdownTimeout bounds the graceful stop (MNV_SHUTDOWN_TIMEOUT).
	ShutdownTimeout time.Duration
}

// DefaultConfig is the configuration with every default set and no secrets.
func DefaultConfig() Config {
	return Config{
		Jobs:     jobs.Config{RescueAfter: jobs.DefaultRescueAfter},
		GRPCAddr: "127.0.0.1:9093", DBMaxConns: 32, AccountsAddr: "127.0.0.1:9091",
		WebhookTimeout: 10 * time.Second, WebhookSecretOverlap: endpoints.DefaultOverlap, DeliveryWorkers: 8, DeliveryPerIntegration: 4, DeliveryBackoff: 2 * time.Second,
		ImportLease: 2 * time.Minute, ShutdownTimeout: 15 * time.Second, ClientRate: 50, ClientBurst: 100,
		EnrichmentSettleAfter: time.Minute, EnrichmentReconcileEvery: 5 * time.Second,
		WebhookWorkers: 16, WebhookPerEndpoint: 4, WebhookBackoff: 5 * time.Second, WebhookMaxAttempts: outbound.MaxAttempts,
		WebhookDisableAfter: 72 * time.Hour,
		Retention: retention.Config{
			Deliveries: 7 * 24 * time.Hour, SyncEvents: 90 * 24 * time.Hour, ImportJobs: 90 * 24 * time.Hour,
			WebhookEvents: 30 * 24 * time.Hour,
		},
		PurgeEvery: 10 * time.Minute,
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
	c.TLSCAFile = env.String("MNV_GRPC_TLS_CA", "")
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
	c.AdminToken = env.Secret("MNV_ADMIN_TOKEN")
	c.WebhookSecretOverlap = env.Duration("MNV_WEBHOOK_SECRET_OVERLAP", c.WebhookSecretOverlap)
	c.WebhookTimeout = env.Duration("MNV_WEBHOOK_TIMEOUT", c.WebhookTimeout)
	c.DeliveryWorkers = env.Int("MNV_DELIVERY_WORKERS", c.DeliveryWorkers)
	c.DeliveryPerIntegration = env.Int("MNV_DELIVERY_PER_INTEGRATION", c.DeliveryPerIntegration)
	c.DeliveryBackoff = env.Duration("MNV_DELIVERY_BACKOFF", c.DeliveryBackoff)
	c.WebhookWorkers = env.Int("MNV_WEBHOOK_WORKERS", c.WebhookWorkers)
	c.WebhookPerEndpoint = env.Int("MNV_WEBHOOK_PER_ENDPOINT", c.WebhookPerEndpoint)
	c.WebhookPerClient = env.Int("MNV_WEBHOOK_PER_CLIENT", c.WebhookPerClient)
	c.WebhookBackoff = env.Duration("MNV_WEBHOOK_BACKOFF", c.WebhookBackoff)
	c.WebhookMaxAttempts = env.Int("MNV_WEBHOOK_MAX_ATTEMPTS", c.WebhookMaxAttempts)
	c.WebhookDisableAfter = env.Duration("MNV_WEBHOOK_DISABLE_AFTER", c.WebhookDisableAfter)
	c.ImportLease = env.Duration("MNV_IMPORT_LEASE", c.ImportLease)
	c.EnrichmentSettleAfter = env.Duration("MNV_ENRICHMENT_SETTLE_AFTER", c.EnrichmentSettleAfter)
	c.EnrichmentReconcileEvery = env.Duration("MNV_ENRICHMENT_RECONCILE_EVERY", c.EnrichmentReconcileEvery)
	c.ClientRate = env.Float("MNV_CLIENT_RATE", c.ClientRate)
	c.ClientBurst = env.Int("MNV_CLIENT_BURST", c.ClientBurst)
	c.PrincipalCache = principalcache.LoadConfig(env)
	c.RedisURL = env.Secret("MNV_REDIS_URL")
	c.ShutdownTimeout = env.Duration("MNV_SHUTDOWN_TIMEOUT", c.ShutdownTimeout)
	c.Jobs = jobs.LoadConfig(env)
	c.Retention.Deliveries = env.Duration("MNV_RETENTION_DELIVERIES", c.Retention.Deliveries)
	c.Retention.SyncEvents = env.Duration("MNV_RETENTION_SYNC_EVENTS", c.Retention.SyncEvents)
	c.Retention.ImportJobs = env.Duration("MNV_RETENTION_IMPORT_JOBS", c.Retention.ImportJobs)
	c.Retention.WebhookEvents = env.Duration("MNV_RETENTION_WEBHOOK_EVENTS", c.Retention.WebhookEvents)
	c.PurgeEvery = env.Duration("MNV_PURGE_EVERY", c.PurgeEvery)
	env.Require("MNV_INTERNAL_TOKEN", c.InternalToken)
	env.Require("MNV_DATA_KEYS", c.DataKeys)
	env.Require("MNV_NUMBER_HASH_KEY", c.NumberHashKey)
	callers, cerr := auth.LoadCallers(env)
	transport, terr := grpcserver.LoadTransport(env)
	c.InternalCallers, c.Transport = callers, transport
	if err := errors.Join(env.Err(), cerr, terr); err != nil {
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
	if err := c.Jobs.Validate(c.WebhookTimeout + 30*time.Second); err != nil {
		errs = append(errs, err)
	}
	if c.DeliveryWorkers < 1 || c.DeliveryWorkers > 256 {
		errs = append(errs, errors.New("MNV_DELIVERY_WORKERS: must be between 1 and 256"))
	}
	if c.DeliveryPerIntegration < 1 || c.DeliveryPerIntegration > 256 {
		errs = append(errs, errors.New("MNV_DELIVERY_PER_INTEGRATION: must be between 1 and 256"))
	}
	if c.WebhookTimeout < 100*time.Millisecond || c.DeliveryBackoff < 10*time.Millisecond {
		errs = append(errs, errors.New("MNV_WEBHOOK_TIMEOUT, MNV_DELIVERY_BACKOFF: too small"))
	}
	if c.WebhookWorkers < 1 || c.WebhookWorkers > 256 || c.WebhookPerEndpoint < 1 || c.WebhookPerEndpoint > c.WebhookWorkers ||
		c.WebhookPerClient != 0 && (c.WebhookPerClient < c.WebhookPerEndpoint || c.WebhookPerClient > c.WebhookWorkers) {
		errs = append(errs, errors.New("MNV_WEBHOOK_WORKERS: must be between 1 and 256; MNV_WEBHOOK_PER_ENDPOINT: between 1 and MNV_WEBHOOK_WORKERS; MNV_WEBHOOK_PER_CLIENT: between MNV_WEBHOOK_PER_ENDPOINT and MNV_WEBHOOK_WORKERS"))
	}
	if c.WebhookBackoff < 10*time.Millisecond || c.WebhookBackoff > outbound.MaxBackoff || c.WebhookMaxAttempts < 1 || c.WebhookMaxAttempts > 25 {
		errs = append(errs, errors.New("MNV_WEBHOOK_BACKOFF: must be between 10ms and 30m; MNV_WEBHOOK_MAX_ATTEMPTS: between 1 and 25"))
	}
	if c.WebhookDisableAfter < time.Second && c.WebhookDisableAfter != 0 {
		errs = append(errs, errors.New("MNV_WEBHOOK_DISABLE_AFTER: must be at least 1s (0 never disables)"))
	}
	if c.ImportLease < time.Second {
		errs = append(errs, errors.New("MNV_IMPORT_LEASE: must be at least 1s"))
	}
	if c.EnrichmentSettleAfter < 100*time.Millisecond || c.EnrichmentReconcileEvery < 100*time.Millisecond {
		errs = append(errs, errors.New("MNV_ENRICHMENT_SETTLE_AFTER, MNV_ENRICHMENT_RECONCILE_EVERY: must be at least 100ms"))
	}
	if c.DBMaxConns < 2 || c.DBMaxConns > 1000 {
		errs = append(errs, errors.New("MNV_CONNECT_DB_MAX_CONNS: must be between 2 and 1000"))
	}
	if err := c.PrincipalCache.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.ClientRate < 0 || c.ClientBurst < 1 {
		errs = append(errs, errors.New("MNV_CLIENT_RATE, MNV_CLIENT_BURST: must not be negative (burst at least 1)"))
	}
	if c.Retention.Deliveries < 0 || c.Retention.SyncEvents < 0 || c.Retention.ImportJobs < 0 || c.Retention.WebhookEvents < 0 || c.PurgeEvery < 100*time.Millisecond {
		errs = append(errs, errors.New("MNV_RETENTION_*: must not be negative (0 keeps); MNV_PURGE_EVERY: at least 100ms"))
	}
	if c.WebhookSecretOverlap < 0 || c.WebhookSecretOverlap > endpoints.MaxOverlap {
		errs = append(errs, errors.New("MNV_WEBHOOK_SECRET_OVERLAP: must be between 0 and 168h"))
	}
	if c.AdminToken != "" && len(c.AdminToken) < 32 {
		errs = append(errs, errors.New("MNV_ADMIN_TOKEN: must be at least 32 characters"))
	}
	if c.AdminToken != "" && c.InternalCallers.Accepts(c.AdminToken) {
		errs = append(errs, errors.New("MNV_ADMIN_TOKEN: is an internal caller's token (MNV_INTERNAL_CALLERS); they must differ"))
	}
	return errors.Join(errs...)
}

// App is a running connect service.
type App struct {
	cfg      Config
	log      *zap.Logger
	server   *grpcserver.Server
	profiles *profiles.Service
	imports  *imports.Service
	// jobs is the service's River queue: the one engine of its background work.
	jobs  *jobs.Queue
	idem  *idempotency.Store
	purge *purge.Runner
	// watch keeps the principal cache's stream from accounts.
	watch func(context.Context)
	// closer holds what New opened, closed by Run's end or Close.
	closer lifecycle.Closer
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
	if err := pg.Migrate(ctx, pool, Schema, migrations.FS, idempotency.Migrations()); err != nil {
		return err
	}
	if err := jobs.Migrate(ctx, pool, Schema); err != nil {
		return err
	}
	return tenancy.PartitionFromEnv(ctx, pool, migrations.Tables)
}

// New connects to the database and accounts, migrates the schema and builds the server.
func New(ctx context.Context, cfg Config, log *zap.Logger, reg prometheus.Registerer) (_ *App, err error) {
	keyring, err := crypto.ParseKeyring(cfg.DataKeys)
	if err != nil {
		return nil, fmt.Errorf("MNV_DATA_KEYS: %w", err)
	}
	hasher, err := phone.NewHasher([]byte(cfg.NumberHashKey))
	if err != nil {
		return nil, fmt.Errorf("MNV_NUMBER_HASH_KEY: %w", err)
	}
	a := &App{cfg: cfg, log: log}
	defer a.closer.CloseOnError(&err)
	accounts, err := accountsclient.Dial(cfg.AccountsAddr, grpcclient.Options{Token: cfg.InternalToken, CAFile: cfg.TLSCAFile})
	if err != nil {
		return nil, err
	}
	a.closer.Add("accounts connection", accounts.Close)
	authn, watch, err := accounts.Cached(cfg.PrincipalCache, reg, log)
	if err != nil {
		return nil, err
	}
	a.watch = watch
	pool, err := pg.Open(ctx, cfg.DatabaseURL, pg.PoolConfig{MaxConns: int32(cfg.DBMaxConns), ApplicationName: "mnv-connect"})
	if err != nil {
		return nil, err
	}
	a.closer.AddFunc("database pool", pool.Close)
	if err := migrate(ctx, pool); err != nil {
		return nil, err
	}
	go profiles.Warm()
	importMetrics, err := imports.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	deliveryMetrics, err := push.NewMetrics(reg)
	if err == nil {
		err = pg.RegisterPool(reg, Schema, pool)
	}
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}

	// The one engine of connect's background work. Stores insert jobs through it from the
	// start (box: events in the transaction of their facts); the packages that work jobs add
	// their queues and workers to it before Run.
	queue, err := jobs.New(pool, jobs.Options{Schema: Schema, Log: log, Registerer: reg, RescueAfter: cfg.Jobs.RescueAfter})
	if err != nil {
		return nil, err
	}
	a.jobs = queue
	box := outbox.New(queue)

	vault := phone.NewVault("connect", keyring, hasher)
	policy := outbound.Policy{AllowHTTP: cfg.WebhookAllowHTTP, AllowPrivate: cfg.WebhookAllowPrivate, AllowedNets: cfg.WebhookAllowedNets}
	idem := idempotency.New(pool, Schema, keyring, log, server.IdempotentMethods()...)
	// Each domain package sees the one store through its own interface. Every store that
	// queues deliveries inserts their jobs in its transaction (WithJobs); the ones that report
	// facts write their events there too (WithOutbox).
	open := func(db pg.DB) *store.Store { return store.New(db).WithJobs(queue).WithOutbox(box) }
	profStores := pg.NewStores(pool, func(db pg.DB) profiles.Store { return open(db).WithAnswers(idem) })
	impStores := pg.NewStores(pool, func(db pg.DB) imports.Store { return open(db) })
	delStores := pg.NewStores(pool, func(db pg.DB) push.Store { return open(db) })
	itStores := pg.NewStores(pool, func(db pg.DB) integrations.Store { return open(db) })
	profs := profiles.New(profStores.Pool(), profStores, vault, accounts, idempotentRequests{})
	imps := imports.New(impStores.Pool(), impStores, vault, keyring, imports.Config{Poll: 500 * time.Millisecond, Lease: cfg.ImportLease}, log)
	// Deliveries are River jobs: MNV_DELIVERY_WORKERS work the queue in this process, at most
	// MNV_DELIVERY_PER_INTEGRATION of one integration at once (the others snoozed), retried
	// with outbound.Backoff up to outbound.MaxAttempts.
	worker := push.New(delStores.Pool(), delStores, vault, keyring, outbound.NewClient(policy, cfg.WebhookTimeout),
		&jobs.KeyLimit{Max: cfg.DeliveryPerIntegration, Snooze: time.Second}, push.Config{
			BackoffBase: cfg.DeliveryBackoff, BackoffMax: outbound.MaxBackoff,
			Timeout: cfg.WebhookTimeout + 30*time.Second, PausedRecheck: 10 * time.Second,
		}, log)
	river.AddWorker(queue.Workers(), worker)
	queue.AddQueue(push.Queue, cfg.DeliveryWorkers)
	// Batches the leasing version left PENDING become jobs once, before this process works any.
	if n, err := worker.Adopt(ctx); err != nil {
		return nil, fmt.Errorf("adopt pending deliveries: %w", err)
	} else if n > 0 {
		log.Info("pending deliveries queued as jobs", zap.Int("count", n))
	}
	imps.Metrics, worker.Metrics = importMetrics, deliveryMetrics

	// Event webhooks: connect's own events and other services' (PublishEvents) go into one
	// intake; its deliveries are River jobs of the webhooks queue.
	evStores := pg.NewStores(pool, func(db pg.DB) delivery.Store { return open(db) })
	intake := delivery.New(evStores.Pool(), evStores, keyring, outbound.NewClient(policy, cfg.WebhookTimeout),
		&jobs.KeyLimit{Max: cfg.WebhookPerEndpoint, Snooze: 100 * time.Millisecond}, delivery.Config{
			MaxAttempts: cfg.WebhookMaxAttempts, Backoff: cfg.WebhookBackoff, DisableAfter: cfg.WebhookDisableAfter, Timeout: cfg.WebhookTimeout,
		}, log)
	intake.ClientLimit = &jobs.KeyLimit{Max: cfg.webhookPerClient(), Snooze: 100 * time.Millisecond}
	if intake.Metrics, err = delivery.NewMetrics(reg); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	river.AddWorker(queue.Workers(), intake.Worker())
	queue.AddQueue(delivery.Queue, cfg.WebhookWorkers)
	outbox.Register(queue.Workers(), localPublisher{intake})
	queue.AddQueue(outbox.Queue, 4)
	limits, err := ratelimit.Open(ratelimit.Options{Service: "connect", RedisURL: cfg.RedisURL, Log: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	a.closer.Add("rate limits", limits.Close)
	perCredential := limits.Limiter("credential", ratelimit.Limit{Rate: cfg.ClientRate, Burst: cfg.ClientBurst})
	srv, err := grpcserver.New(grpcserver.Options{
		Logger:          log,
		Registerer:      reg,
		Guard:           auth.NewGuard(server.Policy(), authn, auth.NewServiceTokens(cfg.InternalCallers, cfg.AdminToken)),
		Unary:           []grpc.UnaryServerInterceptor{ratelimit.UnaryServerInterceptor(perCredential), idem.UnaryInterceptor()},
		Stream:          []grpc.StreamServerInterceptor{ratelimit.StreamServerInterceptor(perCredential)},
		ShutdownTimeout: cfg.ShutdownTimeout,
		Transport:       cfg.Transport,
	})
	if err != nil {
		return nil, err
	}
	a.closer.AddFunc("gRPC server", srv.Stop) // its stream workers run from New on
	connectv1.RegisterConnectServiceServer(srv, &server.Server{
		Profiles: profs, Imports: imps, Integrations: integrations.New(itStores.Pool(), itStores, keyring, policy), Log: log,
	})
	connectv1.RegisterConnectInternalServiceServer(srv, &server.Internal{Profiles: profs, Events: intake, Log: log})
	whStores := pg.NewStores(pool, func(db pg.DB) endpoints.Store { return store.New(db) })
	hooks := endpoints.New(whStores.Pool(), whStores, keyring, policy, endpoints.Config{Overlap: cfg.WebhookSecretOverlap}, intake)
	connectv1.RegisterWebhookServiceServer(srv, &server.Webhooks{Webhooks: hooks, Log: log})
	connectv1.RegisterWebhookAdminServiceServer(srv, &server.WebhookAdmin{Webhooks: hooks, Log: log})
	a.server, a.profiles, a.imports, a.idem = srv, profs, imps, idem
	a.purge = &purge.Runner{Rules: retention.Rules(store.New(pool), cfg.Retention), Every: cfg.PurgeEvery, Log: log}
	return a, nil
}

// localPublisher forwards connect's own events to its intake, in process. A malformed event is
// outbox.ErrRejected, as over gRPC, so its forward is cancelled rather than retried for days.
type localPublisher struct{ s *delivery.Service }

func (p localPublisher) Publish(ctx context.Context, evs []events.Event) error {
	err := p.s.Publish(ctx, evs)
	if fault.Find(err, fault.InvalidArgument) != nil {
		return fmt.Errorf("%w: %w", outbox.ErrRejected, err)
	}
	return err
}

// webhookPerClient is WebhookPerClient, its default (0) resolved against the workers.
func (c Config) webhookPerClient() int {
	if c.WebhookPerClient > 0 {
		return c.WebhookPerClient
	}
	return max(c.WebhookPerEndpoint, c.WebhookWorkers/2)
}

// idempotentRequests tells profiles about the idempotent request being handled.
type idempotentRequests struct{}

func (idempotentRequests) Key(ctx context.Context) (string, bool) {
	return idempotency.KeyFromContext(ctx)
}
func (idempotentRequests) Retention() time.Duration { return idempotency.Retention }

// Listen opens the configured gRPC address.
func (a *App) Listen() (net.Listener, error) {
	lis, err := net.Listen("tcp", a.cfg.GRPCAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (MNV_CONNECT_GRPC_ADDR): %w", a.cfg.GRPCAddr, err)
	}
	return lis, nil
}

// Close releases what New opened, the last opened first. Run closes them itself; Close is for an
// App that is never run (say, when Listen fails).
func (a *App) Close() error { return a.closer.Close() }

// Run serves on lis and runs the import workers, the enrichment reconciler and the River
// queue (deliveries, event forwards) until ctx ends, then shuts down gracefully and closes
// what New opened.
func (a *App) Run(ctx context.Context, lis net.Listener) (err error) {
	defer func() { err = errors.Join(err, a.Close()) }()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { a.imports.Run(ctx); return nil })
	g.Go(func() error {
		a.profiles.ReconcileEnrichments(ctx, a.cfg.EnrichmentReconcileEvery, a.cfg.EnrichmentSettleAfter, a.log)
		return nil
	})
	g.Go(func() error { return a.jobs.Run(ctx, a.cfg.ShutdownTimeout) })
	g.Go(func() error { a.idem.Run(ctx); return nil })
	g.Go(func() error { a.purge.Run(ctx); return nil })
	g.Go(func() error { a.watch(ctx); return nil })
	g.Go(func() error { return a.server.Serve(ctx, lis) })
	return g.Wait()
}
