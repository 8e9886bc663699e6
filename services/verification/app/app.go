// Package app composes the verification service: configuration, database, the operator
// registry, the domain and the gRPC server. The service's own binary and the all-in-one
// developer binary both start it through here.
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	verificationv1 "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
	"github.com/mnvhq/mnv/services/accounts/accountsclient"
	"github.com/mnvhq/mnv/services/accounts/accountsclient/principalcache"
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
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/platform/purge"
	"github.com/mnvhq/mnv/services/platform/ratelimit"
	"github.com/mnvhq/mnv/services/platform/tenancy"
	"github.com/mnvhq/mnv/services/platform/tracing"
	"github.com/mnvhq/mnv/services/verification/internal/browser"
	"github.com/mnvhq/mnv/services/verification/internal/facade"
	"github.com/mnvhq/mnv/services/verification/internal/network"
	"github.com/mnvhq/mnv/services/verification/internal/operatorapi"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
	"github.com/mnvhq/mnv/services/verification/internal/relay"
	"github.com/mnvhq/mnv/services/verification/internal/retention"
	"github.com/mnvhq/mnv/services/verification/internal/seal"
	"github.com/mnvhq/mnv/services/verification/internal/server"
	"github.com/mnvhq/mnv/services/verification/internal/sessions"
	"github.com/mnvhq/mnv/services/verification/internal/store"
	"github.com/mnvhq/mnv/services/verification/internal/stuckplus"
	"github.com/mnvhq/mnv/services/verification/internal/verify"
	"github.com/mnvhq/mnv/services/verification/migrations"
)

// CallbackPath is the public route an operator's authorization sends the device back to.
const CallbackPath = "/v1/api/sdk/session/callback"

// Schema is the Postgres schema the service owns.
const Schema = store.Schema

// Config is the service's configuration.
type Config struct {
	// GRPCAddr is where the gRPC server listens (MNV_VERIFICATION_GRPC_ADDR).
	GRPCAddr string
	// DatabaseURL (MNV_VERIFICATION_DATABASE_URL, else DATABASE_URL).
	DatabaseURL string
	// DBMaxConns bounds the pool (MNV_VERIFICATION_DB_MAX_CONNS).
	DBMaxConns int
	// AccountsAddr is where accounts listens (MNV_ACCOUNTS_ADDR).
	AccountsAddr string
	// ConnectAddr is where Connect listens (MNV_CONNECT_ADDR); empty: the jobs that tell
	// Connect verified numbers and events are kept but not worked.
	ConnectAddr string
	// InternalToken is verification's own credential, presented to accounts and connect
	// (MNV_INTERNAL_TOKEN[_FILE]).
	InternalToken string
	// TLSCAFile, when set, makes the calls to accounts and connect TLS, verified against it
	// (MNV_GRPC_TLS_CA).
	TLSCAFile string
	// InternalCallers are the digests of the callers' tokens (MNV_INTERNAL_CALLERS): only the
	// gateway's may capture, and speak for a client's network.
	InternalCallers auth.Callers
	// Transport is the gRPC server's TLS and health port (MNV_GRPC_TLS_CERT, MNV_GRPC_TLS_KEY,
	// MNV_GRPC_HEALTH_ADDR).
	Transport grpcserver.Transport
	// DataKeys seal blobs and numbers at rest (MNV_DATA_KEYS[_FILE]).
	DataKeys string
	// NumberHashKey keys the hash of numbers, shared with Connect (MNV_NUMBER_HASH_KEY[_FILE]).
	NumberHashKey string
	// OperatorsFile is the operator registry (MNV_OPERATORS_FILE); empty: the built-in one.
	OperatorsFile string
	// Sandbox switches the sandbox operator on (MNV_SANDBOX): it trusts loopback, so it is for
	// development and tests only. Off, the built-in registry is empty and a registry file with
	// a sandbox operator is refused.
	Sandbox bool
	// PublicURL is the gateway's public base URL (MNV_PUBLIC_URL): the operators of NETWORK_API
	// send the device back to PublicURL + CallbackPath. Required when an operator has CAMARA
	// settings.
	PublicURL string
	// NetworkAPITimeout bounds each call to an operator's network API (MNV_NETWORK_API_TIMEOUT).
	NetworkAPITimeout time.Duration
	// SessionTTL is how long a sealed blob may be verified (MNV_SESSION_TTL).
	SessionTTL time.Duration
	// TransactionTTL is how long a browser flow waits for its capture (MNV_TRANSACTION_TTL).
	TransactionTTL time.Duration
	// ClientRate and ClientBurst bound the requests per second of each client credential, API
	// key or SDK token (MNV_CLIENT_RATE, MNV_CLIENT_BURST); a rate of 0 disables the limit.
	ClientRate  float64
	ClientBurst int
	// PrincipalCache keeps the principals accounts resolved, dropped when accounts pushes a
	// change (MNV_PRINCIPAL_CACHE_SIZE, MNV_PRINCIPAL_CACHE_MAX_AGE).
	PrincipalCache principalcache.Config
	// RedisURL shares the rate limits between replicas (MNV_REDIS_URL[_FILE]); empty: each
	// replica keeps its own.
	RedisURL string
	// NumberAttemptsPerHour bounds a client's verifications of one number
	// (MNV_NUMBER_ATTEMPTS_PER_HOUR); 0 disables the limit.
	NumberAttemptsPerHour int
	// SettleAfter is how old a verification left PENDING (its charge's outcome unknown) must be
	// before the reconciler settles it (MNV_SETTLE_AFTER); ReconcileEvery is how often it looks
	// (MNV_RECONCILE_EVERY).
	SettleAfter    time.Duration
	ReconcileEvery time.Duration
	// RevealChargeRepeats charges every reveal, not only a session's first
	// (MNV_REVEAL_CHARGE_REPEATS).
	RevealChargeRepeats bool
	// Retention is how long expired sessions and stuck-plus numbers are kept
	// (MNV_RETENTION_SESSIONS, MNV_RETENTION_STUCK_PLUS_NUMBERS; 0 keeps them), purged every
	// PurgeEvery (MNV_PURGE_EVERY).
	Retention  retention.Config
	PurgeEvery time.Duration
	// Jobs configures the service's River queue (MNV_JOBS_RESCUE_AFTER).
	Jobs jobs.Config
	// ShutdownTimeout bounds the graceful stop (MNV_SHUTDOWN_TIMEOUT).
	ShutdownTimeout time.Duration
	// CAMARAAddr is where the CAMARA facade (OIDC provider and Number Verification API) listens
	// for the gateway's proxied requests (MNV_VERIFICATION_CAMARA_ADDR); empty (the default):
	// no facade. `make run` serves it on 127.0.0.1:9095. With TLS on (Transport) it serves
	// HTTPS with the gRPC server's certificate: the gateway sends clients' secrets and tokens,
	// and its own token, across it.
	CAMARAAddr string
	// CAMARAIssuer is the public base URL of the facade, the gateway's (MNV_CAMARA_ISSUER):
	// the OIDC issuer, and the base of the endpoints discovery names.
	CAMARAIssuer string
	// CAMARATokenTTL is the life of a CAMARA access token, at most 300 s (MNV_CAMARA_TOKEN_TTL).
	CAMARATokenTTL time.Duration
}

// DefaultConfig is the configuration with every default set and no secrets.
func DefaultConfig() Config {
	return Config{
		Jobs:     jobs.Config{RescueAfter: jobs.DefaultRescueAfter},
		GRPCAddr: "127.0.0.1:9092", DBMaxConns: 32, AccountsAddr: "127.0.0.1:9091", ConnectAddr: "127.0.0.1:9093",
		SessionTTL: 300 * time.Second, TransactionTTL: 10 * time.Minute, NetworkAPITimeout: 5 * time.Second,
		ClientRate: 50, ClientBurst: 100, NumberAttemptsPerHour: 10, ShutdownTimeout: 15 * time.Second,
		SettleAfter: 30 * time.Second, ReconcileEvery: 5 * time.Second,
		Retention:    retention.Config{Sessions: 7 * 24 * time.Hour, StuckPlusNumbers: 30 * 24 * time.Hour},
		PurgeEvery:   10 * time.Minute,
		CAMARAIssuer: "http://127.0.0.1:8080", CAMARATokenTTL: facade.MaxTokenTTL,
	}
}

// databaseVar overrides DATABASE_URL for this service alone.
const databaseVar = "MNV_VERIFICATION_DATABASE_URL"

// DatabaseURL reads the database URL alone: all that `migrate` needs, so a migration step
// holds no other secret.
func DatabaseURL(env *config.Env) (string, error) {
	u := env.DatabaseURL(databaseVar)
	return u, env.Err()
}

// LoadConfig reads the configuration from env over the defaults.
func LoadConfig(env *config.Env) (Config, error) {
	c := DefaultConfig()
	c.GRPCAddr = env.String("MNV_VERIFICATION_GRPC_ADDR", c.GRPCAddr)
	c.DatabaseURL = env.DatabaseURL(databaseVar)
	c.DBMaxConns = env.Int("MNV_VERIFICATION_DB_MAX_CONNS", c.DBMaxConns)
	c.AccountsAddr = env.String("MNV_ACCOUNTS_ADDR", c.AccountsAddr)
	c.ConnectAddr = env.String("MNV_CONNECT_ADDR", c.ConnectAddr)
	c.InternalToken = env.Secret("MNV_INTERNAL_TOKEN")
	c.TLSCAFile = env.String("MNV_GRPC_TLS_CA", "")
	c.DataKeys = env.Secret("MNV_DATA_KEYS")
	c.NumberHashKey = env.Secret("MNV_NUMBER_HASH_KEY")
	c.OperatorsFile = env.String("MNV_OPERATORS_FILE", "")
	c.Sandbox = env.Bool("MNV_SANDBOX", false)
	c.PublicURL = strings.TrimSuffix(env.String("MNV_PUBLIC_URL", ""), "/")
	c.NetworkAPITimeout = env.Duration("MNV_NETWORK_API_TIMEOUT", c.NetworkAPITimeout)
	c.SessionTTL = env.Duration("MNV_SESSION_TTL", c.SessionTTL)
	c.TransactionTTL = env.Duration("MNV_TRANSACTION_TTL", c.TransactionTTL)
	c.ClientRate = env.Float("MNV_CLIENT_RATE", c.ClientRate)
	c.ClientBurst = env.Int("MNV_CLIENT_BURST", c.ClientBurst)
	c.PrincipalCache = principalcache.LoadConfig(env)
	c.RedisURL = env.Secret("MNV_REDIS_URL")
	c.NumberAttemptsPerHour = env.Int("MNV_NUMBER_ATTEMPTS_PER_HOUR", c.NumberAttemptsPerHour)
	c.RevealChargeRepeats = env.Bool("MNV_REVEAL_CHARGE_REPEATS", false)
	c.SettleAfter = env.Duration("MNV_SETTLE_AFTER", c.SettleAfter)
	c.ReconcileEvery = env.Duration("MNV_RECONCILE_EVERY", c.ReconcileEvery)
	c.ShutdownTimeout = env.Duration("MNV_SHUTDOWN_TIMEOUT", c.ShutdownTimeout)
	c.Jobs = jobs.LoadConfig(env)
	c.CAMARAAddr = env.String("MNV_VERIFICATION_CAMARA_ADDR", c.CAMARAAddr)
	c.CAMARAIssuer = env.String("MNV_CAMARA_ISSUER", c.CAMARAIssuer)
	c.CAMARATokenTTL = env.Duration("MNV_CAMARA_TOKEN_TTL", c.CAMARATokenTTL)
	c.Retention.Sessions = env.Duration("MNV_RETENTION_SESSIONS", c.Retention.Sessions)
	c.Retention.StuckPlusNumbers = env.Duration("MNV_RETENTION_STUCK_PLUS_NUMBERS", c.Retention.StuckPlusNumbers)
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

// Validate checks values that parse but make no sense.
func (c Config) Validate() error {
	var errs []error
	if err := c.Jobs.Validate(relay.LongestAttempt); err != nil {
		errs = append(errs, err)
	}
	if c.SessionTTL < time.Second || c.SessionTTL > time.Hour {
		errs = append(errs, errors.New("MNV_SESSION_TTL: must be between 1s and 1h"))
	}
	if c.NetworkAPITimeout < 100*time.Millisecond || c.NetworkAPITimeout > time.Minute {
		errs = append(errs, errors.New("MNV_NETWORK_API_TIMEOUT: must be between 100ms and 1m"))
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" {
			errs = append(errs, errors.New("MNV_PUBLIC_URL: must be an absolute http(s) URL, like https://api.example.com"))
		}
	}
	if c.TransactionTTL < time.Minute || c.TransactionTTL > 24*time.Hour {
		errs = append(errs, errors.New("MNV_TRANSACTION_TTL: must be between 1m and 24h"))
	}
	if err := c.PrincipalCache.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.ClientRate < 0 || c.ClientBurst < 1 || c.NumberAttemptsPerHour < 0 {
		errs = append(errs, errors.New("MNV_CLIENT_RATE, MNV_CLIENT_BURST, MNV_NUMBER_ATTEMPTS_PER_HOUR: must not be negative (burst at least 1)"))
	}
	if c.SettleAfter < 100*time.Millisecond || c.ReconcileEvery < 100*time.Millisecond {
		errs = append(errs, errors.New("MNV_SETTLE_AFTER, MNV_RECONCILE_EVERY: must be at least 100ms"))
	}
	if c.DBMaxConns < 2 || c.DBMaxConns > 1000 {
		errs = append(errs, errors.New("MNV_VERIFICATION_DB_MAX_CONNS: must be between 2 and 1000"))
	}
	if c.Retention.Sessions < 0 || c.Retention.StuckPlusNumbers < 0 || c.PurgeEvery < 100*time.Millisecond {
		errs = append(errs, errors.New("MNV_RETENTION_*: must not be negative (0 keeps); MNV_PURGE_EVERY: at least 100ms"))
	}
	if c.CAMARATokenTTL < time.Second || c.CAMARATokenTTL > facade.MaxTokenTTL {
		errs = append(errs, errors.New("MNV_CAMARA_TOKEN_TTL: must be between 1s and 300s"))
	}
	if c.CAMARAAddr != "" {
		if err := checkIssuer(c.CAMARAIssuer); err != nil {
			errs = append(errs, fmt.Errorf("MNV_CAMARA_ISSUER: %w", err))
		}
	}
	return errors.Join(errs...)
}

// checkIssuer admits an https URL, or http on a loopback host (development), with no path
// beyond "/", query or fragment.
func checkIssuer(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return errors.New("must be a base URL like https://api.example.com")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if h := u.Hostname(); h == "localhost" || h == "127.0.0.1" || h == "::1" {
			return nil
		}
	}
	return errors.New("must be https (http only on a loopback host, for development)")
}

// App is a running verification service.
type App struct {
	cfg      Config
	server   *grpcserver.Server
	verifier *verify.Service
	// reveals finishes the reveals whose charge a crash or an absent accounts left PENDING.
	reveals interface {
		Run(context.Context, time.Duration)
	}
	idem  *idempotency.Store
	jobs  *jobs.Queue
	purge *purge.Runner
	// watch keeps the principal cache's stream from accounts.
	watch func(context.Context)
	// camara is the CAMARA facade's server and listener, when configured.
	camara    *http.Server
	camaraLis net.Listener
	// closer holds what New opened, closed by Run's end or Close.
	closer lifecycle.Closer
}

// Migrate applies the schema's migrations and returns: the `verification migrate` command, run once
// before a new version serves (a Kubernetes init step), so replicas starting together do not
// all queue on the migration lock. New migrates too, so a lone process needs no extra step.
func Migrate(ctx context.Context, databaseURL string, log *zap.Logger) error {
	pool, err := pg.Open(ctx, databaseURL, pg.PoolConfig{MaxConns: 2, ApplicationName: "mnv-verification-migrate"})
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := migrate(ctx, pool, log); err != nil {
		return err
	}
	log.Info("schema migrated", zap.String("schema", Schema))
	return nil
}

// migrate applies the schema's migrations, then River's in the same schema, then moves the
// verified numbers that an earlier version left in its outbox table into relay jobs (once: they
// leave the table in the transaction that makes their jobs).
func migrate(ctx context.Context, pool *pgxpool.Pool, log *zap.Logger) error {
	if err := pg.Migrate(ctx, pool, Schema, migrations.FS, idempotency.Migrations()); err != nil {
		return err
	}
	if err := jobs.Migrate(ctx, pool, Schema); err != nil {
		return err
	}
	if err := tenancy.PartitionFromEnv(ctx, pool, migrations.Tables); err != nil {
		return err
	}
	queue, err := jobs.New(pool, jobs.Options{Schema: Schema, Log: log})
	if err != nil {
		return err
	}
	stores := pg.NewStores(pool, func(db pg.DB) *store.Store { return store.New(db).WithJobs(queue) })
	var moved int
	if err := stores.InTx(ctx, func(ctx context.Context, st *store.Store) error {
		moved, err = st.MoveOutbox(ctx)
		return err
	}); err != nil {
		return err
	}
	if moved > 0 {
		log.Info("verified numbers moved from the outbox table to relay jobs", zap.Int("count", moved))
	}
	return nil
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
	ops, err := operators.Load(cfg.OperatorsFile, cfg.Sandbox)
	if errors.Is(err, operators.ErrSandboxOff) {
		return nil, fmt.Errorf("MNV_OPERATORS_FILE: %w; set MNV_SANDBOX=true where a sandbox belongs (development, tests), never in production", err)
	}
	if err != nil {
		return nil, fmt.Errorf("MNV_OPERATORS_FILE: %w", err)
	}
	if len(ops.List()) == 0 {
		log.Warn("no operator is configured: every capture finds no network identity (set MNV_OPERATORS_FILE, or MNV_SANDBOX=true for development)")
	}
	a := &App{cfg: cfg}
	defer a.closer.CloseOnError(&err)
	internal := grpcclient.Options{Token: cfg.InternalToken, CAFile: cfg.TLSCAFile}
	accounts, err := accountsclient.Dial(cfg.AccountsAddr, internal)
	if err != nil {
		return nil, err
	}
	a.closer.Add("accounts connection", accounts.Close)
	authn, watch, err := accounts.Cached(cfg.PrincipalCache, reg, log)
	if err != nil {
		return nil, err
	}
	a.watch = watch
	pool, err := pg.Open(ctx, cfg.DatabaseURL, pg.PoolConfig{MaxConns: int32(cfg.DBMaxConns), ApplicationName: "mnv-verification"})
	if err != nil {
		return nil, err
	}
	a.closer.AddFunc("database pool", pool.Close)
	if err := migrate(ctx, pool, log); err != nil {
		return nil, err
	}
	queue, err := jobs.New(pool, jobs.Options{Schema: Schema, Log: log, Registerer: reg, RescueAfter: cfg.Jobs.RescueAfter})
	if err != nil {
		return nil, err
	}
	a.jobs = queue
	// A batch of several clients' verifications is one statement on one server, one per client
	// on a database distributed by client (docs/operations.md#past-one-postgresql).
	spread, err := tenancy.SpreadOf(ctx, pool, migrations.Tables)
	if err != nil {
		return nil, err
	}
	log.Info("batch statements", zap.Stringer("spread", spread))
	// Every store writes its jobs (events, Connect's records) through the queue, in the
	// transaction of the fact they follow.
	newStore := func(db pg.DB) *store.Store { return store.New(db).WithJobs(queue).WithSpread(spread) }
	if cfg.ConnectAddr == "" {
		// Nothing in this process drains the relay queue (below): settles queue their rows
		// without a drain job nobody would take.
		newStore = func(db pg.DB) *store.Store { return store.New(db).WithJobs(queue).WithSpread(spread).WithoutDrains() }
	}

	verifyMetrics, err := verify.NewMetrics(reg)
	if err == nil {
		err = pg.RegisterPool(reg, Schema, pool)
	}
	if err == nil {
		err = relay.RegisterMetrics(reg, store.New(pool).RelayBacklog)
	}
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	sealer := seal.NewSealer(keyring)
	vault := phone.NewVault("verification", keyring, hasher)
	verifyStores := pg.NewStores(pool, func(db pg.DB) verify.Store { return newStore(db) })
	verifier := verify.New(verifyStores.Pool(), verifyStores, ops, sealer, vault, accounts, verify.Config{
		NumberAttemptsPerHour: cfg.NumberAttemptsPerHour, SettleAfter: cfg.SettleAfter, Traced: tracing.Enabled(),
	}, log)
	verifier.Metrics = verifyMetrics
	batchPool, err := pg.Open(ctx, cfg.DatabaseURL, pg.PoolConfig{
		MaxConns: verify.BatchConns, ApplicationName: "mnv-verification-batch", Batches: true, Spread: spread,
	})
	if err != nil {
		return nil, err
	}
	a.closer.AddFunc("database pool of the batches", batchPool.Close)
	if err := pg.RegisterPool(reg, Schema+"_batch", batchPool); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	batchStores := pg.NewStores(batchPool, func(db pg.DB) verify.Store { return newStore(db) })
	verifier.WithBatchStore(batchStores.Pool(), batchStores)
	var clients operatorapi.Clients
	if hasCAMARA(ops) {
		if cfg.PublicURL == "" {
			return nil, errors.New("MNV_PUBLIC_URL: required when an operator of the registry has camara settings (NETWORK_API): the operator sends the device back to MNV_PUBLIC_URL" + CallbackPath)
		}
		clients, err = operatorapi.NewClients(ops.List(), cfg.PublicURL+CallbackPath, &http.Client{Timeout: cfg.NetworkAPITimeout})
		if err != nil {
			return nil, fmt.Errorf("MNV_OPERATORS_FILE: %w", err)
		}
		verifier.WithNetworkAPI(store.New(pool), clients, cfg.NetworkAPITimeout)
	}
	idem := idempotency.New(pool, Schema, keyring, log, server.IdempotentMethods()...)
	limits, err := ratelimit.Open(ratelimit.Options{Service: "verification", RedisURL: cfg.RedisURL, Log: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	a.closer.Add("rate limits", limits.Close)
	perCredential := limits.Limiter("credential", ratelimit.Limit{Rate: cfg.ClientRate, Burst: cfg.ClientBurst})
	srv, err := grpcserver.New(grpcserver.Options{
		Logger:     log,
		Registerer: reg,
		Guard:      auth.NewGuard(server.Policy(), authn, auth.NewServiceTokens(cfg.InternalCallers, "")),
		Unary: []grpc.UnaryServerInterceptor{
			ratelimit.UnaryServerInterceptor(perCredential),
			idem.UnaryInterceptor(),
		},
		ShutdownTimeout: cfg.ShutdownTimeout,
		Transport:       cfg.Transport,
	})
	if err != nil {
		return nil, err
	}
	a.closer.AddFunc("gRPC server", srv.Stop) // its stream workers run from New on
	net := network.NewIdentifier(ops, log)
	sess := sessions.New(store.New(pool), net, sealer, cfg.SessionTTL)
	if clients != nil {
		sess = sess.WithNetworkAPI(store.New(pool), clients, log)
	}
	stuckStores := pg.NewStores(pool, func(db pg.DB) stuckplus.Store { return newStore(db) })
	stuckPlus := stuckplus.New(stuckStores.Pool(), stuckStores, vault, accounts, cfg.RevealChargeRepeats)
	browserStores := pg.NewStores(pool, func(db pg.DB) browser.Store { return newStore(db) })
	verificationv1.RegisterVerificationServiceServer(srv, &server.Server{
		Sessions: sess, Verifier: verifier, StuckPlus: stuckPlus,
		Browser:       browser.New(browserStores.Pool(), browserStores, net, sess, stuckPlus, accounts, cfg.TransactionTTL),
		NumberHeaders: ops.NumberHeaders(), Log: log,
	})
	a.server, a.verifier, a.idem = srv, verifier, idem
	a.reveals = stuckPlus.Reconciler(cfg.SettleAfter, log)
	if cfg.CAMARAAddr != "" {
		// The facade's sessions reach the operators' network APIs with clients of their own:
		// the operator sends the device back to the facade's callback, not the SDK's.
		facadeSess := sess
		if clients != nil {
			back, err := operatorapi.NewClients(ops.List(), strings.TrimSuffix(cfg.CAMARAIssuer, "/")+facade.OperatorCallbackPath,
				&http.Client{Timeout: cfg.NetworkAPITimeout})
			if err != nil {
				return nil, fmt.Errorf("MNV_OPERATORS_FILE: %w", err)
			}
			facadeSess = sess.WithNetworkAPI(store.New(pool), back, log)
		}
		provider, err := facade.New(ctx, facade.Config{
			Issuer: cfg.CAMARAIssuer, TokenTTL: cfg.CAMARATokenTTL,
			NetworkOf: server.HTTPNetworkOf(cfg.InternalCallers, ops.NumberHeaders()),
		}, store.New(pool), accounts, authn, facadeSess, verifier, keyring, log)
		if err != nil {
			return nil, fmt.Errorf("camara facade: %w", err)
		}
		tlsConfig, err := cfg.Transport.TLSConfig()
		if err != nil {
			return nil, err
		}
		a.camara = &http.Server{Handler: provider, TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
			WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	}
	a.purge = &purge.Runner{Rules: retention.Rules(store.New(pool), cfg.Retention), Every: cfg.PurgeEvery, Log: log}
	if cfg.ConnectAddr != "" {
		// Without Connect the settled verifications wait in the relay queue (mnv_relay_backlog)
		// until a process that reaches it drains them.
		conn, err := grpcclient.Dial(cfg.ConnectAddr, internal)
		if err != nil {
			return nil, fmt.Errorf("dial connect: %w", err)
		}
		a.closer.Add("connect connection", conn.Close)
		events := outbox.Register(queue.Workers(), connectclient.NewPublisher(conn))
		queue.AddQueue(outbox.Queue, jobWorkers)
		relay.Register(queue.Workers(), store.RelayQueue{Stores: pg.NewStores(pool, newStore)},
			connectReceiver{connectv1.NewConnectInternalServiceClient(conn)},
			func(ctx context.Context, raw []json.RawMessage) error { return outbox.ForwardJSON(ctx, events, raw) }, log)
		queue.AddQueue(relay.Queue, jobWorkers)
		queue.AddPeriodic(relay.SweepJob(relay.SweepEvery))
	}
	return a, nil
}

// hasCAMARA reports whether an operator of ops is reached through its CAMARA API.
func hasCAMARA(ops *operators.Registry) bool {
	for _, op := range ops.List() {
		if op.CAMARA != nil {
			return true
		}
	}
	return false
}

// Listen opens the configured gRPC address, and the CAMARA facade's (kept by the App, served
// by Run, closed by Close when never run).
func (a *App) Listen() (net.Listener, error) {
	lis, err := net.Listen("tcp", a.cfg.GRPCAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (MNV_VERIFICATION_GRPC_ADDR): %w", a.cfg.GRPCAddr, err)
	}
	if a.camara != nil {
		cl, err := net.Listen("tcp", a.cfg.CAMARAAddr)
		if err != nil {
			lis.Close()
			return nil, fmt.Errorf("listen on %s (MNV_VERIFICATION_CAMARA_ADDR): %w", a.cfg.CAMARAAddr, err)
		}
		a.camaraLis = cl
		a.closer.AddFunc("camara listener", func() { cl.Close() })
	}
	return lis, nil
}

// Close releases what New opened, the last opened first: the Connect and accounts connections,
// the rate limits and the pool. Run closes them itself; Close is for an App that is never run
// (say, when Listen fails).
func (a *App) Close() error { return a.closer.Close() }

// jobWorkers is how many jobs of each queue (events, the relay's drains) a process works at
// once. A drain takes the whole relay queue, so its queue rarely has two at once; the jobs of
// earlier versions worked at once share one call to Connect (groupcommit.Merge).
const jobWorkers = 32

// Run serves on lis until ctx ends, settles pending verifications and works the jobs in the
// background, then shuts down gracefully and closes what New opened.
func (a *App) Run(ctx context.Context, lis net.Listener) (err error) {
	defer func() { err = errors.Join(err, a.Close()) }()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { a.verifier.Reconcile(ctx, a.cfg.ReconcileEvery); return nil })
	g.Go(func() error { a.reveals.Run(ctx, a.cfg.ReconcileEvery); return nil })
	g.Go(func() error { a.idem.Run(ctx); return nil })
	g.Go(func() error { a.purge.Run(ctx); return nil })
	g.Go(func() error { a.watch(ctx); return nil })
	g.Go(func() error { return a.jobs.Run(ctx, a.cfg.ShutdownTimeout) })
	g.Go(func() error { return a.server.Serve(ctx, lis) })
	if a.camaraLis != nil {
		g.Go(func() error {
			serve := a.camara.Serve
			if a.camara.TLSConfig != nil {
				// The certificate comes from TLSConfig (GetCertificate), not from files named here.
				serve = func(l net.Listener) error { return a.camara.ServeTLS(l, "", "") }
			}
			if err := serve(a.camaraLis); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("camara facade: %w", err)
			}
			return nil
		})
		g.Go(func() error {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.ShutdownTimeout)
			defer cancel()
			return a.camara.Shutdown(sctx)
		})
	}
	return g.Wait()
}
