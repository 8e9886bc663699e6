// Package grpcserver is the gRPC server kit every mnv service runs on: one interceptor chain in
// a fixed order, health, server reflection (Transport.Reflection), Prometheus metrics, TLS when configured (Transport) and a graceful
// shutdown.
package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/grpcflow"
	mnvlog "github.com/mnvhq/mnv/services/platform/logging"
	"github.com/mnvhq/mnv/services/platform/requestid/requestidgrpc"
	"github.com/mnvhq/mnv/services/platform/tracing"
)

// Options configure a Server.
type Options struct {
	Logger *zap.Logger
	// Registerer receives the RPC metrics (RED per method).
	Registerer prometheus.Registerer
	// Guard authenticates every call by the service's policy.
	Guard *auth.Guard
	// Unary interceptors that run after authentication, in order (e.g. idempotency), before
	// the feature gate (auth.Guard.FeatureUnaryInterceptor).
	Unary []grpc.UnaryServerInterceptor
	// Stream interceptors that run after authentication, in order (e.g. rate limits).
	Stream []grpc.StreamServerInterceptor
	// ShutdownTimeout bounds the graceful stop; in-flight calls get this long to finish.
	ShutdownTimeout time.Duration
	// MaxConnectionAge is how long a client connection serves new calls before the server asks
	// the client to reconnect (default 2 minutes, ±10% jitter by grpc-go). Clients then resolve
	// the service's name again, so replicas added by a scale-out receive calls within minutes.
	MaxConnectionAge time.Duration
	// Transport: TLS, and a plaintext health port (LoadTransport).
	Transport Transport
}

// streamWorkers are the goroutines that serve calls, each call after the other. A goroutine per
// call (grpc-go's default) starts on a small stack and grows it, copying it each time, down
// the interceptors and pgx: 8% of verification's CPU on a verify, 13% of accounts' on a
// GetClient. A worker keeps its grown stack from call to call (grpc-go replaces it every 65536
// calls, to give the memory back). Handlers mostly wait on PostgreSQL or another service, so
// there are many more workers than CPUs; a call that finds them all busy gets its own
// goroutine, as before. (NumStreamWorkers is marked experimental by grpc-go: check on upgrade.)
const streamWorkers = 64

// maxConnectionAgeGrace is how long calls in flight on an aged connection may still run. It is
// generous because it ends a stream by force: a CSV upload streams to connect for as long as the
// client takes to send 50 MiB. New calls go to a new connection at once either way.
const maxConnectionAgeGrace = 10 * time.Minute

// Server is a gRPC server with health and metrics. Its stream workers run from New on: a
// Server that will not Serve (its app failed to build, or closes unstarted) must be stopped.
type Server struct {
	*grpc.Server
	Health  *health.Server
	log     *zap.Logger
	timeout time.Duration
	// healthOnly serves Health alone, in plaintext, on healthAddr (Transport.HealthAddr).
	healthOnly *grpc.Server
	healthAddr string
}

var errInternal = apierr.New(codes.Internal, fault.Internal, "internal error")

// New builds the server. Register services on it, then call Serve.
func New(o Options) (*Server, error) {
	if o.Logger == nil || o.Guard == nil {
		return nil, errors.New("grpcserver: Logger and Guard are required")
	}
	if err := o.Guard.Validate(); err != nil {
		return nil, fmt.Errorf("grpcserver: %w", err)
	}
	creds, err := o.Transport.credentials()
	if err != nil {
		return nil, err
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 15 * time.Second
	}
	if o.MaxConnectionAge == 0 {
		o.MaxConnectionAge = 2 * time.Minute
	}
	metrics := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets([]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}),
	))
	if o.Registerer != nil {
		if err := o.Registerer.Register(metrics); err != nil {
			return nil, fmt.Errorf("grpcserver: register metrics: %w", err)
		}
	}
	log := o.Logger
	onPanic := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		log.Error("panic in handler", zap.Any("panic", p), mnvlog.Request(ctx), zap.Stack("stack"))
		return errInternal
	})
	calls := callLog{log: log}
	// Order matters, outermost first: the request id is set before anything logs; logging and
	// metrics wrap recovery, so they see the final code of every call, a panic (INTERNAL) or an
	// auth refusal included; recovery wraps everything that runs code of ours; auth runs before
	// any interceptor or handler that needs the principal.
	unary := []grpc.UnaryServerInterceptor{
		requestidgrpc.UnaryServerInterceptor(),
		calls.unary,
		metrics.UnaryServerInterceptor(),
		recovery.UnaryServerInterceptor(onPanic),
		o.Guard.UnaryInterceptor(),
	}
	// The feature gate is innermost, where the handlers used to check the product: a call it
	// refuses has still spent its rate budget and passed the idempotency interceptor, as then.
	unary = append(append(unary, o.Unary...), o.Guard.FeatureUnaryInterceptor())
	stream := []grpc.StreamServerInterceptor{
		requestidgrpc.StreamServerInterceptor(),
		calls.stream,
		metrics.StreamServerInterceptor(),
		recovery.StreamServerInterceptor(onPanic),
		o.Guard.StreamInterceptor(),
	}
	stream = append(append(stream, o.Stream...), o.Guard.FeatureStreamInterceptor())
	opts := []grpc.ServerOption{
		grpc.NumStreamWorkers(streamWorkers),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: o.MaxConnectionAge, MaxConnectionAgeGrace: maxConnectionAgeGrace}),
	}
	opts = append(opts, grpcflow.ServerOptions()...)
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	// The trace's server span (when tracing is on) is a stats handler: it starts before every
	// interceptor, so the request log line can name its trace.
	srv := grpc.NewServer(append(opts, tracing.ServerOptions()...)...)
	h := health.NewServer()
	healthpb.RegisterHealthServer(srv, h)
	if o.Transport.Reflection {
		// It lists what is registered when it is asked, so services registered after New are
		// described too. The guard admits it without a credential (auth.Guard.Check).
		reflection.Register(srv)
	}
	s := &Server{Server: srv, Health: h, log: log, timeout: o.ShutdownTimeout, healthAddr: o.Transport.HealthAddr}
	if s.healthAddr != "" {
		s.healthOnly = grpc.NewServer()
		healthpb.RegisterHealthServer(s.healthOnly, h)
	}
	// Metrics are initialised lazily per method; registering services happens after New, so the
	// zero series appear on the first call instead. That is enough for rate() and alerts.
	return s, nil
}

// Serve serves on lis until ctx is done, then stops gracefully: health turns NOT_SERVING, new
// calls are refused, in-flight calls get the shutdown timeout to finish.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	if s.healthOnly != nil {
		hl, err := net.Listen("tcp", s.healthAddr)
		if err != nil {
			return fmt.Errorf("listen on %s (MNV_GRPC_HEALTH_ADDR): %w", s.healthAddr, err)
		}
		go func() { _ = s.healthOnly.Serve(hl) }()
		// Stopped last, so that probes see NOT_SERVING for as long as the graceful stop runs.
		defer s.healthOnly.Stop()
	}
	s.Health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	errc := make(chan error, 1)
	go func() { errc <- s.Server.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.Health.Shutdown()
	done := make(chan struct{})
	go func() { s.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.timeout):
		s.log.Warn("graceful stop timed out; closing remaining calls")
		s.Stop()
	}
	return nil
}
