// Package app composes the connect service: configuration, database, the domain, the import
// and delivery workers and the gRPC server. The service's own binary and the all-in-one
// developer binary both start it through here.
package app

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"go.uber.org/zap"

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
	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/idempotency"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/outbox"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/platform/purge"
	"github.com/mnvhq/mnv/services/platform/service"
)

// Schema is the Postgres schema the service owns.
const Schema = "connect"

// Config is the service's configuration: the part every service reads (service.Config) and
// connect's own. InternalToken (required) is presented to accounts.
type Config struct {
	service.Config
	// AccountsAddr is where accounts listens (MNV_ACCOUNTS_ADDR).
	AccountsAddr string
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
	// PrincipalCache keeps the principals accounts resolved, dropped when accounts pushes a
	// change (MNV_PRINCIPAL_CACHE_SIZE, MNV_PRINCIPAL_CACHE_MAX_AGE).
	PrincipalCache principalcache.Config
	// Retention is how long finished deliveries, sync events and finished import jobs are kept
	// (MNV_RETENTION_DELIVERIES, MNV_RETENTION_SYNC_EVENTS, MNV_RETENTION_IMPORT_JOBS; 0 keeps
	// them), purged every PurgeEvery (MNV_PURGE_EVERY).
	Retention  retention.Config
	PurgeEvery time.Duration
}

// vars are connect's own names of the common variables.
var vars = service.Vars{
	GRPCAddr: "MNV_CONNECT_GRPC_ADDR", DatabaseURL: "MNV_CONNECT_DATABASE_URL", DBMaxConns: "MNV_CONNECT_DB_MAX_CONNS",
}

// DefaultConfig is the configuration with every default set and no secrets.
func DefaultConfig() Config {
	return Config{
		Config: service.DefaultConfig("127.0.0.1:9093", vars), AccountsAddr: "127.0.0.1:9091",
		WebhookTimeout: 10 * time.Second, WebhookSecretOverlap: endpoints.DefaultOverlap, DeliveryWorkers: 8, DeliveryPerIntegration: 4, DeliveryBackoff: 2 * time.Second,
		ImportLease: 2 * time.Minute, EnrichmentSettleAfter: time.Minute, EnrichmentReconcileEvery: 5 * time.Second,
		WebhookWorkers: 16, WebhookPerEndpoint: 4, WebhookBackoff: 5 * time.Second, WebhookMaxAttempts: outbound.MaxAttempts,
		WebhookDisableAfter: 72 * time.Hour,
		Retention: retention.Config{
			Deliveries: 7 * 24 * time.Hour, SyncEvents: 90 * 24 * time.Hour, ImportJobs: 90 * 24 * time.Hour,
			WebhookEvents: 30 * 24 * time.Hour,
		},
		PurgeEvery: 10 * time.Minute,
	}
}

// DatabaseURL reads the database URL alone: all that `migrate` needs, so a migration step
// holds no other secret.
func DatabaseURL(env *config.Env) (string, error) {
	u := env.DatabaseURL(vars.DatabaseURL)
	return u, env.Err()
}

// LoadConfig reads the configuration from env over the defaults.
func LoadConfig(env *config.Env) (Config, error) {
	c := DefaultConfig()
	err := c.Config.Load(env)
	c.AccountsAddr = env.String("MNV_ACCOUNTS_ADDR", c.AccountsAddr)
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
	c.PrincipalCache = principalcache.LoadConfig(env)
	c.Retention.Deliveries = env.Duration("MNV_RETENTION_DELIVERIES", c.Retention.Deliveries)
	c.Retention.SyncEvents = env.Duration("MNV_RETENTION_SYNC_EVENTS", c.Retention.SyncEvents)
	c.Retention.ImportJobs = env.Duration("MNV_RETENTION_IMPORT_JOBS", c.Retention.ImportJobs)
	c.Retention.WebhookEvents = env.Duration("MNV_RETENTION_WEBHOOK_EVENTS", c.Retention.WebhookEvents)
	c.PurgeEvery = env.Duration("MNV_PURGE_EVERY", c.PurgeEvery)
	env.Require("MNV_INTERNAL_TOKEN", c.InternalToken)
	env.Require("MNV_NUMBER_HASH_KEY", c.NumberHashKey)
	if err := errors.Join(env.Err(), err); err != nil {
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
	errs := []error{c.Config.Validate(c.WebhookTimeout + 30*time.Second)}
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
	if err := c.PrincipalCache.Validate(); err != nil {
		errs = append(errs, err)
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

// App is a running connect service: the service skeleton (service.Base: Listen, Run, Close)
// with connect's domain on it.
type App struct {
	*service.Base
}

// schema is connect's database.
var schema = service.Schema{Tables: migrations.Tables, Migrations: migrations.FS}

// Migrate applies the schema's migrations and returns: the `connect migrate` command
// (service.Migrate).
func Migrate(ctx context.Context, databaseURL string, log *zap.Logger) error {
	return service.Migrate(ctx, databaseURL, schema, log)
}

// New connects to the database and accounts, migrates the schema and builds the server.
func New(ctx context.Context, cfg Config, log *zap.Logger, reg prometheus.Registerer) (_ *App, err error) {
	hasher, err := phone.NewHasher([]byte(cfg.NumberHashKey))
	if err != nil {
		return nil, fmt.Errorf("MNV_NUMBER_HASH_KEY: %w", err)
	}
	b, err := service.Open(ctx, cfg.Config, service.Deps{Schema: schema, Idempotent: server.IdempotentMethods(), Log: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	defer b.CloseOnError(&err)
	accounts, err := accountsclient.Dial(cfg.AccountsAddr, cfg.Client())
	if err != nil {
		return nil, err
	}
	b.Add("accounts connection", accounts.Close)
	authn, watch, err := accounts.Cached(cfg.PrincipalCache, reg, log)
	if err != nil {
		return nil, err
	}
	b.Loop(watch)
	go profiles.Warm()
	importMetrics, err := imports.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	deliveryMetrics, err := push.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}

	// The one engine of connect's background work is the Base's queue. Stores insert jobs
	// through it from the start (box: events in the transaction of their facts); the packages
	// that work jobs add their queues and workers to it before Run.
	queue, pool, keyring := b.Jobs, b.Pool, b.Keyring
	box := outbox.New(queue)

	vault := phone.NewVault("connect", keyring, hasher)
	policy := outbound.Policy{AllowHTTP: cfg.WebhookAllowHTTP, AllowPrivate: cfg.WebhookAllowPrivate, AllowedNets: cfg.WebhookAllowedNets}
	// Each domain package sees the one store through its own interface. Every store that
	// queues deliveries inserts their jobs in its transaction (WithJobs); the ones that report
	// facts write their events there too (WithOutbox).
	open := func(db pg.DB) *store.Store { return store.New(db).WithJobs(queue).WithOutbox(box) }
	profStores := pg.NewStores(pool, func(db pg.DB) profiles.Store { return open(db).WithAnswers(b.Idem) })
	impStores := pg.NewStores(pool, func(db pg.DB) imports.Store { return open(db) })
	delStores := pg.NewStores(pool, func(db pg.DB) push.Store { return open(db) })
	itStores := pg.NewStores(pool, func(db pg.DB) integrations.Store { return open(db) })
	profs := profiles.New(profStores.Pool(), profStores, vault, accounts, idempotentRequests{})
	imps := imports.New(impStores.Pool(), impStores, vault, keyring, imports.Config{Poll: 500 * time.Millisecond, Lease: cfg.ImportLease}, log)
	// Deliveries are River jobs: MNV_DELIVERY_WORKERS work the queue in this process, at most
	// MNV_DELIVERY_PER_INTEGRATION of one integration at once (the others snoozed), retried
	// with outbound.Backoff up to outbound.MaxAttempts.
	worker := push.New(push.Config{
		BackoffBase: cfg.DeliveryBackoff, BackoffMax: outbound.MaxBackoff,
		Timeout: cfg.WebhookTimeout + 30*time.Second, PausedRecheck: 10 * time.Second,
	}, push.Deps{
		Store: delStores.Pool(), Tx: delStores, Vault: vault, Keyring: keyring, Client: outbound.NewClient(policy, cfg.WebhookTimeout),
		Limit: &jobs.KeyLimit{Max: cfg.DeliveryPerIntegration, Snooze: time.Second}, Log: log, Metrics: deliveryMetrics,
	})
	river.AddWorker(queue.Workers(), worker)
	queue.AddQueue(push.Queue, cfg.DeliveryWorkers)
	// Batches the leasing version left PENDING become jobs once, before this process works any.
	if n, err := worker.Adopt(ctx); err != nil {
		return nil, fmt.Errorf("adopt pending deliveries: %w", err)
	} else if n > 0 {
		log.Info("pending deliveries queued as jobs", zap.Int("count", n))
	}
	imps.Metrics = importMetrics

	// Event webhooks: connect's own events and other services' (PublishEvents) go into one
	// intake; its deliveries are River jobs of the webhooks queue.
	evStores := pg.NewStores(pool, func(db pg.DB) delivery.Store { return open(db) })
	eventMetrics, err := delivery.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	intake := delivery.New(delivery.Config{
		MaxAttempts: cfg.WebhookMaxAttempts, Backoff: cfg.WebhookBackoff, DisableAfter: cfg.WebhookDisableAfter, Timeout: cfg.WebhookTimeout,
	}, delivery.Deps{
		Store: evStores.Pool(), Tx: evStores, Keyring: keyring, Client: outbound.NewClient(policy, cfg.WebhookTimeout),
		Limit:       &jobs.KeyLimit{Max: cfg.WebhookPerEndpoint, Snooze: 100 * time.Millisecond},
		ClientLimit: &jobs.KeyLimit{Max: cfg.webhookPerClient(), Snooze: 100 * time.Millisecond},
		Log:         log, Metrics: eventMetrics,
	})
	river.AddWorker(queue.Workers(), intake.Worker())
	queue.AddQueue(delivery.Queue, cfg.WebhookWorkers)
	outbox.Register(queue.Workers(), localPublisher{intake})
	queue.AddQueue(outbox.Queue, 4)
	srv, err := b.NewServer(service.ServerOptions{Policy: server.Policy(), Authenticator: authn, AdminToken: cfg.AdminToken, LimitStreams: true})
	if err != nil {
		return nil, err
	}
	connectv1.RegisterConnectServiceServer(srv, &server.Server{
		Profiles: profs, Imports: imps, Integrations: integrations.New(itStores.Pool(), itStores, keyring, policy), Log: log,
	})
	connectv1.RegisterConnectInternalServiceServer(srv, &server.Internal{Profiles: profs, Events: intake, Log: log})
	whStores := pg.NewStores(pool, func(db pg.DB) endpoints.Store { return store.New(db) })
	hooks := endpoints.New(whStores.Pool(), whStores, keyring, policy, endpoints.Config{Overlap: cfg.WebhookSecretOverlap}, intake)
	connectv1.RegisterWebhookServiceServer(srv, &server.Webhooks{Webhooks: hooks, Log: log})
	connectv1.RegisterWebhookAdminServiceServer(srv, &server.WebhookAdmin{Webhooks: hooks, Log: log})
	b.Loop(imps.Run)
	b.Loop(func(ctx context.Context) {
		profs.ReconcileEnrichments(ctx, cfg.EnrichmentReconcileEvery, cfg.EnrichmentSettleAfter, log)
	})
	b.Loop((&purge.Runner{Rules: retention.Rules(store.New(pool), cfg.Retention), Every: cfg.PurgeEvery, Log: log}).Run)
	return &App{Base: b}, nil
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
