// Package server is the gRPC edge of the verification service: thin handlers, the access
// policy of every method, and the one mapping of domain errors to gRPC status codes.
package server

import (
	"context"
	"errors"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
	"github.com/mnvhq/mnv/services/platform/ratelimit"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
)

// toStatus maps a domain error to a gRPC status error. Anything unexpected is logged with the
// request id and answered INTERNAL without details.
func toStatus(ctx context.Context, log *zap.Logger, err error) error {
	var (
		invalid    *domain.InvalidError
		notEnabled *domain.NotEnabledError
		limited    *domain.RateLimitedError
		usedBy     *domain.UsedByError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &invalid):
		return apierr.Invalid(invalid.Field, invalid.Error())
	case errors.As(err, &notEnabled):
		return apierr.Field(codes.InvalidArgument, apierr.FeatureNotEnabled, notEnabled.Field, notEnabled.Msg)
	case errors.As(err, &limited):
		_ = grpc.SetHeader(ctx, ratelimit.RetryAfterHeader(limited.RetryAfter))
		return ratelimit.Refusal(limited.Msg)
	case errors.Is(err, domain.ErrNotFound):
		return apierr.New(codes.NotFound, apierr.NotFound, "not found")
	case errors.Is(err, domain.ErrNumberNotKept):
		return apierr.New(codes.NotFound, apierr.NotFound, err.Error())
	case errors.As(err, &usedBy):
		return apierr.New(codes.AlreadyExists, apierr.AlreadyUsed, "this sealed session was already verified, by verification "+usedBy.VerificationID)
	case errors.Is(err, domain.ErrAlreadyUsed):
		return apierr.New(codes.AlreadyExists, apierr.AlreadyUsed, "this sealed session or transaction was already used")
	case errors.Is(err, domain.ErrInsufficientBalance):
		return apierr.New(codes.FailedPrecondition, apierr.InsufficientBalance, err.Error())
	case errors.Is(err, domain.ErrBalanceExpired):
		return apierr.New(codes.FailedPrecondition, apierr.BalanceExpired, err.Error())
	case errors.Is(err, domain.ErrOriginNotAllowed):
		return apierr.New(codes.PermissionDenied, apierr.PermissionDenied, err.Error())
	case errors.Is(err, domain.ErrSuspended):
		return apierr.New(codes.PermissionDenied, apierr.PermissionDenied, err.Error())
	case errors.Is(err, domain.ErrUnavailable):
		return apierr.New(codes.Unavailable, apierr.Unavailable, "a backend service is unavailable, try again")
	}
	return grpcserver.Unexpected(ctx, log, err)
}
