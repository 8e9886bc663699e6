package grpcserver_test

import (
	"context"
	"errors"
	"fmt"
	"net"
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
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/ratelimit"
)

// TestStatus: every error a rule can return reaches a gRPC caller, over a real socket, with its
// reason, field and message, the code of its reason, and a retry-after header when it has one;
// anything else is INTERNAL and tells nothing.
func TestStatus(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		code       codes.Code
		reason     fault.Reason
		field, msg string
		retryAfter string
	}{
		{"invalid field, wrapped", fmt.Errorf("store: %w", fault.Invalid("size", "must be at most %d", 100)), codes.InvalidArgument, fault.InvalidArgument, "size", "size: must be at most 100", ""},
		{"feature not enabled", fault.NotEnabled("operatorId", "operator %q is off", "x"), codes.InvalidArgument, fault.FeatureNotEnabled, "operatorId", `operator "x" is off`, ""},
		{"rate limited", fault.Limited("too many attempts", 90*time.Second), codes.ResourceExhausted, fault.RateLimited, "", "too many attempts", "90"},
		{"rate limited, no wait known", fault.New(fault.RateLimited, "slow down"), codes.ResourceExhausted, fault.RateLimited, "", "slow down", "1"},
		{"not found, wrapped", fmt.Errorf("get: %w", fault.ErrNotFound), codes.NotFound, fault.NotFound, "", "not found", ""},
		{"unauthenticated", auth.ErrUnauthenticated, codes.Unauthenticated, fault.Unauthenticated, "", "missing or invalid credentials", ""},
		{"suspended", fault.ErrSuspended, codes.PermissionDenied, fault.PermissionDenied, "", "the account is suspended", ""},
		{"balance too low", money.ErrInsufficientBalance, codes.FailedPrecondition, fault.InsufficientBalance, "", "the balance is too low for this operation", ""},
		{"balance expired", money.ErrBalanceExpired, codes.FailedPrecondition, fault.BalanceExpired, "", "the balance has expired", ""},
		{"conflict", fault.New(fault.Conflict, "taken"), codes.FailedPrecondition, fault.Conflict, "", "taken", ""},
		{"already used", fault.New(fault.AlreadyUsed, "used"), codes.AlreadyExists, fault.AlreadyUsed, "", "used", ""},
		{"too large", fault.New(fault.PayloadTooLarge, "too big"), codes.InvalidArgument, fault.PayloadTooLarge, "", "too big", ""},
		{"outcome unknown", money.Unknown("debit", status.Error(codes.Unavailable, "connection refused"), true), codes.Unavailable, fault.Unavailable, "", "a backend service is unavailable, try again", ""},
		{"timed out", fmt.Errorf("query: %w", context.DeadlineExceeded), codes.DeadlineExceeded, fault.Unavailable, "", "the request timed out", ""},
		{"unexpected", errors.New("driver: secret detail"), codes.Internal, fault.Internal, "", "internal error", ""},
	}
	byName := map[string]error{}
	for _, tt := range tests {
		byName[tt.name] = tt.err
	}
	conn := serveErrors(t, byName)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var header metadata.MD
			err := conn.Invoke(ctx, "/test.Errors/Answer", wrapperspb.String(tt.name), new(wrapperspb.StringValue), grpc.Header(&header))
			d := apierr.Parse(err)
			if status.Code(err) != tt.code || d.Reason != tt.reason || d.Field != tt.field || d.Message != tt.msg {
				t.Errorf("got %v %s field %q %q, want %v %s field %q %q", status.Code(err), d.Reason, d.Field, d.Message, tt.code, tt.reason, tt.field, tt.msg)
			}
			if got := header.Get(ratelimit.RetryAfterMD); fmt.Sprint(got) != fmt.Sprint(nonEmpty(tt.retryAfter)) {
				t.Errorf("retry-after %v, want %q", got, tt.retryAfter)
			}
		})
	}
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// serveErrors serves a method on a loopback socket that answers the error named by its request
// through grpcserver.Status, as every service's handlers do.
func serveErrors(t *testing.T, errs map[string]error) *grpc.ClientConn {
	t.Helper()
	log := zaptest.NewLogger(t)
	srv := grpc.NewServer()
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Errors",
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
