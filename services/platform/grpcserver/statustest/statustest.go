// Package statustest checks what a gRPC caller hears for the errors of a service's rules: a
// handler on a loopback socket answers each error through grpcserver.Status, as every service's
// handlers do, and the caller reads it back as the gateway does.
package statustest

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
	"github.com/mnvhq/mnv/services/platform/ratelimit"
)

// Case is an error and what its caller must hear.
type Case struct {
	Name   string
	Err    error
	Code   codes.Code
	Reason fault.Reason
	Field  string
	Msg    string
	// RetryAfter is the retry-after header, in seconds; "" for none.
	RetryAfter string
}

// Run checks every case, each in a subtest.
func Run(t *testing.T, cases []Case) {
	t.Helper()
	conn := serve(t, cases)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var header metadata.MD
			err := conn.Invoke(ctx, "/statustest.Errors/Answer", wrapperspb.String(c.Name), new(wrapperspb.StringValue), grpc.Header(&header))
			d := apierr.Parse(err)
			if status.Code(err) != c.Code || d.Reason != c.Reason || d.Field != c.Field || d.Message != c.Msg {
				t.Errorf("got %v %s field %q %q, want %v %s field %q %q", status.Code(err), d.Reason, d.Field, d.Message, c.Code, c.Reason, c.Field, c.Msg)
			}
			var want []string
			if c.RetryAfter != "" {
				want = []string{c.RetryAfter}
			}
			if got := header.Get(ratelimit.RetryAfterMD); !slices.Equal(got, want) {
				t.Errorf("retry-after %q, want %q", got, want)
			}
		})
	}
}

// serve answers a request naming a case with that case's error.
func serve(t *testing.T, cases []Case) *grpc.ClientConn {
	t.Helper()
	log := zaptest.NewLogger(t)
	errs := map[string]error{}
	for _, c := range cases {
		errs[c.Name] = c.Err
	}
	srv := grpc.NewServer()
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "statustest.Errors",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Answer",
			Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.StringValue)
				if err := dec(in); err != nil {
					return nil, err
				}
				return nil, grpcserver.Status(ctx, log, errs[in.GetValue()])
			},
		}},
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
