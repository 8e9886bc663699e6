package ratelimit_test

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/ratelimit"
)

// asPrincipal stands in for the auth guard that runs before the limiter in every service: it
// makes the caller the principal its "as" metadata names.
func asPrincipal(ctx context.Context) context.Context {
	switch v := metadata.ValueFromIncomingContext(ctx, "as"); {
	case len(v) == 0:
		return ctx // an internal or admin call: no client principal
	case v[0] == "key":
		return principal.WithPrincipal(ctx, principal.Principal{ClientID: "c1", KeyID: "k1"})
	default:
		return principal.WithPrincipal(ctx, principal.Principal{ClientID: "c1", SDKTokenID: "t1"})
	}
}

type wrappedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (w wrappedStream) Context() context.Context { return w.ctx }

// serve runs a gRPC server on a loopback socket with the limiter's interceptors after the
// stand-in guard, and a service of one unary and one client-streaming method.
func serve(t *testing.T, l ratelimit.Limiter) *grpc.ClientConn {
	t.Helper()
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return h(asPrincipal(ctx), req)
		}, ratelimit.UnaryServerInterceptor(l)),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, wrappedStream{ss, asPrincipal(ss.Context())})
		}, ratelimit.StreamServerInterceptor(l)),
	)
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Svc",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Call", Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Svc/Call"}, func(context.Context, any) (any, error) {
				return &emptypb.Empty{}, nil
			})
		}}},
		Streams: []grpc.StreamDesc{{StreamName: "Upload", ClientStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			return ss.SendMsg(&emptypb.Empty{})
		}}},
	}, struct{}{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func unary(conn *grpc.ClientConn, as string) (metadata.MD, error) {
	ctx := context.Background()
	if as != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "as", as)
	}
	var hdr metadata.MD
	err := conn.Invoke(ctx, "/test.Svc/Call", &emptypb.Empty{}, &emptypb.Empty{}, grpc.Header(&hdr))
	return hdr, err
}

func stream(conn *grpc.ClientConn, as string) (metadata.MD, error) {
	ctx := metadata.AppendToOutgoingContext(context.Background(), "as", as)
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, "/test.Svc/Upload")
	if err != nil {
		return nil, err
	}
	if err := s.CloseSend(); err != nil {
		return nil, err
	}
	err = s.RecvMsg(&emptypb.Empty{})
	hdr, _ := s.Header()
	return hdr, err
}

// TestInterceptors: each credential spends its own budget, on unary calls and streams alike;
// the refusal is RESOURCE_EXHAUSTED, RATE_LIMITED, with a retry-after header in whole seconds;
// calls without a client credential are not limited.
func TestInterceptors(t *testing.T) {
	store := open(t, "", "", nil, nil)
	conn := serve(t, store.Limiter("credential", ratelimit.Limit{Rate: 0.5, Burst: 2}))
	calls := []struct {
		name    string
		call    func(*grpc.ClientConn, string) (metadata.MD, error)
		as      string
		limited bool
	}{
		{"api key 1", unary, "key", false},
		{"api key 2 (stream)", stream, "key", false},
		{"api key 3: over the key's budget", unary, "key", true},
		{"api key 4: stream over it too", stream, "key", true},
		{"sdk token 1: its own budget", unary, "sdk", false},
		{"sdk token 2", stream, "sdk", false},
		{"sdk token 3", unary, "sdk", true},
		{"internal 1", unary, "", false},
		{"internal 2", unary, "", false},
		{"internal 3: never limited", unary, "", false},
	}
	for _, c := range calls {
		hdr, err := c.call(conn, c.as)
		if !c.limited {
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			continue
		}
		d := apierr.Parse(err)
		if status.Code(err) != codes.ResourceExhausted || d.Reason != fault.RateLimited {
			t.Fatalf("%s: %v, want RESOURCE_EXHAUSTED/RATE_LIMITED", c.name, err)
		}
		if got := hdr.Get(ratelimit.RetryAfterMD); len(got) != 1 || got[0] != "2" {
			t.Fatalf("%s: retry-after %v, want [2] (a token every 2s)", c.name, got)
		}
	}
}

func TestCredentialKey(t *testing.T) {
	tests := []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"api key", principal.WithPrincipal(context.Background(), principal.Principal{ClientID: "c", KeyID: "k"}), "key:k"},
		{"sdk token", principal.WithPrincipal(context.Background(), principal.Principal{ClientID: "c", SDKTokenID: "t"}), "sdk:t"},
		{"no principal", context.Background(), ""},
		{"principal without a credential id", principal.WithPrincipal(context.Background(), principal.Principal{ClientID: "c"}), ""},
	}
	for _, tt := range tests {
		got, ok := ratelimit.CredentialKey(tt.ctx)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("%s: %q %v, want %q", tt.name, got, ok, tt.want)
		}
	}
}
