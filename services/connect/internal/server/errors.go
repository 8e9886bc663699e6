// Package server is the gRPC edge of the connect service: thin handlers, the access policy of
// every method, and the one mapping of domain errors to gRPC status codes.
package server

import (
	"context"
	"errors"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/imports"
	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
)

// toStatus maps a domain error to a gRPC status error. Anything unexpected is logged with the
// request id and answered INTERNAL without details.
func toStatus(ctx context.Context, log *zap.Logger, err error) error {
	var (
		invalid    *domain.InvalidError
		notEnabled *domain.NotEnabledError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &invalid):
		return apierr.Invalid(invalid.Field, invalid.Error())
	case errors.As(err, &notEnabled):
		return apierr.Field(codes.InvalidArgument, apierr.FeatureNotEnabled, notEnabled.Field, notEnabled.Msg)
	case errors.Is(err, imports.ErrTooLarge):
		return apierr.New(codes.InvalidArgument, apierr.PayloadTooLarge, err.Error())
	case errors.Is(err, domain.ErrNotFound):
		return apierr.New(codes.NotFound, apierr.NotFound, "not found")
	case errors.Is(err, domain.ErrConflict):
		return apierr.New(codes.AlreadyExists, apierr.Conflict, err.Error())
	case errors.Is(err, domain.ErrInsufficientBalance):
		return apierr.New(codes.FailedPrecondition, apierr.InsufficientBalance, err.Error())
	case errors.Is(err, domain.ErrBalanceExpired):
		return apierr.New(codes.FailedPrecondition, apierr.BalanceExpired, err.Error())
	case errors.Is(err, domain.ErrSuspended):
		return apierr.New(codes.PermissionDenied, apierr.PermissionDenied, err.Error())
	case errors.Is(err, domain.ErrUnavailable):
		return apierr.New(codes.Unavailable, apierr.Unavailable, "a backend service is unavailable, try again")
	}
	return grpcserver.Unexpected(ctx, log, err)
}
