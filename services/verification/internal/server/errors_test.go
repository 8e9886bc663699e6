package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
)

// TestErrorsOnTheWire pins what a caller receives for each error of the rules: the gRPC code,
// the reason the gateway turns into an HTTP status, the field and the message.
func TestErrorsOnTheWire(t *testing.T) {
	away := status.Error(codes.Unavailable, "connection refused")
	tests := []struct {
		name   string
		err    error
		code   codes.Code
		reason fault.Reason
		field  string
		msg    string
	}{
		{"invalid field", fault.Invalid("operatorId", "is required"), codes.InvalidArgument, fault.InvalidArgument, "operatorId", "operatorId: is required"},
		{"not enabled, on a field", fault.NotEnabled("serviceType", "service type %q is not available", "X"), codes.InvalidArgument, fault.FeatureNotEnabled, "serviceType", `service type "X" is not available`},
		{"not enabled, the product", fault.NotEnabled("", "verification is not enabled for this account"), codes.InvalidArgument, fault.FeatureNotEnabled, "", "verification is not enabled for this account"},
		{"rate limited", fault.Limited("too many verification attempts for this number", time.Minute), codes.ResourceExhausted, fault.RateLimited, "", "too many verification attempts for this number"},
		{"not found, wrapped", fmt.Errorf("capture: %w", fault.ErrNotFound), codes.NotFound, fault.NotFound, "", "not found"},
		{"number not kept", domain.ErrNumberNotKept, codes.NotFound, fault.NotFound, "", domain.ErrNumberNotKept.Error()},
		{"blob used by a verification", domain.UsedBy("v-1"), codes.AlreadyExists, fault.AlreadyUsed, "", "this sealed session was already verified, by verification v-1"},
		{"already used", domain.ErrAlreadyUsed, codes.AlreadyExists, fault.AlreadyUsed, "", "this sealed session or transaction was already used"},
		{"insufficient balance", money.ErrInsufficientBalance, codes.FailedPrecondition, fault.InsufficientBalance, "", "the balance is too low for this operation"},
		{"balance expired", money.ErrBalanceExpired, codes.FailedPrecondition, fault.BalanceExpired, "", "the balance has expired"},
		{"origin not allowed", domain.ErrOriginNotAllowed, codes.PermissionDenied, fault.PermissionDenied, "", "this page's origin is not allowed to capture the account's transactions"},
		{"suspended", fault.ErrSuspended, codes.PermissionDenied, fault.PermissionDenied, "", "the account is suspended"},
		{"charge outcome unknown", money.Unknown("debit", away, true), codes.Unavailable, fault.Unavailable, "", "a backend service is unavailable, try again"},
		{"timed out", fmt.Errorf("store: %w", context.DeadlineExceeded), codes.DeadlineExceeded, fault.Unavailable, "", "the request timed out"},
		{"unexpected", errors.New("driver: connection reset"), codes.Internal, fault.Internal, "", "internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := grpcserver.Status(context.Background(), zaptest.NewLogger(t), tt.err)
			d := apierr.Parse(got)
			if status.Code(got) != tt.code || d.Reason != tt.reason || d.Field != tt.field || d.Message != tt.msg {
				t.Errorf("got %v %s field %q %q, want %v %s field %q %q", status.Code(got), d.Reason, d.Field, d.Message, tt.code, tt.reason, tt.field, tt.msg)
			}
		})
	}
}
