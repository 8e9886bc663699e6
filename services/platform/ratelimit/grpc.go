package ratelimit

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// RetryAfterMD is the response header metadata that tells how long to wait; the gateway
// passes it on as Retry-After.
const RetryAfterMD = "retry-after"

// CredentialKey is the budget of the credential that authenticated the call: "key:<id>" for an
// API key, "sdk:<id>" for an SDK token. Each credential has its own, so an SDK token shipped
// inside apps can never spend the budget of its client's backend API key. Calls without a
// client credential (internal, admin, the bootstrap, health) have none.
func CredentialKey(ctx context.Context) (string, bool) {
	p, ok := principal.FromContext(ctx)
	if !ok {
		return "", false
	}
	c := p.Credential()
	return c, c != ""
}

// Refusal is the error of a request over a limit: RESOURCE_EXHAUSTED with the reason
// RATE_LIMITED (429 at the gateway). The caller sets the retry-after header (SetRetryAfter).
func Refusal(msg string) error {
	return apierr.New(codes.ResourceExhausted, fault.RateLimited, msg)
}

// RetryAfterHeader is the retry-after metadata of a wait.
func RetryAfterHeader(wait time.Duration) metadata.MD {
	return metadata.Pairs(RetryAfterMD, strconv.Itoa(RetryAfterSeconds(wait)))
}

const refusedMsg = "too many requests for this credential, retry later"

// check spends a token of the call's credential; it returns the refusal to answer, if any. A
// limiter error lets the call through: a broken limiter must not take the API down.
func check(ctx context.Context, l Limiter) (refused bool, wait time.Duration) {
	key, ok := CredentialKey(ctx)
	if !ok {
		return false, 0
	}
	allowed, wait, err := l.Allow(ctx, key)
	return err == nil && !allowed, wait
}

// UnaryServerInterceptor limits each client credential's calls to l. It must run after
// authentication (grpcserver.Options.Unary), which puts the principal in the context.
func UnaryServerInterceptor(l Limiter) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if refused, wait := check(ctx, l); refused {
			_ = grpc.SetHeader(ctx, RetryAfterHeader(wait))
			return nil, Refusal(refusedMsg)
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streams (connect's upload): a stream
// costs one token, however long it runs.
func StreamServerInterceptor(l Limiter) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if refused, wait := check(ss.Context(), l); refused {
			_ = ss.SetHeader(RetryAfterHeader(wait))
			return Refusal(refusedMsg)
		}
		return handler(srv, ss)
	}
}
