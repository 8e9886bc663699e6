package service

import (
	"errors"
	"fmt"
	"time"

	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/grpcclient"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
	"github.com/mnvhq/mnv/services/platform/jobs"
)

// Vars name the variables that carry the service's own name. Each app spells them out whole, so
// a search for one finds the service that reads it (docs/operations.md lists them).
type Vars struct {
	// GRPCAddr sets where the gRPC server listens (MNV_ACCOUNTS_GRPC_ADDR).
	GRPCAddr string
	// DatabaseURL is the service's own database URL, read before DATABASE_URL
	// (MNV_ACCOUNTS_DATABASE_URL).
	DatabaseURL string
	// DBMaxConns bounds its pool (MNV_ACCOUNTS_DB_MAX_CONNS).
	DBMaxConns string
}

// Config is the part of a service's configuration every service reads the same way. A
// service's Config embeds it, so its fields read as the service's own (cfg.GRPCAddr).
type Config struct {
	// Vars are the names of the service's own variables, for Load, Validate and the errors.
	Vars Vars
	// GRPCAddr is where the gRPC server listens (Vars.GRPCAddr).
	GRPCAddr string
	// DatabaseURL (Vars.DatabaseURL, else DATABASE_URL).
	DatabaseURL string
	// DBMaxConns bounds the pool (Vars.DBMaxConns).
	DBMaxConns int
	// InternalToken is the service's own credential, presented to the services it calls
	// (MNV_INTERNAL_TOKEN[_FILE]). Read here; each service says whether it is required.
	InternalToken string
	// TLSCAFile, when set, makes the calls to other services TLS, verified against it
	// (MNV_GRPC_TLS_CA).
	TLSCAFile string
	// InternalCallers are the digests of the tokens of the services that call this one, by
	// caller (MNV_INTERNAL_CALLERS).
	InternalCallers auth.Callers
	// Transport is the gRPC server's TLS and health port (MNV_GRPC_TLS_CERT, MNV_GRPC_TLS_KEY,
	// MNV_GRPC_HEALTH_ADDR).
	Transport grpcserver.Transport
	// DataKeys seal personal data and idempotent answers at rest (MNV_DATA_KEYS[_FILE]):
	// "id:base64,...", the first one current.
	DataKeys string
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
}

// DefaultConfig is the common part with every default set and no secrets: the gRPC server on
// grpcAddr, the service's own variables named by vars.
func DefaultConfig(grpcAddr string, vars Vars) Config {
	return Config{
		Vars: vars, GRPCAddr: grpcAddr, DBMaxConns: 32, ClientRate: 50, ClientBurst: 100,
		Jobs: jobs.Config{RescueAfter: jobs.DefaultRescueAfter}, ShutdownTimeout: 15 * time.Second,
	}
}

// Load reads the common variables from env over c (its defaults, DefaultConfig). What does
// not parse, and MNV_DATA_KEYS or the database URL missing, is recorded in env with the
// service's own problems; the internal callers' and the transport's are returned.
func (c *Config) Load(env *config.Env) error {
	c.GRPCAddr = env.String(c.Vars.GRPCAddr, c.GRPCAddr)
	c.DatabaseURL = env.DatabaseURL(c.Vars.DatabaseURL)
	c.DBMaxConns = env.Int(c.Vars.DBMaxConns, c.DBMaxConns)
	c.InternalToken = env.Secret("MNV_INTERNAL_TOKEN")
	c.TLSCAFile = env.String("MNV_GRPC_TLS_CA", c.TLSCAFile)
	c.DataKeys = env.Secret("MNV_DATA_KEYS")
	c.ClientRate = env.Float("MNV_CLIENT_RATE", c.ClientRate)
	c.ClientBurst = env.Int("MNV_CLIENT_BURST", c.ClientBurst)
	c.RedisURL = env.Secret("MNV_REDIS_URL")
	c.ShutdownTimeout = env.Duration("MNV_SHUTDOWN_TIMEOUT", c.ShutdownTimeout)
	c.Jobs = jobs.LoadConfig(env)
	env.Require("MNV_DATA_KEYS", c.DataKeys)
	callers, cerr := auth.LoadCallers(env)
	transport, terr := grpcserver.LoadTransport(env)
	c.InternalCallers, c.Transport = callers, transport
	return errors.Join(cerr, terr)
}

// Validate checks the common values that parse but make no sense. longestAttempt is the
// longest attempt of the service's jobs, which MNV_JOBS_RESCUE_AFTER must exceed.
func (c Config) Validate(longestAttempt time.Duration) error {
	var errs []error
	if err := c.Jobs.Validate(longestAttempt); err != nil {
		errs = append(errs, err)
	}
	if c.DBMaxConns < 2 || c.DBMaxConns > 1000 {
		errs = append(errs, fmt.Errorf("%s: must be between 2 and 1000", c.Vars.DBMaxConns))
	}
	if c.ClientRate < 0 || c.ClientBurst < 1 {
		errs = append(errs, errors.New("MNV_CLIENT_RATE, MNV_CLIENT_BURST: must not be negative (burst at least 1)"))
	}
	return errors.Join(errs...)
}

// Client is how the service calls another: with its own token, over TLS when a CA is set.
func (c Config) Client() grpcclient.Options {
	return grpcclient.Options{Token: c.InternalToken, CAFile: c.TLSCAFile}
}
