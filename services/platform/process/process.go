// Package process is the common start of every mnv binary: a logger, a context that ends on
// SIGINT or SIGTERM, a Prometheus registry served over HTTP when MNV_METRICS_ADDR is set,
// OpenTelemetry tracing when OTEL_EXPORTER_OTLP_ENDPOINT is set (flushed at exit), and pprof
// when MNV_DEBUG_ADDR is set.
package process

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/logging"
	"github.com/mnvhq/mnv/services/platform/tracing"
)

// defaultGCPercent is the GC target when GOGC is not set.
const defaultGCPercent = 400

// RunFunc is a binary's body: it runs until ctx ends and returns nil after a clean shutdown.
type RunFunc func(ctx context.Context, env *config.Env, log *zap.Logger, reg *prometheus.Registry) error

// Option adjusts Main for one binary.
type Option func(*options)

type options struct {
	gcPercent int
	migrate   func(ctx context.Context, env *config.Env, log *zap.Logger) error
}

// GCPercent sets the binary's GC target when GOGC is not set, instead of 400.
func GCPercent(p int) Option { return func(o *options) { o.gcPercent = p } }

// Migrate gives a binary run by Serve its `migrate` command: it reads the database URL alone
// (databaseURL), so a migration step holds no other secret, applies the migrations (migrate)
// and exits.
func Migrate(databaseURL func(*config.Env) (string, error), migrate func(ctx context.Context, url string, log *zap.Logger) error) Option {
	return func(o *options) {
		o.migrate = func(ctx context.Context, env *config.Env, log *zap.Logger) error {
			url, err := databaseURL(env)
			if err != nil {
				return err
			}
			return migrate(ctx, url, log)
		}
	}
}

// Main runs run and exits the process: 0 after a clean shutdown, 1 otherwise.
func Main(name string, run RunFunc, opts ...Option) {
	o := newOptions(opts)
	if os.Getenv("GOGC") == "" {
		// Every service keeps a small heap (a few tens of MB) and allocates per request; a GC
		// target of 400% trades some of that memory for CPU (the gateway spent a fifth less CPU
		// per request in make bench). GOGC, and GOMEMLIMIT for a hard ceiling, still apply.
		debug.SetGCPercent(o.gcPercent)
	}
	env := config.FromOS()
	log, err := logging.New(env.String("MNV_LOG_LEVEL", "info"), env.String("MNV_LOG_FORMAT", "json"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	log = log.With(zap.String("service", name))
	defer func() { _ = log.Sync() }()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// Tracing is decided before run builds anything: servers, clients and pools ask whether it
	// is on when they are made.
	shutdownTracing, err := tracing.Setup(ctx, env, name, log)
	if err != nil {
		log.Error("exiting", zap.Error(err))
		_ = log.Sync()
		os.Exit(1)
	}
	flush := func() {
		fctx, cancel := context.WithTimeout(context.Background(), tracing.ShutdownTimeout)
		defer cancel()
		if err := shutdownTracing(fctx); err != nil {
			log.Warn("flush traces", zap.Error(err))
		}
	}

	reg := NewRegistry()
	if addr := env.String("MNV_METRICS_ADDR", ""); addr != "" {
		defer serveAside(log, "metrics server", "MNV_METRICS_ADDR", addr, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))()
	}

	if addr := env.String("MNV_DEBUG_ADDR", ""); addr != "" {
		// pprof on its own listener, off by default: never on the API's address.
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		defer serveAside(log, "debug server", "MNV_DEBUG_ADDR", addr, mux)()
	}

	err = run(ctx, env, log, reg)
	flush()
	if err != nil {
		log.Error("exiting", zap.Error(err))
		_ = log.Sync()
		os.Exit(1)
	}
	log.Info("stopped")
}

// serveAside serves h on addr, which the variable sets, beside the service until the returned
// stop is called. A failure to listen is logged, naming the variable, and the service runs
// without it: metrics and pprof are not worth an outage.
func serveAside(log *zap.Logger, name, variable, addr string, h http.Handler) (stop func()) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error(name, zap.Error(fmt.Errorf("listen on %s (%s): %w", addr, variable, err)))
		return func() {}
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(name, zap.Error(err))
		}
	}()
	return func() { _ = srv.Close() }
}

func newOptions(opts []Option) options {
	o := options{gcPercent: defaultGCPercent}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Service is what a binary serves: it listens, runs until its context ends and then releases
// what it opened; Close releases it when it never runs.
type Service interface {
	Listen() (net.Listener, error)
	Run(ctx context.Context, lis net.Listener) error
	Close() error
}

// BuildFunc loads a service's configuration from env and builds it, registering its metrics on
// reg.
type BuildFunc func(ctx context.Context, env *config.Env, log *zap.Logger, reg *prometheus.Registry) (Service, error)

// Build is the BuildFunc of a service whose configuration load reads and which construct
// builds: an app's LoadConfig and New.
func Build[C any, S Service](load func(*config.Env) (C, error), construct func(context.Context, C, *zap.Logger, prometheus.Registerer) (S, error)) BuildFunc {
	return func(ctx context.Context, env *config.Env, log *zap.Logger, reg *prometheus.Registry) (Service, error) {
		cfg, err := load(env)
		if err != nil {
			return nil, err
		}
		// Not `return construct(...)`: a nil S in a Service interface is not nil.
		svc, err := construct(ctx, cfg, log, reg)
		if err != nil {
			return nil, err
		}
		return svc, nil
	}
}

// Serve is the main of a service's binary. With no argument it builds the service, listens and
// serves until SIGINT or SIGTERM; with `migrate`, given the Migrate option, it migrates and
// exits; any other argument is refused. It exits like Main.
func Serve(name string, build BuildFunc, opts ...Option) {
	Main(name, serve(build, Command(), newOptions(opts).migrate), opts...)
}

// serve is the RunFunc of Serve for command.
func serve(build BuildFunc, command string, migrate func(context.Context, *config.Env, *zap.Logger) error) RunFunc {
	return func(ctx context.Context, env *config.Env, log *zap.Logger, reg *prometheus.Registry) error {
		switch {
		case command == "":
		case command == "migrate" && migrate != nil:
			return migrate(ctx, env, log)
		case migrate != nil:
			return fmt.Errorf("unknown command %q: run with no argument to serve, or with migrate", command)
		default:
			return fmt.Errorf("unknown command %q: run with no argument to serve", command)
		}
		svc, err := build(ctx, env, log, reg)
		if err != nil {
			return err
		}
		lis, err := svc.Listen()
		if err != nil {
			return errors.Join(err, svc.Close())
		}
		log.Info("serving", zap.String("addr", lis.Addr().String()))
		return svc.Run(ctx, lis)
	}
}

// Command returns the command a binary was started with: its first argument ("migrate"), or
// "" to serve.
func Command() string {
	if len(os.Args) > 1 {
		return os.Args[1]
	}
	return ""
}

// NewRegistry returns a registry with the Go runtime and process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(RuntimeCollectors()...)
	return reg
}

// RuntimeCollectors are the collectors every binary registers besides its app's: Go's runtime
// (go_*) and the process (process_*).
func RuntimeCollectors() []prometheus.Collector {
	return []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
}
