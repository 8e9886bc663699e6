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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"go.uber.org/zap"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/accounts/internal/clients"
	"github.com/mnvhq/mnv/services/accounts/internal/credentials"
	"github.com/mnvhq/mnv/services/accounts/internal/people"
	"github.com/mnvhq/mnv/services/accounts/internal/principals"
	"github.com/mnvhq/mnv/services/accounts/internal/reports"
	"github.com/mnvhq/mnv/services/accounts/internal/server"
	"github.com/mnvhq/mnv/services/accounts/internal/store"
	"github.com/mnvhq/mnv/services/accounts/migrations"
	"github.com/mnvhq/mnv/services/connect/connectclient"
	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/outbox"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/service"
	"github.com/mnvhq/mnv/services/platform/tracing"
	"github.com/mnvhq/mnv/services/platform/usage"
)

// Schema is the Postgres schema the service owns.
const Schema = "accounts"

// Config is the service's configuration: the part every service reads (service.Config) and
// accounts' own.
type Config struct {
	service.Config
	// Pepper keys the fingerprints of credentials (MNV_PEPPER or MNV_PEPPER_FILE).
	Pepper string
	// AdminToken authenticates the operator (MNV_ADMIN_TOKEN[_FILE]).
	AdminToken string
	// Prices override the default prices (MNV_PRICES), e.g. "VERIFICATION=2,STUCK_PLUS_REVEAL=0".
	Prices string
	// ConnectAddr is where connect listens, which delivers accounts' events to the clients'
	// webhook endpoints (MNV_CONNECT_ADDR). Empty: events are still written with their facts,
	// and wait in accounts' queue until a process with an address forwards them. Calls to it
	// present InternalToken, required then.
	ConnectAddr string
	// LowBalance is the balance.low threshold of the clients without one of their own
	// (MNV_LOW_BALANCE_THRESHOLD); 0 sends none.
	LowBalance int64
	// ExpiryNotice is how long before a balance expires balance.expiring is sent
	// (MNV_BALANCE_EXPIRY_NOTICE); ExpiryCheckEvery is how often the elected replica looks
	// (MNV_BALANCE_EXPIRY_CHECK_EVERY).
	ExpiryNotice     time.Duration
	ExpiryCheckEvery time.Duration
	// Console is where the console is served and how long its sessions, step-ups and
	// invitations last (MNV_CONSOLE_ORIGIN, MNV_CONSOLE_SESSION_IDLE, MNV_CONSOLE_SESSION_MAX,
	// MNV_CONSOLE_STEP_UP_WINDOW, MNV_CONSOLE_INVITATION_TTL).
	Console people.Config
}

// vars are accounts' own names of the common variables.
var vars = service.Vars{
	GRPCAddr: "MNV_ACCOUNTS_GRPC_ADDR", DatabaseURL: "MNV_ACCOUNTS_DATABASE_URL", DBMaxConns: "MNV_ACCOUNTS_DB_MAX_CONNS",
}

// DefaultConfig is the configuration with every default set and no secrets.
func DefaultConfig() Config {
	return Config{
		Config:      service.DefaultConfig("127.0.0.1:9091", vars),
		ConnectAddr: "127.0.0.1:9093", ExpiryNotice: 7 * 24 * time.Hour, ExpiryCheckEvery: time.Minute,
		Console: people.DefaultConfig(),
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
	c.Pepper = env.Secret("MNV_PEPPER")
	c.AdminToken = env.Secret("MNV_ADMIN_TOKEN")
	c.Prices = env.String("MNV_PRICES", "")
	c.ConnectAddr = env.String("MNV_CONNECT_ADDR", c.ConnectAddr)
	c.LowBalance = int64(env.Int("MNV_LOW_BALANCE_THRESHOLD", int(c.LowBalance)))
	c.ExpiryNotice = env.Duration("MNV_BALANCE_EXPIRY_NOTICE", c.ExpiryNotice)
	c.ExpiryCheckEvery = env.Duration("MNV_BALANCE_EXPIRY_CHECK_EVERY", c.ExpiryCheckEvery)
	c.Console.Origin = env.String("MNV_CONSOLE_ORIGIN", c.Console.Origin)
	c.Console.IdleTimeout = env.Duration("MNV_CONSOLE_SESSION_IDLE", c.Console.IdleTimeout)
	c.Console.MaxAge = env.Duration("MNV_CONSOLE_SESSION_MAX", c.Console.MaxAge)
	c.Console.StepUpWindow = env.Duration("MNV_CONSOLE_STEP_UP_WINDOW", c.Console.StepUpWindow)
	c.Console.InvitationTTL = env.Duration("MNV_CONSOLE_INVITATION_TTL", c.Console.InvitationTTL)
	if c.ConnectAddr != "" {
		env.Require("MNV_INTERNAL_TOKEN", c.InternalToken)
	}
	env.Require("MNV_PEPPER", c.Pepper)
	env.Require("MNV_ADMIN_TOKEN", c.AdminToken)
	if err := errors.Join(env.Err(), err); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Validate checks values that parse but make no sense.
func (c Config) Validate() error {
	errs := []error{c.Config.Validate(outbox.AttemptTimeout), c.Console.Validate()}
	if len(c.AdminToken) < 32 {
		errs = append(errs, errors.New("MNV_ADMIN_TOKEN: must be at least 32 characters"))
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

// App is a running accounts service: the service skeleton (service.Base: Listen, Run, Close)
// with accounts' domain on it.
type App struct {
	*service.Base
	cfg Config
	log *zap.Logger
}

// schema is accounts' database.
var schema = service.Schema{Tables: migrations.Tables, Migrations: migrations.FS}

// Migrate applies the schema's migrations and returns: the `accounts migrate` command
// (service.Migrate).
func Migrate(ctx context.Context, databaseURL string, log *zap.Logger) error {
	return service.Migrate(ctx, databaseURL, schema, log)
}

// New connects to the database, migrates the schema and builds the server. reg receives the
// service's metrics.
func New(ctx context.Context, cfg Config, log *zap.Logger, reg prometheus.Registerer) (_ *App, err error) {
	fp, err := crypto.NewFingerprinter(cfg.Pepper)
	if err != nil {
		return nil, fmt.Errorf("MNV_PEPPER: %w", err)
	}
	prices, err := billing.ParsePrices(cfg.Prices)
	if err != nil {
		return nil, fmt.Errorf("MNV_PRICES: %w", err)
	}
	b, err := service.Open(ctx, cfg.Config, service.Deps{Schema: schema, Idempotent: server.IdempotentMethods(), Log: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	defer b.CloseOnError(&err)
	// The one engine of accounts' background work: the stores write events' forward jobs in
	// the transactions of their facts (box), and the expiry job runs on it.
	queue := b.Jobs
	box := outbox.New(queue)
	// Each domain package sees the store through its own port; the store is the same. A batch of
	// several clients' debits is written as the schema's spread says.
	credStores := pg.NewStores(b.Pool, func(db pg.DB) credentials.Store { return store.New(db).WithOutbox(box) })
	ledgerStore := func(db pg.DB) billing.Store { return store.New(db).WithOutbox(box).WithSpread(b.Spread) }
	ledgerStores := pg.NewStores(b.Pool, ledgerStore)
	clientStores := pg.NewStores(b.Pool, func(db pg.DB) clients.Store { return store.New(db).WithOutbox(box) })
	creds := credentials.New(credStores.Pool(), credStores, fp, log)
	ledger := billing.NewLedger(ledgerStores.Pool(), ledgerStores, prices)
	ledger.LowBalance = cfg.LowBalance
	batchPool, err := b.OpenBatchPool(ctx, billing.BatchConns)
	if err != nil {
		return nil, err
	}
	ledger.WithBatchStore(pg.NewStores(batchPool, ledgerStore).Piped())
	river.AddWorker(queue.Workers(), &billing.ExpiryWorker{Ledger: ledger, Notice: cfg.ExpiryNotice})
	queue.AddQueue(billing.ExpiryQueue, 1)
	queue.AddPeriodic(billing.ExpiryJob(cfg.ExpiryCheckEvery))
	if cfg.ConnectAddr != "" {
		conn, err := b.Dial("connect", cfg.ConnectAddr)
		if err != nil {
			return nil, err
		}
		outbox.Register(queue.Workers(), connectclient.NewPublisher(conn))
		queue.AddQueue(outbox.Queue, forwardWorkers)
	}
	if ledger.Metrics, err = billing.NewMetrics(reg); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	ledger.Traced = tracing.Enabled()
	peopleStores := pg.NewStores(b.Pool, func(db pg.DB) people.Store { return store.New(db) })
	folks, err := people.New(peopleStores.Pool(), peopleStores, fp, b.Keyring, cfg.Console)
	if err != nil {
		return nil, err
	}
	rollupStores := pg.NewStores(b.Pool, func(db pg.DB) reports.RollupStore { return store.New(db) })
	spend := reports.New(store.New(b.Pool), rollupStores)
	deps := server.Deps{
		Clients: clients.New(clientStores.Pool(), clientStores, b.Keyring, creds, ledger), Credentials: creds, Ledger: ledger,
		People: folks, Reports: spend, Log: log, Now: time.Now,
	}
	srv, err := b.NewServer(service.ServerOptions{Policy: server.Policy(), Authenticator: authenticator{creds, folks}, AdminToken: cfg.AdminToken})
	if err != nil {
		return nil, err
	}
	accountsv1.RegisterAccountsServiceServer(srv, &server.Public{Deps: deps})
	hub, err := principals.NewHub(reg)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	// The listener feeds the WatchPrincipals streams from the database.
	listener := &pg.Listener{Channel: principals.Channel, ApplicationName: "mnv-accounts-listen", Beat: principalBeat, Handler: hub, Log: log}
	accountsv1.RegisterAccountsInternalServiceServer(srv, &server.Internal{Deps: deps, Watch: server.Watch{Hub: hub, HeartbeatEvery: principalBeat}})
	accountsv1.RegisterAccountsAdminServiceServer(srv, &server.Admin{Deps: deps})
	accountsv1.RegisterPeopleServiceServer(srv, &server.People{Deps: deps})
	b.Loop(creds.Run)
	b.Loop(usage.Roller{Name: "spend", RollUp: spend.RollUp, Every: usage.RollEvery, Log: log}.Run)
	b.Loop(func(ctx context.Context) { listener.Listen(ctx, b.Pool) })
	return &App{Base: b, cfg: cfg, log: log}, nil
}

// authenticator resolves the client credentials of calls to accounts itself: keys and tokens
// (credentials), sessions (people).
type authenticator struct {
	*credentials.Service
	people *people.Service
}

func (a authenticator) AuthenticateSession(ctx context.Context, token string) (principal.Principal, error) {
	return a.people.Authenticate(ctx, token)
}

// principalBeat is how often the listen connection is proved and the WatchPrincipals streams
// hear a heartbeat; callers stop trusting their cache after a few missed (accountsclient).
const principalBeat = 250 * time.Millisecond

// forwardWorkers forward events to connect at once: a publish is one short call, so a few keep
// up with accounts' events.
const forwardWorkers = 4

// Run serves on lis until ctx ends, then shuts down gracefully and closes what New opened.
func (a *App) Run(ctx context.Context, lis net.Listener) error {
	if a.cfg.ConnectAddr == "" {
		// Said at every start: nothing else shows that clients' webhooks get nothing from here.
		a.log.Warn("MNV_CONNECT_ADDR is empty: accounts' events (balance, API keys) are written but not forwarded to connect; they wait in the queue until a replica with MNV_CONNECT_ADDR runs")
	}
	return a.Base.Run(ctx, lis)
}
