package grpcserver

import (
	"context"
	"errors"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/fault"
	mnvlog "github.com/mnvhq/mnv/services/platform/logging"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/ratelimit"
)

// Status is the answer to a handler's error, the one mapping for every service: an error of the
// rules (a fault.Error, wrapped or not) is answered with its reason, field and message, a
// RateLimited one with its retry-after header; anything else is Unexpected.
func Status(ctx context.Context, log *zap.Logger, err error) error {
	var f *fault.Error
	if !errors.As(err, &f) {
		return Unexpected(ctx, log, err)
	}
	if f.Reason == fault.RateLimited {
		// A 429 always says when to come back (at least a second), as docs/api-decisions.md#envelope
		// promises.
		_ = grpc.SetHeader(ctx, ratelimit.RetryAfterHeader(f.RetryAfter))
	}
	return apierr.FromFault(f)
}

// Unexpected answers an error no rule of a service returns: a cancelled or timed-out
// request keeps its code, an unreachable database is UNAVAILABLE (logged as a warning), and
// anything else is logged with the request id and answered INTERNAL without details, so driver
// errors never reach a caller.
func Unexpected(ctx context.Context, log *zap.Logger, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled):
		return apierr.New(codes.Canceled, fault.Unavailable, "the request was cancelled")
	case errors.Is(err, context.DeadlineExceeded):
		return apierr.New(codes.DeadlineExceeded, fault.Unavailable, "the request timed out")
	case pg.Unreachable(err):
		log.Warn("database unreachable", zap.Error(err), mnvlog.Request(ctx))
		return apierr.New(codes.Unavailable, fault.Unavailable, "the service's database is unavailable, try again")
	}
	log.Error("request failed", zap.Error(err), mnvlog.Request(ctx))
	return apierr.New(codes.Internal, fault.Internal, "internal error")
}
