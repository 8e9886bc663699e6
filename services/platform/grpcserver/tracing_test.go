package grpcserver_test

import (
	"context"
	"net"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/tracing"
)

// TestTracing sends a traced call over a real socket to a server whose handler queries a real
// PostgreSQL, and checks that the spans form one trace, caller → gRPC client → gRPC server →
// query, that the request's log line names that trace, and that health checks stay untraced.
func TestTracing(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(tracing.Install(tp))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pg.Open(ctx, pgtest.NewDatabase(t), pg.PoolConfig{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	core, logs := observer.New(zapcore.DebugLevel)
	s, err := grpcserver.New(grpcserver.Options{
		Logger: zap.New(core),
		Guard:  auth.NewGuard(auth.Policy{"/test.Traced/Query": {Credential: principal.None}}, nil, auth.NewServiceTokens(callers, "")),
	})
	if err != nil {
		t.Fatal(err)
	}
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Traced",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Query",
			Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.StringValue)
				if err := dec(in); err != nil {
					return nil, err
				}
				h := func(ctx context.Context, _ any) (any, error) {
					var n int
					if err := pool.QueryRow(ctx, "SELECT 1 + $1::int", 1).Scan(&n); err != nil {
						return nil, err
					}
					return wrapperspb.String("ok"), nil
				}
				return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/test.Traced/Query"}, h)
			},
		}},
	}, struct{}{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	sctx, stop := context.WithCancel(context.Background())
	go func() { served <- s.Serve(sctx, lis) }()
	defer func() { stop(); <-served }()

	conn, err := grpc.NewClient(lis.Addr().String(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, tracing.DialOptions()...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	callCtx, root := otel.Tracer("test").Start(ctx, "caller")
	if err := conn.Invoke(callCtx, "/test.Traced/Query", wrapperspb.String("in"), new(wrapperspb.StringValue)); err != nil {
		t.Fatal(err)
	}
	root.End()

	// The server span ends after the answer is sent: wait for it.
	byName := map[string]sdktrace.ReadOnlySpan{}
	for deadline := time.Now().Add(5 * time.Second); ; {
		clear(byName)
		for _, sp := range spans.Ended() {
			key := sp.Name() + "/" + sp.SpanKind().String()
			byName[key] = sp
		}
		if len(byName) >= 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	tests := []struct {
		span   string // name/kind
		parent string // name/kind of its parent; "" for the root
	}{
		{"caller/internal", ""},
		{"test.Traced/Query/client", "caller/internal"},
		{"test.Traced/Query/server", "test.Traced/Query/client"},
		{"SELECT/client", "test.Traced/Query/server"},
	}
	for _, tt := range tests {
		t.Run(tt.span, func(t *testing.T) {
			sp, ok := byName[tt.span]
			if !ok {
				t.Fatalf("no span %s; have %v", tt.span, keys(byName))
			}
			if sp.SpanContext().TraceID() != root.SpanContext().TraceID() {
				t.Errorf("span %s is in trace %s, want %s", tt.span, sp.SpanContext().TraceID(), root.SpanContext().TraceID())
			}
			if tt.parent == "" {
				return
			}
			if p := byName[tt.parent]; p == nil || sp.Parent().SpanID() != p.SpanContext().SpanID() {
				t.Errorf("span %s has parent %s, want the span of %s", tt.span, sp.Parent().SpanID(), tt.parent)
			}
		})
	}
	if len(byName) != len(tests) {
		t.Errorf("spans %v, want exactly %d (health checks are not traced)", keys(byName), len(tests))
	}

	t.Run("the request log line names the trace", func(t *testing.T) {
		server := byName["test.Traced/Query/server"]
		if server == nil {
			t.Skip("no server span")
		}
		for _, e := range logs.All() {
			m := e.ContextMap()
			if m["grpc.method"] != "Query" {
				continue
			}
			if m["trace_id"] != server.SpanContext().TraceID().String() || m["span_id"] != server.SpanContext().SpanID().String() {
				t.Errorf("log line %q has trace_id %v span_id %v, want %s %s", e.Message, m["trace_id"], m["span_id"],
					server.SpanContext().TraceID(), server.SpanContext().SpanID())
			}
			if m["request_id"] == nil || m["request_id"] == "" {
				t.Errorf("log line %q lost its request id", e.Message)
			}
			return
		}
		t.Errorf("no log line of the call; logs: %v", logs.All())
	})
}

func keys(m map[string]sdktrace.ReadOnlySpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
