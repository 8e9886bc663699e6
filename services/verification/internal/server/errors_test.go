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
		reason apierr.Reason
		field  string
		msg    string
	}{
		{"invalid field", domain.Invalid("operatorId", "is required"), codes.InvalidArgument, apierr.InvalidArgument, "operatorId", "operatorId: is required"},
		{"not enabled, on a field", domain.NotEnabled("serviceType", "service type %q is not available", "X"), codes.InvalidArgument, apierr.FeatureNotEnabled, "serviceType", `service type "X" is not available`},
		{"not enabled, the product", domain.NotEnabled("", "verification is not enabled for this account"), codes.InvalidArgument, apierr.FeatureNotEnabled, "", "verification is not enabled for this account"},
		{"rate limited", &domain.RateLimitedError{Msg: "too many verification attempts for this number", RetryAfter: time.Minute}, codes.ResourceExhausted, apierr.RateLimited, "", "too many verification attempts for this number"},
		{"not found, wrapped", fmt.Errorf("capture: %w", domain.ErrNotFound), codes.NotFound, apierr.NotFound, "", "not found"},
		{"number not kept", domain.ErrNumberNotKept, codes.NotFound, apierr.NotFound, "", domain.ErrNumberNotKept.Error()},
		{"blob used by a verification", &domain.UsedByError{VerificationID: "v-1"}, codes.AlreadyExists, apierr.AlreadyUsed, "", "this sealed session was already verified, by verification v-1"},
		{"already used", domain.ErrAlreadyUsed, codes.AlreadyExists, apierr.AlreadyUsed, "", "this sealed session or transaction was already used"},
		{"insufficient balance", domain.ErrInsufficientBalance, codes.FailedPrecondition, apierr.InsufficientBalance, "", "the balance is too low for this operation"},
		{"balance expired", domain.ErrBalanceExpired, codes.FailedPrecondition, apierr.BalanceExpired, "", "the balance has expired"},
		{"origin not allowed", domain.ErrOriginNotAllowed, codes.PermissionDenied, apierr.PermissionDenied, "", "this page's origin is not allowed to capture the account's transactions"},
		{"suspended", domain.ErrSuspended, codes.PermissionDenied, apierr.PermissionDenied, "", "the account is suspended"},
		{"charge outcome unknown", fmt.Errorf("%w: %w", domain.ErrUnavailable, away), codes.Unavailable, apierr.Unavailable, "", "a backend service is unavailable, try again"},
		{"timed out", fmt.Errorf("store: %w", context.DeadlineExceeded), codes.DeadlineExceeded, apierr.Unavailable, "", "the request timed out"},
		{"unexpected", errors.New("driver: connection reset"), codes.Internal, apierr.Internal, "", "internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := toStatus(context.Background(), zaptest.NewLogger(t), tt.err)
			d := apierr.Parse(got)
			if status.Code(got) != tt.code || d.Reason != tt.reason || d.Field != tt.field || d.Message != tt.msg {
				t.Errorf("got %v %s field %q %q, want %v %s field %q %q", status.Code(got), d.Reason, d.Field, d.Message, tt.code, tt.reason, tt.field, tt.msg)
			}
		})
	}
}
