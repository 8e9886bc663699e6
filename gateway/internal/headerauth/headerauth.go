// Package headerauth applies the credential header rules of interface spec 5 and contract 3 at
// the edge, per route, before a request reaches a service:
//
//   - X-API-KEY and X-CLIENT-ID on every /v1/api call; on /v1/api/me/... (and on 4.3, which
//     names its client in the path) X-API-KEY alone suffices, and X-CLIENT-ID, when sent, must
//     be valid (the service checks that it matches the key);
//   - the bootstrap POST /v1/api/me/api-key/generate takes X-CLIENT-ID and no key;
//   - X-SDK-TOKEN (with X-CLIENT-ID) is accepted on POST /v1/api/sdk/session only, and dropped
//     everywhere else, so it can never stand in for an API key;
//   - a header that is repeated, or whose value is not exactly a credential (quotes, spaces,
//     line breaks), is 401, like a missing one.
//
// The services check the credentials themselves; this only refuses what cannot be right, at
// no cost to them, and keeps the route rules in one place.
package headerauth

import (
	"context"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"

	"github.com/mnvhq/mnv/gateway/internal/envelope"
	"github.com/mnvhq/mnv/gateway/internal/middleware"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/fault"
)

// Header names as clients send them.
const (
	HeaderAPIKey   = "X-Api-Key"
	HeaderClientID = "X-Client-Id"
	HeaderSDKToken = "X-Sdk-Token"
)

// Kind is the credential rule of a route.
type Kind int

// Route kinds.
const (
	// KeyAndClient: X-API-KEY and X-CLIENT-ID required.
	KeyAndClient Kind = iota
	// KeyOnly: X-API-KEY required, X-CLIENT-ID optional.
	KeyOnly
	// Bootstrap: X-CLIENT-ID required; the body carries the client secret.
	Bootstrap
	// SDKSession: X-SDK-TOKEN and X-CLIENT-ID required.
	SDKSession
	// Public: no credential (browser capture, API description).
	Public
)

// Classify returns the rule of a route pattern, as grpc-gateway's Pattern.String writes it
// ("/v1/api/clients/{client_id=*}/rotate-key").
func Classify(pattern string) Kind {
	switch {
	case pattern == "/v1/api/me/api-key/generate":
		return Bootstrap
	case pattern == "/v1/api/sdk/session":
		return SDKSession
	case strings.HasPrefix(pattern, "/v1/api/web/"), pattern == "/v1/api/openapi.json":
		return Public
	case strings.HasPrefix(pattern, "/v1/api/me/"), pattern == "/v1/api/clients/{client_id=*}/rotate-key":
		return KeyOnly
	}
	return KeyAndClient
}

var unauthenticated = envelope.Error{
	Status: http.StatusUnauthorized, Code: string(fault.Unauthenticated), Message: "missing or invalid credentials",
}

// Check applies the rule of kind to h, and removes the credentials the route must not see.
// It returns false when the request must be refused with 401.
func Check(kind Kind, h http.Header) bool {
	if kind == Public {
		h.Del(HeaderAPIKey)
		h.Del(HeaderClientID)
		h.Del(HeaderSDKToken)
		return true
	}
	if kind == SDKSession {
		h.Del(HeaderAPIKey)
	} else {
		h.Del(HeaderSDKToken)
	}
	if kind == Bootstrap {
		h.Del(HeaderAPIKey)
	}

	clientID, sent := value(h, HeaderClientID)
	if sent {
		if _, ok := auth.ParseClientID(clientID); !ok {
			return false
		}
	} else if kind != KeyOnly {
		return false
	}
	switch kind {
	case KeyAndClient, KeyOnly:
		key, ok := value(h, HeaderAPIKey)
		return ok && auth.WellFormedAPIKey(key)
	case SDKSession:
		token, ok := value(h, HeaderSDKToken)
		return ok && auth.WellFormedSDKToken(token)
	}
	return true
}

// value returns the one value of a header and whether it was sent. A header sent twice yields
// a value no credential matches, so it is refused like a malformed one.
func value(h http.Header, name string) (string, bool) {
	v := h.Values(name)
	if len(v) == 0 {
		return "", false
	}
	if len(v) > 1 {
		return "\x00", true
	}
	return v[0], true
}

// Middleware applies the rules to every matched route of a grpc-gateway mux. It reads the
// pattern middleware.RouteMiddleware recorded, when that runs before it.
func Middleware() runtime.Middleware {
	return func(next runtime.HandlerFunc) runtime.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
			if !Check(Classify(RoutePattern(r.Context())), r.Header) {
				envelope.WriteError(w, unauthenticated)
				return
			}
			next(w, r, params)
		}
	}
}

// RoutePattern is the matched route pattern of the request of ctx: the one
// middleware.RouteMiddleware recorded, else built from the mux's match.
func RoutePattern(ctx context.Context) string {
	if pattern, ok := middleware.Pattern(ctx); ok {
		return pattern
	}
	p, _ := runtime.HTTPPattern(ctx)
	return p.String()
}
