package grpcserver_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/grpcserver/statustest"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// TestStatus: every error a rule can return reaches a gRPC caller, over a real socket, with its
// reason, field and message, the code of its reason, and a retry-after header when it is a
// RATE_LIMITED one; anything else is INTERNAL and tells nothing.
func TestStatus(t *testing.T) {
	statustest.Run(t, []statustest.Case{
		{Name: "invalid field, wrapped", Err: fmt.Errorf("store: %w", fault.Invalid("size", "must be at most %d", 100)), Code: codes.InvalidArgument, Reason: fault.InvalidArgument, Field: "size", Msg: "size: must be at most 100"},
		{Name: "feature not enabled", Err: fault.NotEnabled("operatorId", "operator %q is off", "x"), Code: codes.InvalidArgument, Reason: fault.FeatureNotEnabled, Field: "operatorId", Msg: `operator "x" is off`},
		{Name: "product not enabled", Err: fault.NotEnabled("", "Connect is not enabled for this account"), Code: codes.InvalidArgument, Reason: fault.FeatureNotEnabled, Msg: "Connect is not enabled for this account"},
		{Name: "rate limited", Err: fault.Limited("too many attempts", 90*time.Second), Code: codes.ResourceExhausted, Reason: fault.RateLimited, Msg: "too many attempts", RetryAfter: "90"},
		{Name: "rate limited, no wait known", Err: fault.New(fault.RateLimited, "slow down"), Code: codes.ResourceExhausted, Reason: fault.RateLimited, Msg: "slow down", RetryAfter: "1"},
		{Name: "not found, wrapped", Err: fmt.Errorf("get: %w", fault.ErrNotFound), Code: codes.NotFound, Reason: fault.NotFound, Msg: "not found"},
		{Name: "unauthenticated", Err: principal.ErrUnauthenticated, Code: codes.Unauthenticated, Reason: fault.Unauthenticated, Msg: "missing or invalid credentials"},
		{Name: "suspended", Err: fault.ErrSuspended, Code: codes.PermissionDenied, Reason: fault.PermissionDenied, Msg: "the account is suspended"},
		{Name: "balance too low", Err: money.ErrInsufficientBalance, Code: codes.FailedPrecondition, Reason: fault.InsufficientBalance, Msg: "the balance is too low for this operation"},
		{Name: "balance expired", Err: money.ErrBalanceExpired, Code: codes.FailedPrecondition, Reason: fault.BalanceExpired, Msg: "the balance has expired"},
		{Name: "nothing to refund", Err: money.ErrNothingToRefund, Code: codes.NotFound, Reason: fault.NotFound, Msg: "no debit with that reference"},
		{Name: "conflict", Err: fault.New(fault.Conflict, "taken"), Code: codes.FailedPrecondition, Reason: fault.Conflict, Msg: "taken"},
		{Name: "already used", Err: fault.New(fault.AlreadyUsed, "used"), Code: codes.AlreadyExists, Reason: fault.AlreadyUsed, Msg: "used"},
		{Name: "too large", Err: fault.New(fault.PayloadTooLarge, "too big"), Code: codes.InvalidArgument, Reason: fault.PayloadTooLarge, Msg: "too big"},
		{Name: "outcome unknown", Err: money.Unknown("debit", status.Error(codes.Unavailable, "connection refused"), true), Code: codes.Unavailable, Reason: fault.Unavailable, Msg: "a backend service is unavailable, try again"},
		{Name: "cancelled", Err: fmt.Errorf("store: %w", context.Canceled), Code: codes.Canceled, Reason: fault.Unavailable, Msg: "the request was cancelled"},
		{Name: "timed out", Err: fmt.Errorf("query: %w", context.DeadlineExceeded), Code: codes.DeadlineExceeded, Reason: fault.Unavailable, Msg: "the request timed out"},
		{Name: "unexpected", Err: errors.New("driver: secret detail"), Code: codes.Internal, Reason: fault.Internal, Msg: "internal error"},
	})
}
