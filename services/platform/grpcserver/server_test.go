package grpcserver_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
	"github.com/mnvhq/mnv/services/platform/metricstest"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/requestid"
)

const internalToken = "internal-token-for-grpcserver-test"

// callers admit internalToken as the gateway.
var callers = auth.Callers{}.With(auth.CallerGateway, internalToken)

// testService is registered by hand with wrapperspb messages, so no generated code is needed.
// Every method answers with the request id its handler saw.
func testService() *grpc.ServiceDesc {
	method := func(name string, body func(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error)) grpc.MethodDesc {
		return grpc.MethodDesc{
			MethodName: name,
			Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.StringValue)
				if err := dec(in); err != nil {
					return nil, err
				}
				h := func(ctx context.Context, req any) (any, error) { return body(ctx, req.(*wrapperspb.StringValue)) }
				if icpt == nil {
					return h(ctx, in)
				}
				return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Svc/" + name}, h)
			},
		}
	}
	echo := func(ctx context.Context, _ *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
		return wrapperspb.String(requestid.From(ctx)), nil
	}
	return &grpc.ServiceDesc{
		ServiceName: "test.Svc",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			method("Echo", echo),
			method("Secret", echo),
			method("NoRule", echo),
			method("Fail", func(context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
				return nil, apierr.New(codes.NotFound, fault.NotFound, "no such thing")
			}),
			method("Panic", func(context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
				panic("boom: private panic detail")
			}),
		},
	}
}

var policy = auth.Policy{
	"/test.Svc/Echo":   {Credential: principal.None},
	"/test.Svc/Secret": {Credential: principal.Internal, Callers: []string{auth.CallerGateway}},
	"/test.Svc/Fail":   {Credential: principal.None},
	"/test.Svc/Panic":  {Credential: principal.None},
}

func TestNewRequiresLoggerAndGuard(t *testing.T) {
	guard := auth.NewGuard(policy, nil, auth.NewServiceTokens(callers, ""))
	reg := prometheus.NewRegistry()
	tests := []struct {
		name    string
		opts    grpcserver.Options
		wantErr bool
	}{
		{"no logger", grpcserver.Options{Guard: guard}, true},
		{"no guard", grpcserver.Options{Logger: zap.NewNop()}, true},
		{"neither", grpcserver.Options{}, true},
		{"both, no registerer", grpcserver.Options{Logger: zap.NewNop(), Guard: guard}, false},
		{"with a registerer", grpcserver.Options{Logger: zap.NewNop(), Guard: guard, Registerer: reg}, false},
		// The same metrics cannot be registered twice on one registry.
		{"registerer used twice", grpcserver.Options{Logger: zap.NewNop(), Guard: guard, Registerer: reg}, true},
		// An internal method that names no caller would refuse every call: caught at start-up.
		{"internal rule without callers", grpcserver.Options{Logger: zap.NewNop(), Guard: auth.NewGuard(
			auth.Policy{"/test.Svc/Secret": {Credential: principal.Internal}}, nil, auth.NewServiceTokens(callers, ""))}, true},
		{"certificate without key", grpcserver.Options{Logger: zap.NewNop(), Guard: guard, Transport: grpcserver.Transport{CertFile: "x.crt"}}, true},
		{"unreadable certificate", grpcserver.Options{Logger: zap.NewNop(), Guard: guard, Transport: grpcserver.Transport{CertFile: "no.crt", KeyFile: "no.key"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := grpcserver.New(tt.opts)
			if (err != nil) != tt.wantErr {
				t.Fatalf("New error = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil {
				if s == nil || s.Health == nil {
					t.Fatal("New returned no server or no health server")
				}
				s.Stop()
			}
		})
	}
}

type recorder struct {
	mu      sync.Mutex
	methods []string
}

func (r *recorder) interceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	r.mu.Lock()
	r.methods = append(r.methods, info.FullMethod)
	r.mu.Unlock()
	return h(ctx, req)
}

func (r *recorder) saw() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.methods, ",")
}

func TestServer(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	s, err := grpcserver.New(grpcserver.Options{
		Logger:     zap.New(core),
		Registerer: reg,
		Guard:      auth.NewGuard(policy, nil, auth.NewServiceTokens(callers, "")),
		Unary:      []grpc.UnaryServerInterceptor{rec.interceptor},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.RegisterService(testService(), struct{}{})

	lis := bufconn.Listen(1 << 20)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, lis) }()

	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	callCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	t.Run("health needs no credential", func(t *testing.T) {
		resp, err := healthpb.NewHealthClient(conn).Check(callCtx, &healthpb.HealthCheckRequest{})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health = %v, %v; want SERVING", resp, err)
		}
	})

	const (
		sentID  = "req-from-gateway-42"
		panicID = "panic-req-7"
	)
	tests := []struct {
		name       string
		method     string
		md         metadata.MD
		opts       []grpc.CallOption
		wantCode   codes.Code
		wantReason fault.Reason
		wantID     string // the request id the handler saw; "fresh" for a new one
		reached    bool   // the extra interceptor ran
	}{
		{"open method keeps the request id", "Echo", metadata.Pairs(requestid.MD, sentID), nil, codes.OK, "", sentID, true},
		{"open method makes a request id", "Echo", nil, nil, codes.OK, "", "fresh", true},
		{"invalid request id is replaced", "Echo", metadata.Pairs(requestid.MD, "bad id"), nil, codes.OK, "", "fresh", true},
		{"internal method without credential", "Secret", nil, nil, codes.Unauthenticated, fault.Unauthenticated, "", false},
		{"internal method with wrong credential", "Secret", nil, []grpc.CallOption{grpc.PerRPCCredentials(auth.BearerCredentials{Token: "nope", Insecure: true})}, codes.Unauthenticated, fault.Unauthenticated, "", false},
		{"internal method with credential", "Secret", metadata.Pairs(requestid.MD, sentID), []grpc.CallOption{grpc.PerRPCCredentials(auth.BearerCredentials{Token: internalToken, Insecure: true})}, codes.OK, "", sentID, true},
		{"method without a rule", "NoRule", nil, nil, codes.PermissionDenied, fault.PermissionDenied, "", false},
		{"unknown method", "Missing", nil, nil, codes.Unimplemented, "", "", false},
		{"handler error passes through", "Fail", nil, nil, codes.NotFound, fault.NotFound, "", true},
		{"panic becomes INTERNAL", "Panic", metadata.Pairs(requestid.MD, panicID), nil, codes.Internal, fault.Internal, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := rec.saw()
			c := callCtx
			if tt.md != nil {
				c = metadata.NewOutgoingContext(c, tt.md)
			}
			out := new(wrapperspb.StringValue)
			err := conn.Invoke(c, "/test.Svc/"+tt.method, wrapperspb.String("in"), out, tt.opts...)
			if status.Code(err) != tt.wantCode {
				t.Fatalf("code = %v (%v), want %v", status.Code(err), err, tt.wantCode)
			}
			if tt.wantReason != "" {
				if d := apierr.Parse(err); d.Reason != tt.wantReason {
					t.Errorf("reason = %q, want %q", d.Reason, tt.wantReason)
				}
			}
			if err != nil && strings.Contains(err.Error(), "private panic detail") {
				t.Errorf("error %q leaks the panic", err)
			}
			switch tt.wantID {
			case "":
			case "fresh":
				if len(out.GetValue()) != 32 || !requestid.Valid(out.GetValue()) {
					t.Errorf("handler saw request id %q, want a fresh one", out.GetValue())
				}
			default:
				if out.GetValue() != tt.wantID {
					t.Errorf("handler saw request id %q, want %q", out.GetValue(), tt.wantID)
				}
			}
			reached := rec.saw() != before
			if reached != tt.reached {
				t.Errorf("extra interceptor ran = %v, want %v (it must run after authentication)", reached, tt.reached)
			}
		})
	}

	t.Run("logs carry the request id and no credential", func(t *testing.T) {
		found := false
		for _, e := range logs.All() {
			for k, v := range e.ContextMap() {
				if s := fmt.Sprint(v); strings.Contains(s, internalToken) {
					t.Errorf("log %q field %s carries the internal token", e.Message, k)
				}
			}
			if e.ContextMap()["request_id"] == sentID {
				found = true
			}
		}
		if !found {
			t.Errorf("no log line carries request_id %q; logs: %v", sentID, logs.All())
		}
	})

	t.Run("a panic is logged with its request id", func(t *testing.T) {
		for _, e := range logs.FilterMessage("panic in handler").All() {
			if e.ContextMap()["request_id"] == panicID {
				return
			}
		}
		t.Errorf("no panic log line carries request_id %q", panicID)
	})

	t.Run("metrics count calls by method and code", func(t *testing.T) {
		series := metricstest.Gather(t, reg)
		for _, k := range []string{"Echo/OK", "Secret/Unauthenticated", "Fail/NotFound", "Panic/Internal"} {
			method, code, _ := strings.Cut(k, "/")
			if metricstest.Sum(series, "grpc_server_handled_total", "grpc_service=test.Svc", "grpc_method="+method, "grpc_code="+code) <= 0 {
				t.Errorf("grpc_server_handled_total has no %s series", k)
			}
		}
	})

	stop()
	if err := <-served; err != nil {
		t.Errorf("Serve after shutdown = %v, want nil", err)
	}
}
