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
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
	"github.com/mnvhq/mnv/services/platform/money"
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
		{"invalid field", fault.Invalid("firstName", "must not be blank"), codes.InvalidArgument, fault.InvalidArgument, "firstName", "firstName: must not be blank"},
		{"not enabled", fault.NotEnabled("", "Connect is not enabled for this account"), codes.InvalidArgument, fault.FeatureNotEnabled, "", "Connect is not enabled for this account"},
		{"upload too large", imports.ErrTooLarge, codes.InvalidArgument, fault.PayloadTooLarge, "", "the file is larger than 50 MiB"},
		{"not found, wrapped", fmt.Errorf("get profile: %w", fault.ErrNotFound), codes.NotFound, fault.NotFound, "", "not found"},
		// Was ALREADY_EXISTS with "conflict: " before the message: every CONFLICT is now
		// FAILED_PRECONDITION, as accounts' always were; the HTTP status (409) is the reason's.
		{"profile exists", domain.ErrProfileExists, codes.FailedPrecondition, fault.Conflict, "", "the account already has a profile with this number"},
		{"enrichment in flight", domain.ErrEnrichmentInFlight, codes.FailedPrecondition, fault.Conflict, "", "a request with this Idempotency-Key is still in progress"},
		{"insufficient balance", money.ErrInsufficientBalance, codes.FailedPrecondition, fault.InsufficientBalance, "", "the balance is too low for this operation"},
		{"balance expired", money.ErrBalanceExpired, codes.FailedPrecondition, fault.BalanceExpired, "", "the balance has expired"},
		{"suspended", fault.ErrSuspended, codes.PermissionDenied, fault.PermissionDenied, "", "the account is suspended"},
		{"charge outcome unknown", money.Unknown("debit", away, true), codes.Unavailable, fault.Unavailable, "", "a backend service is unavailable, try again"},
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
