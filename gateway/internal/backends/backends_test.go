package backends_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mnvhq/mnv/gateway/internal/backends"
	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/fault"
)

const echo = "/test.Svc/Echo"

// serve runs a real gRPC server with health and test.Svc/Echo on addr ("127.0.0.1:0" for any
// port) and returns its address and a function that stops it.
func serve(t *testing.T, addr string) (string, func()) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Svc",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Echo",
			Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.StringValue)
				return in, dec(in)
			},
		}},
	}, struct{}{})
	go func() { _ = srv.Serve(lis) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			srv.Stop()
		}
	}
	t.Cleanup(stop)
	return lis.Addr().String(), stop
}

func dial(t *testing.T, b *backends.Backend, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, append(b.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	b.Attach(conn)
	return conn
}

// call makes one Echo call and says how long it took.
func call(conn *grpc.ClientConn) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	began := time.Now()
	err := conn.Invoke(ctx, echo, wrapperspb.String("hi"), new(wrapperspb.StringValue))
	return time.Since(began), err
}

// TestDownBackendFailsFast follows one backend through its life: serving, stopped (calls fail
// with UNAVAILABLE), back on its address (the next check sees it, whatever gRPC's reconnect
// backoff has grown to), and a backend that accepts connections but never answers, where gRPC
// alone waits for its 20-second connect timeout.
func TestDownBackendFailsFast(t *testing.T) {
	ctx := context.Background()
	addr, stop := serve(t, "127.0.0.1:0")
	b := backends.New("svc")
	conn := dial(t, b, addr)

	if b.State() != backends.Unknown {
		t.Fatalf("state before any check: %v", b.State())
	}
	if _, err := call(conn); err != nil {
		t.Fatalf("call before any check: %v", err)
	}
	if s := b.Check(ctx); s != backends.Serving {
		t.Fatalf("check of a serving backend: %v", s)
	}

	stop()
	if s := b.Check(ctx); s != backends.Unreachable {
		t.Fatalf("check of a stopped backend: %v", s)
	}
	took, err := call(conn)
	if status.Code(err) != codes.Unavailable || apierr.Parse(err).Reason != fault.Unavailable || took > 3*time.Second {
		t.Fatalf("call to a stopped backend: %v after %v, want UNAVAILABLE within a second or so", err, took)
	}

	// Failed attempts grow gRPC's reconnect backoff; the backend comes back after several.
	for range 3 {
		call(conn)
	}
	serve(t, addr)
	if s := b.Check(ctx); s != backends.Serving {
		t.Fatalf("check of the backend back on %s: %v", addr, s)
	}
	if took, err := call(conn); err != nil {
		t.Fatalf("call to the backend back on %s: %v after %v", addr, err, took)
	}

	t.Run("a silent backend", func(t *testing.T) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		go func() {
			var held []net.Conn
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			for {
				c, err := lis.Accept()
				if err != nil {
					return
				}
				held = append(held, c)
			}
		}()
		silent := backends.New("silent")
		conn := dial(t, silent, lis.Addr().String())
		if s := silent.Check(ctx); s != backends.Unreachable {
			t.Fatalf("check of a silent backend: %v", s)
		}
		took, err := call(conn)
		if status.Code(err) != codes.Unavailable || took > 3*time.Second {
			t.Fatalf("call to a silent backend: %v after %v, want UNAVAILABLE within a second or so", err, took)
		}
	})
}
