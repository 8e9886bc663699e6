package server

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/imports"
	"github.com/mnvhq/mnv/services/platform/apierr"
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
		{"invalid field", domain.Invalid("firstName", "must not be blank"), codes.InvalidArgument, apierr.InvalidArgument, "firstName", "firstName: must not be blank"},
		{"not enabled", domain.NotEnabled("", "Connect is not enabled for this account"), codes.InvalidArgument, apierr.FeatureNotEnabled, "", "Connect is not enabled for this account"},
		{"upload too large", imports.ErrTooLarge, codes.InvalidArgument, apierr.PayloadTooLarge, "", "the file is larger than 50 MiB"},
		{"not found, wrapped", fmt.Errorf("get profile: %w", domain.ErrNotFound), codes.NotFound, apierr.NotFound, "", "not found"},
		{"profile exists", fmt.Errorf("%w: the account already has a profile with this number", domain.ErrConflict), codes.AlreadyExists, apierr.Conflict, "", "conflict: the account already has a profile with this number"},
		{"insufficient balance", domain.ErrInsufficientBalance, codes.FailedPrecondition, apierr.InsufficientBalance, "", "the balance is too low for this operation"},
		{"balance expired", domain.ErrBalanceExpired, codes.FailedPrecondition, apierr.BalanceExpired, "", "the balance has expired"},
		{"suspended", domain.ErrSuspended, codes.PermissionDenied, apierr.PermissionDenied, "", "the account is suspended"},
		{"charge outcome unknown", fmt.Errorf("%w: %w", domain.ErrUnavailable, away), codes.Unavailable, apierr.Unavailable, "", "a backend service is unavailable, try again"},
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
