// Package edgelimit holds the gateway's limits per client address, applied before any service
// is called:
//
//   - the routes that take no credential (the browser capture and completion and their
//     preflights, the NETWORK_API callback, the first-key bootstrap, the API description and its
//     reference page) have a request budget per address, since no credential can carry one;
//   - failed authentications have a budget per address: each 401 answer spends a token, and
//     while the budget is empty every request from that address that carries a credential is
//     answered 429 at the edge, so a key-guessing loop stops costing an accounts call and a
//     query per guess. Requests without a credential are never held: they cost no lookup.
//
// The failure budget is checked before a request and spent after its answer, so requests already
// in flight when it empties still reach the services: a loop is stopped, a flood of concurrent
// guesses only after those in flight.
//
// Per-credential budgets are the services' own (platform/ratelimit); these are the budgets that
// no credential can carry. An IPv6 client is keyed by its /64, which one subscriber usually
// holds whole.
package edgelimit

import (
	"context"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/mnvhq/mnv/gateway/internal/clientip"
	"github.com/mnvhq/mnv/gateway/internal/envelope"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/logging"
	"github.com/mnvhq/mnv/services/platform/ratelimit"
)

// Limiter is what the middleware needs of a budget (ratelimit.Limiter).
type Limiter interface {
	Allow(ctx context.Context, key string) (bool, time.Duration, error)
	Peek(ctx context.Context, key string) (bool, time.Duration, error)
}

// Credential headers, as clients send them (callerauth's names; the bootstrap's X-Client-Id
// comes with the client secret in its body).
var credentialHeaders = []string{"X-Api-Key", "X-Sdk-Token", "X-Client-Id"}

// group names a set of routes that share an address's budget; it marks them in a ServeMux
// that only matches.
type group string

func (group) ServeHTTP(http.ResponseWriter, *http.Request) {}

// unauthenticated are the routes without a credential, each in its group.
var unauthenticated = func() *http.ServeMux {
	m := http.NewServeMux()
	m.Handle("POST /v1/api/web/transactions/{id}/capture", group("capture"))
	m.Handle("OPTIONS /v1/api/web/transactions/{id}/capture", group("capture"))
	m.Handle("POST /v1/api/web/transactions/{id}/complete", group("capture"))
	m.Handle("OPTIONS /v1/api/web/transactions/{id}/complete", group("capture"))
	// A workflow's code typed on the page: its guesses are bounded by the workflow's attempts,
	// and the address's budget keeps one page from trying many workflows.
	m.Handle("POST /v1/api/web/transactions/{id}/code", group("capture"))
	m.Handle("OPTIONS /v1/api/web/transactions/{id}/code", group("capture"))
	// The page's read of its workflow (polled while the silent step runs) and its resend: the
	// resend's cooldown and cap are the workflow's, the address's budget bounds the rest.
	m.Handle("GET /v1/api/web/transactions/{id}/workflow", group("capture"))
	m.Handle("OPTIONS /v1/api/web/transactions/{id}/workflow", group("capture"))
	m.Handle("POST /v1/api/web/transactions/{id}/resend", group("capture"))
	m.Handle("OPTIONS /v1/api/web/transactions/{id}/resend", group("capture"))
	m.Handle("GET /v1/api/sdk/session/callback", group("callback"))
	m.Handle("POST /v1/api/me/api-key/generate", group("bootstrap"))
	m.Handle("GET /oauth2/authorize", group("camara"))
	m.Handle("POST /oauth2/token", group("camara"))
	m.Handle("GET /v1/api/openapi.json", group("openapi"))
	m.Handle("GET /v1/api/docs", group("openapi"))
	m.Handle("GET /v1/api/docs/", group("openapi"))
	// Every other request matches too, in no group: a request that matched nothing would make
	// ServeMux.Handler work out the methods of a 405 answer, ~5% of the gateway's CPU per
	// request.
	m.Handle("/", group(""))
	return m
}()

// Middleware applies the per-address budgets: perAddress to the routes without a credential,
// authFailures to failed authentications. It needs the address clientip.Middleware resolved,
// so it runs after it; a request without one passes unlimited.
func Middleware(perAddress, authFailures Limiter, log *zap.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			addr, ok := clientip.FromContext(r.Context())
			if !ok {
				next.ServeHTTP(w, r)
				return
			}
			who := key(addr)
			ctx := r.Context()
			if h, pattern := unauthenticated.Handler(r); pattern != "" {
				if g, ok := h.(group); ok && g != "" {
					if allowed, wait, err := perAddress.Allow(ctx, string(g)+":"+who); err == nil && !allowed {
						refuse(w, wait, "too many requests from this address, retry later")
						return
					}
				}
			}
			if !carriesCredential(r) {
				next.ServeHTTP(w, r)
				return
			}
			if allowed, wait, err := authFailures.Peek(ctx, who); err == nil && !allowed {
				refuse(w, wait, "too many failed authentications from this address, retry later")
				return
			}
			rec := &statusRecorder{ResponseWriter: w}
			next.ServeHTTP(rec, r)
			if rec.status == http.StatusUnauthorized {
				// Spent after the fact, on a context of its own: the client may be gone, and its
				// failure must count all the same.
				if _, _, err := authFailures.Allow(context.WithoutCancel(ctx), who); err != nil {
					log.Warn("failed authentication not counted", logging.Request(ctx), zap.Error(err))
				}
			}
		})
	}
}

// key is the budget's key of an address: the address itself, or an IPv6 address's /64.
func key(a netip.Addr) string {
	if a.Is6() && !a.Is4In6() {
		p, err := a.Prefix(64)
		if err == nil {
			return p.String()
		}
	}
	return a.String()
}

func carriesCredential(r *http.Request) bool {
	for _, h := range credentialHeaders {
		if len(r.Header.Values(h)) > 0 {
			return true
		}
	}
	return false
}

func refuse(w http.ResponseWriter, wait time.Duration, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(ratelimit.RetryAfterSeconds(wait)))
	envelope.WriteError(w, envelope.Error{Status: http.StatusTooManyRequests, Code: string(fault.RateLimited), Message: msg})
}

// statusRecorder remembers the status of the answer; it keeps Flush and Unwrap for the handlers
// that stream.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
