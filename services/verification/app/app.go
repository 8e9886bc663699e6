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
	"github.com/riverqueue/river"
	"go.uber.org/zap"

	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	verificationv1 "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
	"github.com/mnvhq/mnv/services/accounts/accountsclient"
	"github.com/mnvhq/mnv/services/accounts/accountsclient/principalcache"
	"github.com/mnvhq/mnv/services/connect/connectclient"
	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/outbox"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/platform/purge"
	"github.com/mnvhq/mnv/services/platform/service"
	"github.com/mnvhq/mnv/services/platform/tracing"
	"github.com/mnvhq/mnv/services/platform/usage"
	"github.com/mnvhq/mnv/services/verification/internal/browser"
	"github.com/mnvhq/mnv/services/verification/internal/facade"
	"github.com/mnvhq/mnv/services/verification/internal/network"
	"github.com/mnvhq/mnv/services/verification/internal/operatorapi"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
	"github.com/mnvhq/mnv/services/verification/internal/pumping"
	"github.com/mnvhq/mnv/services/verification/internal/relay"
	"github.com/mnvhq/mnv/services/verification/internal/reports"
	"github.com/mnvhq/mnv/services/verification/internal/retention"
	"github.com/mnvhq/mnv/services/verification/internal/seal"
	"github.com/mnvhq/mnv/services/verification/internal/server"
	"github.com/mnvhq/mnv/services/verification/internal/sessions"
	"github.com/mnvhq/mnv/services/verification/internal/smsc"
	"github.com/mnvhq/mnv/services/verification/internal/store"
	"github.com/mnvhq/mnv/services/verification/internal/stuckplus"
	"github.com/mnvhq/mnv/services/verification/internal/verify"
	"github.com/mnvhq/mnv/services/verification/internal/workflows"
	"github.com/mnvhq/mnv/services/verification/migrations"
)

// CallbackPath is the public route an operator's authorization sends the device back to.
const CallbackPath = "/v1/api/sdk/session/callback"

// Schema is the Postgres schema the service owns.
const Schema = store.Schema

// Config is the service's configuration: the part every service reads (service.Config) and
// verification's own. InternalToken (required) is presented to accounts and connect;
// InternalCallers say that only the gateway may capture, and speak for a client's network.
type Config struct {
	service.Config
	// AccountsAddr is where accounts listens (MNV_ACCOUNTS_ADDR).
	AccountsAddr string
	// ConnectAddr is where Connect listens (MNV_CONNECT_ADDR); empty: the jobs that tell
	// Connect verified numbers and events are kept but not worked.
	ConnectAddr string
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
	// PrincipalCache keeps the principals accounts resolved, dropped when accounts pushes a
	// change (MNV_PRINCIPAL_CACHE_SIZE, MNV_PRINCIPAL_CACHE_MAX_AGE).
	PrincipalCache principalcache.Config
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
	// Retention is how long expired sessions, stuck-plus numbers and ended workflows' numbers
	// are kept (MNV_RETENTION_SESSIONS, MNV_RETENTION_STUCK_PLUS_NUMBERS,
	// MNV_RETENTION_WORKFLOW_NUMBERS; 0 keeps them), purged every
	// PurgeEvery (MNV_PURGE_EVERY).
	Retention  retention.Config
	PurgeEvery time.Duration
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
	// SMPP is the SMS centre the workflows' one-time codes go through (MNV_SMPP_*); no
	// address: no SMS provider, and the SMS jobs wait in their table.
	SMPP SMPPConfig
	// SMSInDoubtHold is how long an SMS step in doubt (its submit's outcome lost) waits for a
	// delivery receipt before its message is sent again (MNV_SMS_IN_DOUBT_HOLD, default 30s;
	// 0 sends again at once): docs/architecture.md#sms-over-smpp.
	SMSInDoubtHold time.Duration
	// SandboxInbox is the sandbox SMS centre `make run` starts in its process, which clients
	// may read (GET /v1/api/me/sandbox/sms); nil (the service's own binary): 404.
	SandboxInbox SandboxInbox
	// Pumping are the pumping controls' settings (MNV_PUMPING_*, docs/operations.md#pumping-controls):
	// every SMS of a workflow passes them. Their budgets and counts are in MNV_REDIS_URL's
	// Redis when set, shared by the replicas.
	Pumping pumping.Config
}

// SandboxInbox and SandboxMessage are the sandbox SMS centre as the workflows read it.
type (
	SandboxInbox   = workflows.SandboxInbox
	SandboxMessage = workflows.SandboxMessage
)

// SMPPConfig is the bind to an operator's or aggregator's SMS centre.
type SMPPConfig struct {
	Addr       string // host:port (MNV_SMPP_ADDR)
	SystemID   string // MNV_SMPP_SYSTEM_ID
	Password   string // MNV_SMPP_PASSWORD[_FILE]
	SystemType string // MNV_SMPP_SYSTEM_TYPE
	// Source is the sender the phone shows, a number or an alphanumeric name (MNV_SMPP_SOURCE).
	Source string
	// Window is the most submits unanswered at once (MNV_SMPP_WINDOW), as the SMSC's contract says.
	Window int
	// TLS connects over TLS (MNV_SMPP_TLS): the SMSC's certificate checked against the
	// system's roots, or TLSCAFile's CAs (MNV_SMPP_TLS_CA), for the host of Addr or
	// TLSServerName (MNV_SMPP_TLS_SERVER_NAME), before the bind's password is sent.
	TLS           bool
	TLSCAFile     string
	TLSServerName string
}

// vars are verification's own names of the common variables.
var vars = service.Vars{
	GRPCAddr: "MNV_VERIFICATION_GRPC_ADDR", DatabaseURL: "MNV_VERIFICATION_DATABASE_URL", DBMaxConns: "MNV_VERIFICATION_DB_MAX_CONNS",
}

// DefaultConfig is the configuration with every default set and no secrets.
func DefaultConfig() Config {
	return Config{
		Config:       service.DefaultConfig("127.0.0.1:9092", vars),
		AccountsAddr: "127.0.0.1:9091", ConnectAddr: "127.0.0.1:9093", Pumping: pumping.DefaultConfig(),
		SessionTTL: 300 * time.Second, TransactionTTL: 10 * time.Minute, NetworkAPITimeout: 5 * time.Second,
		NumberAttemptsPerHour: 10, SettleAfter: 30 * time.Second, ReconcileEvery: 5 * time.Second,
		Retention:    retention.Config{Sessions: 7 * 24 * time.Hour, StuckPlusNumbers: 30 * 24 * time.Hour, WorkflowNumbers: 30 * 24 * time.Hour},
		PurgeEvery:   10 * time.Minute,
		CAMARAIssuer: "http://127.0.0.1:8080", CAMARATokenTTL: facade.MaxTokenTTL,
		SMSInDoubtHold: workflows.DefaultInDoubtHold,
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
	c.ConnectAddr = env.String("MNV_CONNECT_ADDR", c.ConnectAddr)
	c.NumberHashKey = env.Secret("MNV_NUMBER_HASH_KEY")
	c.OperatorsFile = env.String("MNV_OPERATORS_FILE", "")
	c.Sandbox = env.Bool("MNV_SANDBOX", false)
	c.PublicURL = strings.TrimSuffix(env.String("MNV_PUBLIC_URL", ""), "/")
	c.NetworkAPITimeout = env.Duration("MNV_NETWORK_API_TIMEOUT", c.NetworkAPITimeout)
	c.SessionTTL = env.Duration("MNV_SESSION_TTL", c.SessionTTL)
	c.TransactionTTL = env.Duration("MNV_TRANSACTION_TTL", c.TransactionTTL)
	c.PrincipalCache = principalcache.LoadConfig(env)
	c.NumberAttemptsPerHour = env.Int("MNV_NUMBER_ATTEMPTS_PER_HOUR", c.NumberAttemptsPerHour)
	c.RevealChargeRepeats = env.Bool("MNV_REVEAL_CHARGE_REPEATS", false)
	c.SettleAfter = env.Duration("MNV_SETTLE_AFTER", c.SettleAfter)
	c.ReconcileEvery = env.Duration("MNV_RECONCILE_EVERY", c.ReconcileEvery)
	c.CAMARAAddr = env.String("MNV_VERIFICATION_CAMARA_ADDR", c.CAMARAAddr)
	c.CAMARAIssuer = env.String("MNV_CAMARA_ISSUER", c.CAMARAIssuer)
	c.CAMARATokenTTL = env.Duration("MNV_CAMARA_TOKEN_TTL", c.CAMARATokenTTL)
	c.Retention.Sessions = env.Duration("MNV_RETENTION_SESSIONS", c.Retention.Sessions)
	c.Retention.StuckPlusNumbers = env.Duration("MNV_RETENTION_STUCK_PLUS_NUMBERS", c.Retention.StuckPlusNumbers)
	c.Retention.WorkflowNumbers = env.Duration("MNV_RETENTION_WORKFLOW_NUMBERS", c.Retention.WorkflowNumbers)
	c.PurgeEvery = env.Duration("MNV_PURGE_EVERY", c.PurgeEvery)
	c.SMPP = SMPPConfig{
		Addr: env.String("MNV_SMPP_ADDR", ""), SystemID: env.String("MNV_SMPP_SYSTEM_ID", ""), Password: env.Secret("MNV_SMPP_PASSWORD"),
		SystemType: env.String("MNV_SMPP_SYSTEM_TYPE", ""), Source: env.String("MNV_SMPP_SOURCE", "mnv"),
		Window: env.Int("MNV_SMPP_WINDOW", 10), TLS: env.Bool("MNV_SMPP_TLS", false),
		TLSCAFile: env.String("MNV_SMPP_TLS_CA", ""), TLSServerName: env.String("MNV_SMPP_TLS_SERVER_NAME", ""),
	}
	c.SMSInDoubtHold = env.Duration("MNV_SMS_IN_DOUBT_HOLD", c.SMSInDoubtHold)
	c.Pumping = pumping.LoadConfig(env)
	env.Require("MNV_INTERNAL_TOKEN", c.InternalToken)
	env.Require("MNV_NUMBER_HASH_KEY", c.NumberHashKey)
	if err := errors.Join(env.Err(), err); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Validate checks values that parse but make no sense.
func (c Config) Validate() error {
	errs := []error{c.Config.Validate(max(relay.LongestAttempt, workflows.AttemptTimeout))}
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
	if err := c.Pumping.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("MNV_PUMPING_*: %w", err))
	}
	if c.SMSInDoubtHold < 0 || c.SMSInDoubtHold > 10*time.Minute {
		// A hold longer than a code's usual life would only ever end at its cap (half of it).
		errs = append(errs, errors.New("MNV_SMS_IN_DOUBT_HOLD: must be between 0 (send again at once) and 10m"))
	}
	if c.NumberAttemptsPerHour < 0 {
		errs = append(errs, errors.New("MNV_CLIENT_RATE, MNV_CLIENT_BURST, MNV_NUMBER_ATTEMPTS_PER_HOUR: must not be negative (burst at least 1)"))
	}
	if c.SettleAfter < 100*time.Millisecond || c.ReconcileEvery < 100*time.Millisecond {
		errs = append(errs, errors.New("MNV_SETTLE_AFTER, MNV_RECONCILE_EVERY: must be at least 100ms"))
	}
	if c.Retention.Sessions < 0 || c.Retention.StuckPlusNumbers < 0 || c.Retention.WorkflowNumbers < 0 || c.PurgeEvery < 100*time.Millisecond {
		errs = append(errs, errors.New("MNV_RETENTION_*: must not be negative (0 keeps); MNV_PURGE_EVERY: at least 100ms"))
	}
	if c.CAMARATokenTTL < time.Second || c.CAMARATokenTTL > facade.MaxTokenTTL {
		errs = append(errs, errors.New("MNV_CAMARA_TOKEN_TTL: must be between 1s and 300s"))
	}
	if err := c.SMPP.validate(); err != nil {
		errs = append(errs, err)
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

// App is a running verification service: the service skeleton (service.Base: Run, Close) with
// verification's domain on it, and the CAMARA facade's server beside it when configured.
type App struct {
	*service.Base
	cfg Config
	// camara is the CAMARA facade's server and listener, when configured.
	camara    *http.Server
	camaraLis net.Listener
}

// schema is verification's database. Once migrated, the verified numbers that an earlier
// version left in its outbox table become relay jobs (once: they leave the table in the
// transaction that makes their jobs).
var schema = service.Schema{Tables: migrations.Tables, Migrations: migrations.FS, Then: moveOutbox}

func moveOutbox(ctx context.Context, pool *pgxpool.Pool, log *zap.Logger) error {
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

// Migrate applies the schema's migrations and returns: the `verification migrate` command
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
	b, err := service.Open(ctx, cfg.Config, service.Deps{Schema: schema, Idempotent: server.IdempotentMethods(), Log: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	defer b.CloseOnError(&err)
	a := &App{Base: b, cfg: cfg}
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
	// Every store writes its jobs (events, Connect's records) through the queue, in the
	// transaction of the fact they follow, and its batches as the schema's spread says.
	queue, pool := b.Jobs, b.Pool
	newStore := func(db pg.DB) *store.Store { return store.New(db).WithJobs(queue).WithSpread(b.Spread) }
	if cfg.ConnectAddr == "" {
		// Nothing in this process drains the relay queue (below): settles queue their rows
		// without a drain job nobody would take.
		newStore = func(db pg.DB) *store.Store { return store.New(db).WithJobs(queue).WithSpread(b.Spread).WithoutDrains() }
	}

	verifyMetrics, err := verify.NewMetrics(reg)
	if err == nil {
		err = relay.RegisterMetrics(reg, store.New(pool).RelayBacklog)
	}
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	sealer := seal.NewSealer(b.Keyring)
	vault := phone.NewVault("verification", b.Keyring, hasher)
	verifyStores := pg.NewStores(pool, func(db pg.DB) verify.Store { return newStore(db) })
	verifier := verify.New(verify.Config{
		NumberAttemptsPerHour: cfg.NumberAttemptsPerHour, SettleAfter: cfg.SettleAfter, Traced: tracing.Enabled(),
	}, verify.Deps{
		Store: verifyStores.Pool(), Tx: verifyStores, Operators: ops, Sealer: sealer, Vault: vault, Ledger: accounts,
		Log: log, Metrics: verifyMetrics,
	})
	batchPool, err := b.OpenBatchPool(ctx, verify.BatchConns)
	if err != nil {
		return nil, err
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
		verifier = verifier.WithNetworkAPI(store.New(pool), clients, cfg.NetworkAPITimeout)
	}
	srv, err := b.NewServer(service.ServerOptions{Policy: server.Policy(), Authenticator: authn})
	if err != nil {
		return nil, err
	}
	net := network.NewIdentifier(ops, log)
	sess := sessions.New(store.New(pool), net, sealer, cfg.SessionTTL)
	if clients != nil {
		sess = sess.WithNetworkAPI(store.New(pool), clients, log)
	}
	stuckStores := pg.NewStores(pool, func(db pg.DB) stuckplus.Store { return newStore(db) })
	stuckPlus := stuckplus.New(stuckStores.Pool(), stuckStores, vault, accounts, cfg.RevealChargeRepeats)
	browserStores := pg.NewStores(pool, func(db pg.DB) browser.Store { return newStore(db) })
	rollupStores := pg.NewStores(pool, func(db pg.DB) reports.RollupStore { return newStore(db) })
	usageReports := reports.New(newStore(pool), rollupStores)
	// Verification workflows (docs/architecture.md#verification-workflows). Their SMS jobs are
	// worked only where an SMS provider is wired (the SMPP adapter, Ports.SMS); elsewhere they
	// wait in the table, as the events do without Connect, and a code can still be checked.
	workflowStores := pg.NewStores(pool, func(db pg.DB) workflows.Store { return newStore(db) })
	workflowPorts := workflows.Ports{}
	// The guard reads (the client's policy, its day's spend, the blocked prefixes) while the
	// workflow's transaction holds a connection of the main pool: from that pool, starts that
	// took every connection would each wait for one more, forever. A small pool of its own
	// breaks that cycle; its reads need nothing of the transaction.
	guardPool, err := pg.Open(ctx, cfg.DatabaseURL, pg.PoolConfig{MaxConns: pumpingConns, ApplicationName: "mnv-verification-pumping"})
	if err != nil {
		return nil, fmt.Errorf("database pool of the pumping controls: %w", err)
	}
	b.AddFunc("database pool of the pumping controls", guardPool.Close)
	guard, err := a.pumpingGuard(cfg, store.New(guardPool), hasher, reg, log)
	if err != nil {
		return nil, err
	}
	workflowPorts.Guard = guard
	if swaps, err := operatorapi.NewSwaps(ops.List(), &http.Client{Timeout: cfg.NetworkAPITimeout}, operatorapi.SwapOptions{}); err != nil {
		return nil, fmt.Errorf("MNV_OPERATORS_FILE: %w", err)
	} else if swaps.Len() > 0 {
		// The registry's operators with swap settings answer the policies' SIM-swap and
		// device-swap checks (each operator the APIs its block names); without any, a policy's
		// check is "not configured" (NOT_OFFERED) and its mode decides.
		workflowPorts.SIMSwap = operatorapi.SIMSwapGate{Swaps: swaps}
		workflowPorts.DeviceSwap = operatorapi.SIMSwapGate{Swaps: swaps, Kind: operatorapi.DeviceSwap}
	}
	flowMetrics, err := workflows.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	var flows *workflows.Service
	var sms *smsc.Provider
	if cfg.SMPP.Addr != "" {
		smscMetrics, err := smsc.NewMetrics(reg)
		if err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
		// Receipts come only once flows exists: Start binds after it is made.
		smscCfg, err := cfg.SMPP.smsc()
		if err != nil {
			return nil, err
		}
		sms = smsc.New(smscCfg, smsc.LateReceipts{Service: &flows}, smscMetrics, log)
		workflowPorts.SMS = sms
	}
	flows = workflows.New(workflowStores.Pool(), workflowStores, vault, b.Keyring, accounts, workflowPorts, log).WithMetrics(flowMetrics).
		WithInDoubtHold(cfg.SMSInDoubtHold)
	if cfg.SandboxInbox != nil {
		flows = flows.WithSandbox(cfg.SandboxInbox)
	}
	if sms != nil {
		sms.Start()
		// Closed before the job queue stops: the submits in flight have their answers, one still
		// waiting for the window fails as not sent and its job runs again after the restart.
		b.Add("smsc bind", sms.Close)
		river.AddWorker(queue.Workers(), &workflows.Worker{Service: flows})
		queue.AddQueue(workflows.SMSQueue, smsJobWorkers(cfg.SMPP.Window))
	} else {
		log.Info("no SMS provider: workflows' SMS steps wait in the job table until a process with one sends them")
	}
	b.Loop(func(ctx context.Context) { flows.Sweep(ctx, workflows.SweepEvery) })
	verificationv1.RegisterVerificationServiceServer(srv, &server.Server{
		Sessions: sess, Verifier: verifier, StuckPlus: stuckPlus, Reports: usageReports, Workflows: flows,
		Browser:       browser.New(browserStores.Pool(), browserStores, net, sess, stuckPlus, accounts, cfg.TransactionTTL),
		NumberHeaders: ops.NumberHeaders(), Sandbox: cfg.Sandbox, Log: log,
	})
	b.Loop(func(ctx context.Context) { verifier.Reconcile(ctx, cfg.ReconcileEvery) })
	b.Loop(usage.Roller{Name: "verifications", RollUp: usageReports.RollUp, Every: usage.RollEvery, Log: log}.Run)
	b.Loop(usage.Roller{Name: "workflows", RollUp: flows.RollUp, Every: usage.RollEvery, Log: log}.Run)
	// The reveals whose charge a crash or an absent accounts left PENDING.
	reveals := stuckPlus.Reconciler(cfg.SettleAfter, log)
	b.Loop(func(ctx context.Context) { reveals.Run(ctx, cfg.ReconcileEvery) })
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
		}, facade.Deps{
			Store: store.New(pool), Accounts: accounts, Principals: authn, Sessions: facadeSess, Verifier: verifier, Keyring: b.Keyring, Log: log,
		})
		if err != nil {
			return nil, fmt.Errorf("camara facade: %w", err)
		}
		tlsConfig, err := cfg.Transport.TLSConfig()
		if err != nil {
			return nil, err
		}
		a.camara = &http.Server{Handler: provider, TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
			WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
		b.Go(a.serveCAMARA)
	}
	b.Loop((&purge.Runner{Rules: retention.Rules(store.New(pool), cfg.Retention), Every: cfg.PurgeEvery, Log: log}).Run)
	if cfg.ConnectAddr != "" {
		// Without Connect the settled verifications wait in the relay queue (mnv_relay_backlog)
		// until a process that reaches it drains them.
		conn, err := b.Dial("connect", cfg.ConnectAddr)
		if err != nil {
			return nil, err
		}
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

// pumpingConns is the pumping controls' own pool: each SMS a workflow asks for makes up to four
// short reads (policy, blocked prefixes, spend, and a block's insert).
const pumpingConns = 4

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
	lis, err := a.Base.Listen()
	if err != nil {
		return nil, err
	}
	if a.camara != nil {
		cl, err := net.Listen("tcp", a.cfg.CAMARAAddr)
		if err != nil {
			lis.Close()
			return nil, fmt.Errorf("listen on %s (MNV_VERIFICATION_CAMARA_ADDR): %w", a.cfg.CAMARAAddr, err)
		}
		a.camaraLis = cl
		a.AddFunc("camara listener", func() { cl.Close() })
	}
	return lis, nil
}

// jobWorkers is how many jobs of each queue (events, the relay's drains) a process works at
// once. A drain takes the whole relay queue, so its queue rarely has two at once; the jobs of
// earlier versions worked at once share one call to Connect (groupcommit.Merge).
const jobWorkers = 32

// serveCAMARA serves the CAMARA facade on the listener Listen opened until ctx ends, then
// shuts it down gracefully; Run runs it beside the gRPC server.
func (a *App) serveCAMARA(ctx context.Context) error {
	if a.camaraLis == nil {
		return nil
	}
	done := make(chan error, 1)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.ShutdownTimeout)
		defer cancel()
		done <- a.camara.Shutdown(sctx)
	}()
	serve := a.camara.Serve
	if a.camara.TLSConfig != nil {
		// The certificate comes from TLSConfig (GetCertificate), not from files named here.
		serve = func(l net.Listener) error { return a.camara.ServeTLS(l, "", "") }
	}
	if err := serve(a.camaraLis); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("camara facade: %w", err)
	}
	return <-done
}
