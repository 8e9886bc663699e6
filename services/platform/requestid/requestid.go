// Package requestid carries the request id from the gateway through every service, so one id
// finds every log line of a request. It holds the id's rules and its place in a context; the
// gRPC interceptors that move it between processes are in requestidgrpc, so that code which only
// logs (domain packages, through platform/logging) does not link gRPC.
package requestid

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
