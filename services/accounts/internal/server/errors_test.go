package server

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
	"github.com/mnvhq/mnv/services/platform/money"
)

// TestErrorsOnTheWire pins what a caller receives for each error of the rules: the gRPC code,
// the reason the gateway turns into an HTTP status, the field and the message.
func TestErrorsOnTheWire(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		code   codes.Code
		reason fault.Reason
		field  string
		msg    string
	}{
		{"invalid field", fault.Invalid("clientName", "must be at most %d characters", 200), codes.InvalidArgument, fault.InvalidArgument, "clientName", "clientName: must be at most 200 characters"},
		{"not found, wrapped", fmt.Errorf("get client: %w", fault.ErrNotFound), codes.NotFound, fault.NotFound, "", "not found"},
		{"unauthenticated", auth.ErrUnauthenticated, codes.Unauthenticated, fault.Unauthenticated, "", "missing or invalid credentials"},
		{"insufficient balance", money.ErrInsufficientBalance, codes.FailedPrecondition, fault.InsufficientBalance, "", "the balance is too low for this operation"},
		{"balance expired", money.ErrBalanceExpired, codes.FailedPrecondition, fault.BalanceExpired, "", "the balance has expired"},
		{"suspended", fault.ErrSuspended, codes.PermissionDenied, fault.PermissionDenied, "", "the account is suspended"},
		{"first key exists", domain.ErrKeyExists, codes.FailedPrecondition, fault.Conflict, "", "the client already has an active API key; rotate it instead"},
		{"key superseded", domain.ErrKeySuperseded, codes.FailedPrecondition, fault.Conflict, "", domain.ErrKeySuperseded.Error()},
		{"last admin key", domain.ErrLastAdminKey, codes.FailedPrecondition, fault.Conflict, "", "the last ADMIN key cannot be revoked"},
		{"reference reused", domain.ErrReferenceConflict, codes.FailedPrecondition, fault.Conflict, "", "reference already used for a different operation"},
		{"nothing to refund", money.ErrNothingToRefund, codes.NotFound, fault.NotFound, "", "no debit with that reference"},
		{"cancelled", fmt.Errorf("store: %w", context.Canceled), codes.Canceled, fault.Unavailable, "", "the request was cancelled"},
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
