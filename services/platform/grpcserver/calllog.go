package grpcserver

import (
	"context"
	"path"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	mnvlog "github.com/mnvhq/mnv/services/platform/logging"
)

// callLog writes the "finished call" line of every call at its code's level (codeLevel): the
// service, method, code, duration, request id and, when traced, the trace and span ids; never
// payloads or metadata. It asks the logger first, so a call nobody logs (every successful one,
// at the default level) costs a clock reading and a level check. go-grpc-middleware's logging
// interceptor, used before, built its fields for every call whatever the level: ~9% of
// accounts' CPU on a GetClient.
type callLog struct{ log *zap.Logger }

func (c callLog) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	c.finished(ctx, info.FullMethod, "unary", start, err)
	return resp, err
}

func (c callLog) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	err := handler(srv, ss)
	kind := "server_stream"
	switch {
	case info.IsClientStream && info.IsServerStream:
		kind = "bidi_stream"
	case info.IsClientStream:
		kind = "client_stream"
	}
	c.finished(ss.Context(), info.FullMethod, kind, start, err)
	return err
}

func (c callLog) finished(ctx context.Context, fullMethod, kind string, start time.Time, err error) {
	code := status.Code(err)
	ce := c.log.Check(codeLevel(code), "finished call")
	if ce == nil {
		return
	}
	service, method := path.Split(strings.TrimPrefix(fullMethod, "/"))
	fields := []zap.Field{
		zap.String("protocol", "grpc"), zap.String("grpc.component", "server"),
		zap.String("grpc.service", strings.TrimSuffix(service, "/")), zap.String("grpc.method", method),
		zap.String("grpc.method_type", kind), zap.String("grpc.code", code.String()),
		zap.Float64("grpc.time_ms", float64(time.Since(start).Microseconds())/1000),
		mnvlog.Request(ctx),
	}
	if err != nil {
		fields = append(fields, zap.String("grpc.error", status.Convert(err).Message()))
	}
	ce.Write(fields...)
}

// codeLevel is the level of a call's log line by its code: success is debug, a refusal of the
// caller's request info, the service's own failure error, and being away or late warn.
func codeLevel(c codes.Code) zapcore.Level {
	switch c {
	case codes.OK:
		return zapcore.DebugLevel
	case codes.Internal, codes.Unknown, codes.DataLoss, codes.Unimplemented:
		return zapcore.ErrorLevel
	case codes.Unavailable, codes.DeadlineExceeded:
		return zapcore.WarnLevel
	default:
		return zapcore.InfoLevel
	}
}
