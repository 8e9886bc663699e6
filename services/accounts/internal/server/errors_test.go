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
)

// TestErrorsOnTheWire pins what a caller receives for each error of the rules: the gRPC code,
// the reason the gateway turns into an HTTP status, the field and the message.
func TestErrorsOnTheWire(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		code   codes.Code
		reason apierr.Reason
		field  string
		msg    string
	}{
		{"invalid field", domain.Invalid("clientName", "must be at most %d characters", 200), codes.InvalidArgument, apierr.InvalidArgument, "clientName", "clientName: must be at most 200 characters"},
		{"not found, wrapped", fmt.Errorf("get client: %w", domain.ErrNotFound), codes.NotFound, apierr.NotFound, "", "not found"},
		{"unauthenticated", domain.ErrUnauthenticated, codes.Unauthenticated, apierr.Unauthenticated, "", "missing or invalid credentials"},
		{"insufficient balance", domain.ErrInsufficientBalance, codes.FailedPrecondition, apierr.InsufficientBalance, "", "the balance is too low for this operation"},
		{"balance expired", domain.ErrBalanceExpired, codes.FailedPrecondition, apierr.BalanceExpired, "", "the balance has expired"},
		{"suspended", domain.ErrSuspended, codes.PermissionDenied, apierr.PermissionDenied, "", "the account is suspended"},
		{"first key exists", domain.ErrKeyExists, codes.FailedPrecondition, apierr.Conflict, "", "the client already has an active API key; rotate it instead"},
		{"key superseded", domain.ErrKeySuperseded, codes.FailedPrecondition, apierr.Conflict, "", domain.ErrKeySuperseded.Error()},
		{"last admin key", domain.ErrLastAdminKey, codes.FailedPrecondition, apierr.Conflict, "", "the last ADMIN key cannot be revoked"},
		{"reference reused", domain.ErrReferenceConflict, codes.FailedPrecondition, apierr.Conflict, "", "reference already used for a different operation"},
		{"nothing to refund", domain.ErrNothingToRefund, codes.NotFound, apierr.NotFound, "", "no debit with that reference"},
		{"cancelled", fmt.Errorf("store: %w", context.Canceled), codes.Canceled, apierr.Unavailable, "", "the request was cancelled"},
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
