// Package requestid carries the request id from the gateway through every service, so one id
// finds every log line of a request.
package requestid

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	middleware "github.com/grpc-ecosystem/go-grpc-middleware/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Header is the HTTP header, and MD the gRPC metadata key, of the request id.
const (
	Header = "X-Request-Id"
	MD     = "x-request-id"
)

// MaxLen bounds a request id accepted from a caller.
const MaxLen = 128

type key struct{}

// New returns a fresh random request id.
func New() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Valid reports whether a caller-supplied id may be echoed and logged: 1 to 128 visible ASCII
// characters, nothing that could split a header or forge a log line.
func Valid(id string) bool {
	if id == "" || len(id) > MaxLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// With returns ctx carrying id.
func With(ctx context.Context, id string) context.Context { return context.WithValue(ctx, key{}, id) }

// From returns the request id in ctx, or "".
func From(ctx context.Context) string {
	id, _ := ctx.Value(key{}).(string)
	return id
}

// UnaryServerInterceptor takes the id from the incoming metadata (or makes one) and puts it in
// the context.
func UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return handler(With(ctx, fromMD(ctx)), req)
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streams.
func StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ws := middleware.WrapServerStream(ss)
		ws.WrappedContext = With(ss.Context(), fromMD(ss.Context()))
		return handler(srv, ws)
	}
}

func fromMD(ctx context.Context) string {
	if v := metadata.ValueFromIncomingContext(ctx, MD); len(v) == 1 && Valid(v[0]) {
		return v[0]
	}
	return New()
}

// UnaryClientInterceptor passes the id in ctx on to the next service. It replaces any id the
// outgoing metadata holds already (grpc-gateway forwards the caller's X-Request-Id header):
// the server takes only a single id and would otherwise make up a new one.
func UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if id := From(ctx); id != "" {
			// FromOutgoingContext returns a copy, which is ours to change.
			md, ok := metadata.FromOutgoingContext(ctx)
			if !ok {
				md = metadata.MD{}
			}
			md.Set(MD, id)
			ctx = metadata.NewOutgoingContext(ctx, md)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}
