// Package backends keeps an eye on the services behind the gateway: each one's health is
// checked every second (and whenever /readyz asks), so that a call to a service the last check
// could not reach, and that gets no connection within a second, fails with UNAVAILABLE instead
// of waiting for a connection that will not come (a vanished host makes gRPC wait up to its
// 20-second connect timeout).
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
	"google.golang.org/grpc/status"

	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/fault"
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

// Timing of the checks, and how long a call to a backend the last check could not reach waits
// for a connection before it is refused: long enough for one to a backend that has just come
// back, short enough that a vanished one does not hold the caller.
const (
	checkEvery   = time.Second
	checkTimeout = time.Second
	connectWait  = time.Second
)

// Backend is one service behind the gateway.
type Backend struct {
	Name   string
	conn   *grpc.ClientConn
	health healthpb.HealthClient
	state  atomic.Int32
	// errDown is the answer to a call while it is down.
	errDown error
}

// New returns a backend named name, in state Unknown until it is checked. Dial its connection
// with DialOptions, then Attach it.
func New(name string) *Backend {
	return &Backend{Name: name, errDown: apierr.New(codes.Unavailable, fault.Unavailable, name+" is unavailable")}
}

// Attach gives the backend the connection its health is checked over; call it once, before
// Check or Watch.
func (b *Backend) Attach(conn *grpc.ClientConn) {
	b.conn, b.health = conn, healthpb.NewHealthClient(conn)
}

// State is the backend's state as of its last check.
func (b *Backend) State() State { return State(b.state.Load()) }

// Watch checks the backend every second until ctx ends.
func (b *Backend) Watch(ctx context.Context) {
	t := time.NewTicker(checkEvery)
	defer t.Stop()
	for {
		b.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check asks the backend's health now, keeps the answer and returns it. When ctx ends first
// (the caller left), the state is left as it was and returned.
func (b *Backend) Check(ctx context.Context) State {
	if b.State() == Unreachable {
		// Try to connect now rather than after gRPC's backoff, which grows to two minutes: a
		// backend that is back is seen (and used) within a check.
		b.conn.ResetConnectBackoff()
	}
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	// Waiting for a connection (up to the check's timeout) is the point: a backend is reachable
	// when one comes up, not when the channel has not yet noticed that it could.
	resp, err := b.health.Check(cctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	var s State
	switch {
	case err != nil && ctx.Err() != nil:
		return b.State()
	case err != nil:
		s = Unreachable
	case resp.GetStatus() == healthpb.HealthCheckResponse_SERVING:
		s = Serving
	default:
		s = NotServing
	}
	b.state.Store(int32(s))
	return s
}

// admit lets a call through unless the last check could not reach the backend and no
// connection comes up within connectWait. A backend that answers NOT_SERVING refuses calls
// quickly by itself.
func (b *Backend) admit(ctx context.Context, method string, cc *grpc.ClientConn) error {
	// Health checks always go: they are how the backend is seen to come back.
	if b.State() != Unreachable || strings.HasPrefix(method, "/grpc.health.v1.Health/") {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, connectWait)
	defer cancel()
	for {
		s := cc.GetState()
		if s == connectivity.Ready {
			return nil
		}
		if s == connectivity.Idle {
			cc.Connect()
		}
		if !cc.WaitForStateChange(wctx, s) {
			if err := ctx.Err(); err != nil {
				return status.FromContextError(err).Err()
			}
			return b.errDown
		}
	}
}

// UnaryClientInterceptor refuses calls while the backend is down (see admit).
func (b *Backend) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if err := b.admit(ctx, method, cc); err != nil {
			return err
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// StreamClientInterceptor refuses streams (the CSV upload) while the backend is down.
func (b *Backend) StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if err := b.admit(ctx, method, cc); err != nil {
			return nil, err
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
