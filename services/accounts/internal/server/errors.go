// Package server is the gRPC edge of the accounts service: thin handlers that parse requests,
// call the domain and convert answers, the access policy of every method, and the one mapping
// of domain errors to gRPC status codes.
package server

import (
	"context"
	"errors"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
)

// toStatus maps a domain error to a gRPC status error. Anything unexpected is logged with the
// request id and answered as INTERNAL without details: driver errors never reach a caller.
func toStatus(ctx context.Context, log *zap.Logger, err error) error {
	var invalid *domain.InvalidError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &invalid):
		return apierr.Invalid(invalid.Field, invalid.Error())
	case errors.Is(err, domain.ErrNotFound):
		return apierr.New(codes.NotFound, apierr.NotFound, "not found")
	case errors.Is(err, domain.ErrUnauthenticated):
		return apierr.New(codes.Unauthenticated, apierr.Unauthenticated, "missing or invalid credentials")
	case errors.Is(err, domain.ErrInsufficientBalance):
		return apierr.New(codes.FailedPrecondition, apierr.InsufficientBalance, "the balance is too low for this operation")
	case errors.Is(err, domain.ErrBalanceExpired):
		return apierr.New(codes.FailedPrecondition, apierr.BalanceExpired, "the balance has expired")
	case errors.Is(err, domain.ErrSuspended):
		return apierr.New(codes.PermissionDenied, apierr.PermissionDenied, "the account is suspended")
	case errors.Is(err, domain.ErrKeyExists), errors.Is(err, domain.ErrLastAdminKey), errors.Is(err, domain.ErrKeySuperseded):
		return apierr.New(codes.FailedPrecondition, apierr.Conflict, err.Error())
	case errors.Is(err, domain.ErrReferenceConflict):
		return apierr.New(codes.FailedPrecondition, apierr.Conflict, err.Error())
	case errors.Is(err, domain.ErrNothingToRefund):
		return apierr.New(codes.NotFound, apierr.NotFound, err.Error())
	}
	return grpcserver.Unexpected(ctx, log, err)
}
