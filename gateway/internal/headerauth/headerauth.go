// Package headerauth applies the credential header rules (docs/api-decisions.md#credentials) at
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
// Its 401 names the header and what is wrong with it: that says nothing about what exists,
// only what the request got wrong, so a caller can fix it. The services check the credentials
// themselves, and answer every wrong one with one message; this only refuses what cannot be
// right, at no cost to them.
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
	"github.com/mnvhq/mnv/services/platform/credential"
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

// Header names as the API's documentation writes them, for messages.
const (
	nameAPIKey   = "X-API-KEY"
	nameClientID = "X-CLIENT-ID"
	nameSDKToken = "X-SDK-TOKEN"
)

// What is wrong with a credential header, as the messages say it: each names what to fix,
// never a value (it may be a credential) and never whether something exists.
const (
	missing        = "header is missing"
	repeated       = "header is sent more than once"
	empty          = "header is empty"
	malformedKey   = "header is malformed: an API key is " + credential.APIKeyPrefix + " followed by 32 to 128 letters and digits"
	malformedToken = "header is malformed: an SDK token is " + credential.SDKTokenPrefix + " followed by 32 to 128 letters and digits"
	malformedID    = "header is malformed: a client id is a UUID (8-4-4-4-12 hexadecimal digits)"
	// Credentials in the wrong header: their prefixes tell them apart.
	tokenAsKey  = "header holds an SDK token: an SDK token goes in X-SDK-TOKEN, on POST /v1/api/sdk/session only"
	secretAsKey = "header holds a client secret: the secret goes in the request body (secretKey), never in a header"
	keyAsToken  = "header holds an API key: this route takes an SDK token"
	// An SDK token sent where a key is needed is dropped (docs/api-decisions.md#credentials): say
	// where it belongs.
	tokenNotHere = " (X-SDK-TOKEN is accepted on POST /v1/api/sdk/session only)"
)

// Check applies the rule e to h, and removes the credentials the route must not see. It
// returns what is wrong with the credential headers, one message each (the credential first,
// then X-CLIENT-ID); none when the request may go on. Any message means 401.
func Check(e rpcrule.Edge, h http.Header) []string {
	tokenSent := len(h.Values(HeaderSDKToken)) > 0
	if e.Credential != rpcrule.SDKTokenHeader {
		h.Del(HeaderSDKToken)
	}
	if e.Credential != rpcrule.APIKeyHeader {
		h.Del(HeaderAPIKey)
	}
	var problems []string
	switch e.Credential {
	case rpcrule.APIKeyHeader:
		if p := credentialProblem(h, HeaderAPIKey, credential.WellFormedAPIKey); p == missing && tokenSent {
			problems = append(problems, nameAPIKey+" "+missing+tokenNotHere)
		} else if p != "" {
			problems = append(problems, nameAPIKey+" "+p)
		}
	case rpcrule.SDKTokenHeader:
		if p := credentialProblem(h, HeaderSDKToken, credential.WellFormedSDKToken); p != "" {
			problems = append(problems, nameSDKToken+" "+p)
		}
	}
	if e.ClientID == rpcrule.ClientIDDropped {
		h.Del(HeaderClientID)
		return problems
	}
	v := h.Values(HeaderClientID)
	var p string
	switch {
	case len(v) == 0:
		if e.ClientID == rpcrule.ClientIDRequired {
			p = missing
		}
	case len(v) > 1:
		p = repeated
	case v[0] == "":
		p = empty
	default:
		if _, ok := credential.ParseClientID(v[0]); !ok {
			p = malformedID
		}
	}
	if p != "" {
		problems = append(problems, nameClientID+" "+p)
	}
	return problems
}

// credentialProblem says what is wrong with the credential header name, "" when it has the shape
// wellFormed accepts.
func credentialProblem(h http.Header, name string, wellFormed func(string) bool) string {
	v := h.Values(name)
	switch {
	case len(v) == 0:
		return missing
	case len(v) > 1:
		return repeated
	case v[0] == "":
		return empty
	case wellFormed(v[0]):
		return ""
	}
	switch {
	case name == HeaderAPIKey && credential.WellFormedSDKToken(v[0]):
		return tokenAsKey
	case name == HeaderAPIKey && credential.WellFormedClientSecret(v[0]):
		return secretAsKey
	case name == HeaderSDKToken && credential.WellFormedAPIKey(v[0]):
		return keyAsToken
	case name == HeaderSDKToken:
		return malformedToken
	}
	return malformedKey
}

// Unauthenticated is the 401 of the problems Check found, one message each.
func Unauthenticated(problems []string) []envelope.Error {
	es := make([]envelope.Error, len(problems))
	for i, p := range problems {
		es[i] = envelope.Error{Status: http.StatusUnauthorized, Code: string(fault.Unauthenticated), Message: p}
	}
	return es
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
			if problems := Check(e, r.Header); len(problems) > 0 {
				envelope.WriteErrors(w, Unauthenticated(problems))
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
