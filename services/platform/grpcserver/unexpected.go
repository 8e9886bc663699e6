package grpcserver

import (
	"context"
	"errors"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	"github.com/mnvhq/mnv/services/platform/apierr"
	mnvlog "github.com/mnvhq/mnv/services/platform/logging"
	"github.com/mnvhq/mnv/services/platform/pg"
)

// Unexpected answers an error no domain rule of a service maps: a cancelled or timed-out
// request keeps its code, an unreachable database is UNAVAILABLE (logged as a warning), and
// anything else is logged with the request id and answered INTERNAL without details, so driver
// errors never reach a caller. Each service's error mapping ends with it.
func Unexpected(ctx context.Context, log *zap.Logger, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled):
		return apierr.New(codes.Canceled, apierr.Unavailable, "the request was cancelled")
	case errors.Is(err, context.DeadlineExceeded):
		return apierr.New(codes.DeadlineExceeded, apierr.Unavailable, "the request timed out")
	case pg.Unreachable(err):
		log.Warn("database unreachable", zap.Error(err), mnvlog.Request(ctx))
		return apierr.New(codes.Unavailable, apierr.Unavailable, "the service's database is unavailable, try again")
	}
	log.Error("request failed", zap.Error(err), mnvlog.Request(ctx))
	return apierr.New(codes.Internal, apierr.Internal, "internal error")
}
