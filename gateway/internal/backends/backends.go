// Package backends keeps an eye on the services behind the gateway: each one's health is
// checked every second, so /readyz can list them without a round trip, and a call to a
// service that is known to be down, and has no working connection, fails at once with
// UNAVAILABLE instead of waiting for a connection that will not come (a vanished host makes
// gRPC wait up to its 20-second connect timeout).
//
// The gateway's own readiness does not depend on them: one service down must not take every
// gateway replica out of rotation, and with it the routes of the services that work.
package backends

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mnvhq/mnv/services/platform/apierr"
)

// State is what the gateway knows of a backend.
type State int32

// States of a backend.
const (
	// Unknown: not checked yet.
	Unknown State = iota
	// Serving: its health check says SERVING.
	Serving
	// NotServing: it answers, and says it does not serve (it is stopping).
	NotServing
	// Unreachable: its health check failed or timed out.
	Unreachable
)

func (s State) String() string {
	switch s {
	case Serving:
		return "SERVING"
	case NotServing:
		return "NOT_SERVING"
	case Unreachable:
		return "UNREACHABLE"
	}
	return "UNKNOWN"
}

// Timing of the checks.
const (
	checkEvery   = time.Second
	checkTimeout = time.Second
)

// Backend is one service behind the gateway.
type Backend struct {
	Name  string
	state atomic.Int32
	// errDown is the answer to a call while it is down.
	errDown error
}

// New returns a backend named name, in state Unknown until Watch has checked it.
func New(name string) *Backend {
	return &Backend{Name: name, errDown: apierr.New(codes.Unavailable, apierr.Unavailable, name+" is unavailable")}
}

// State is the backend's state as of its last check.
func (b *Backend) State() State { return State(b.state.Load()) }

// Watch checks the backend's health over conn every second until ctx ends.
func (b *Backend) Watch(ctx context.Context, conn *grpc.ClientConn) {
	health := healthpb.NewHealthClient(conn)
	t := time.NewTicker(checkEvery)
	defer t.Stop()
	for {
		b.check(ctx, health)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (b *Backend) check(ctx context.Context, health healthpb.HealthClient) {
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	resp, err := health.Check(cctx, &healthpb.HealthCheckRequest{})
	switch {
	case err != nil && ctx.Err() != nil:
		return // the gateway is stopping: keep the last state
	case err != nil:
		b.state.Store(int32(Unreachable))
	case resp.GetStatus() == healthpb.HealthCheckResponse_SERVING:
		b.state.Store(int32(Serving))
	default:
		b.state.Store(int32(NotServing))
	}
}

// down reports whether a call over cc would only wait to fail: the last check could not reach
// the backend and the connection is not up. A connection that is up (the backend is back, and
// the next check will say so) is used at once; one that says NOT_SERVING answers fast by itself.
func (b *Backend) down(cc *grpc.ClientConn) bool {
	return b.State() == Unreachable && cc.GetState() != connectivity.Ready
}

// health checks are never refused: they are how the backend is seen to come back.
func isHealth(method string) bool { return strings.HasPrefix(method, "/grpc.health.v1.Health/") }

// UnaryClientInterceptor fails calls at once while the backend is down.
func (b *Backend) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if !isHealth(method) && b.down(cc) {
			return b.errDown
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// StreamClientInterceptor fails streams (the CSV upload) at once while the backend is down.
func (b *Backend) StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if !isHealth(method) && b.down(cc) {
			return nil, b.errDown
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
}

// DialOptions install the interceptors on the backend's connection.
func (b *Backend) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(b.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(b.StreamClientInterceptor()),
	}
}
