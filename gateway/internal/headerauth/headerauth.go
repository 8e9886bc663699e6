// Package headerauth applies the credential header rules of interface spec 5 and contract 3 at
// the edge, per route, before a request reaches a service. A route's rule is derived from the
// rule its RPC declares (rpcrule.EdgeOf), never from the route's path:
//
//   - an API-key RPC needs X-API-KEY, and X-CLIENT-ID unless it declares it optional (the
//     /v1/api/me/... routes and 4.3, which names its client in the path), in which case an
//     X-CLIENT-ID that is sent must still be valid (the service checks that it matches);
//   - the bootstrap (no credential, X-CLIENT-ID required) takes X-CLIENT-ID and no key;
//   - X-SDK-TOKEN (with X-CLIENT-ID) is accepted on the SDK-token RPC only, and dropped
//     everywhere else, so it can never stand in for an API key;
//   - a route that takes no credential (the browser capture) has every credential header
//     removed;
//   - a header that is repeated, or whose value is not exactly a credential (quotes, spaces,
//     line breaks), is 401, like a missing one.
//
// The services check the credentials themselves; this only refuses what cannot be right, at
// no cost to them.
package headerauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"

	"github.com/mnvhq/mnv/gateway/internal/envelope"
	"github.com/mnvhq/mnv/gateway/internal/middleware"
	openapigen "github.com/mnvhq/mnv/proto/gen/openapi"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/rpcrule"
)

// Header names as clients send them.
const (
	HeaderAPIKey   = "X-Api-Key"
	HeaderClientID = "X-Client-Id"
	HeaderSDKToken = "X-Sdk-Token"
)

// Rules are the header rules of the API's routes, by method and route pattern.
type Rules struct {
	byRoute map[string]rpcrule.Edge
}

// NewRules derives the rule of every route from the rule its RPC declares. A route whose RPC
// declares none is an error: the gateway would not know what to ask of it.
func NewRules(routes []openapigen.Route) (*Rules, error) {
	rs := &Rules{byRoute: make(map[string]rpcrule.Edge, len(routes))}
	var errs []error
	for _, rt := range routes {
		rule, ok := rpcrule.Lookup(rt.RPC)
		if !ok {
			errs = append(errs, fmt.Errorf("route %s %s: %s declares no rule", rt.Method, rt.Pattern, rt.RPC))
			continue
		}
		rs.byRoute[rt.Method+" "+rt.Pattern] = rpcrule.EdgeOf(rule, rt.Pattern)
	}
	return rs, errors.Join(errs...)
}

// Edge returns the rule of the route (method and grpc-gateway pattern).
func (rs *Rules) Edge(method, pattern string) (rpcrule.Edge, bool) {
	e, ok := rs.byRoute[method+" "+pattern]
	return e, ok
}

var unauthenticated = envelope.Error{
	Status: http.StatusUnauthorized, Code: string(fault.Unauthenticated), Message: "missing or invalid credentials",
}

// Check applies the rule e to h, and removes the credentials the route must not see. It
// returns false when the request must be refused with 401.
func Check(e rpcrule.Edge, h http.Header) bool {
	if e.Credential != rpcrule.SDKTokenHeader {
		h.Del(HeaderSDKToken)
	}
	if e.Credential != rpcrule.APIKeyHeader {
		h.Del(HeaderAPIKey)
	}
	if e.ClientID == rpcrule.ClientIDDropped {
		h.Del(HeaderClientID)
	} else {
		clientID, sent := value(h, HeaderClientID)
		if sent {
			if _, ok := auth.ParseClientID(clientID); !ok {
				return false
			}
		} else if e.ClientID == rpcrule.ClientIDRequired {
			return false
		}
	}
	switch e.Credential {
	case rpcrule.APIKeyHeader:
		key, ok := value(h, HeaderAPIKey)
		return ok && auth.WellFormedAPIKey(key)
	case rpcrule.SDKTokenHeader:
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
// pattern middleware.RouteMiddleware recorded, when that runs before it. A route without a
// rule (the route table is older than the mux) is answered 500 rather than guessed at.
func (rs *Rules) Middleware() runtime.Middleware {
	return func(next runtime.HandlerFunc) runtime.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
			e, ok := rs.Edge(r.Method, RoutePattern(r.Context()))
			if !ok {
				envelope.WriteError(w, envelope.Internal(r.Context()))
				return
			}
			if !Check(e, r.Header) {
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
