// Package requestidgrpc moves the request id across gRPC calls: servers take it from the
// incoming metadata (or make one), clients pass the context's id on.
package requestidgrpc

import (
	"context"

	middleware "github.com/grpc-ecosystem/go-grpc-middleware/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/mnvhq/mnv/services/platform/requestid"
)

// UnaryServerInterceptor takes the id from the incoming metadata (or makes one) and puts it in
// the context.
func UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return handler(requestid.With(ctx, fromMD(ctx)), req)
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streams.
func StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ws := middleware.WrapServerStream(ss)
		ws.WrappedContext = requestid.With(ss.Context(), fromMD(ss.Context()))
		return handler(srv, ws)
	}
}

func fromMD(ctx context.Context) string {
	if v := metadata.ValueFromIncomingContext(ctx, requestid.MD); len(v) == 1 && requestid.Valid(v[0]) {
		return v[0]
	}
	return requestid.New()
}

// UnaryClientInterceptor passes the id in ctx on to the next service. It replaces any id the
// outgoing metadata holds already (grpc-gateway forwards the caller's X-Request-Id header):
// the server takes only a single id and would otherwise make up a new one.
func UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if id := requestid.From(ctx); id != "" {
			// FromOutgoingContext returns a copy, which is ours to change.
			md, ok := metadata.FromOutgoingContext(ctx)
			if !ok {
				md = metadata.MD{}
			}
			md.Set(requestid.MD, id)
			ctx = metadata.NewOutgoingContext(ctx, md)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}
