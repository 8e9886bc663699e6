// Package callerauth decides at the edge who a REST request comes from, in one pass per
// request (Auth.Middleware): the credential header rules of the request's route, then the
// resolution of its client credential, whose principal it asserts to the service the request
// goes to (auth.MDPrincipal), so that the service does not resolve the same credential again.
//
// The header rules. A route's rule is derived from the rule its RPC declares (rpcrule.EdgeOf),
// never from the route's path:
//
//   - an API-key RPC needs X-API-KEY, and X-CLIENT-ID unless it declares it optional (the
//     /v1/api/me/... routes and the key rotation that names its client in the path), in which
//     case an X-CLIENT-ID that is sent must still be valid (the service checks that it matches);
//   - the bootstrap (no credential, X-CLIENT-ID required) takes X-CLIENT-ID and no key;
//   - X-SDK-TOKEN (with X-CLIENT-ID) is accepted on the SDK-token RPC only, and dropped
//     everywhere else, so it can never stand in for an API key;
//   - a route that takes no credential (the browser capture) has every credential header
//     removed;
//   - a header that is repeated, or whose value is not exactly a credential (quotes, spaces,
//     line breaks), is 401, like a missing one.
//
// Their 401 names the header and what is wrong with it: that says nothing about what exists,
// only what the request got wrong, so a caller can fix it.
//
// The resolution. The one well-formed credential the rules let through is resolved through the
// gateway's principal cache (accounts' accountsclient/principalcache: kept in step with accounts
// by its WatchPrincipals stream, asking accounts whenever that stream is not trusted), so a
// revoked key, a suspended client or a changed role stops working here within the cache's bound,
// as in the services. A credential accounts refuses is answered here with the 401 a service
// would give (auth.ErrUnauthenticated), which tells nothing of what exists. When accounts cannot
// answer, nothing is asserted: the service authenticates the credential itself and answers as
// it would without the gateway's help.
//
// A client's own write to accounts through the gateway (a request but GET to accounts' routes,
// which own credentials and clients: a key revoked or rotated, say) drops the client's
// principals from the gateway's cache when it succeeded, before the answer leaves, so the
// client's next request here sees the change at once; other replicas learn of it from accounts'
// push, like the services. Writes to the other services change no principal and keep them.
//
// The gateway decides nothing else: the method's rule (client status, the key's role, the
// feature) is the service's to apply to the asserted principal, as to any other.
package callerauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/mnvhq/mnv/gateway/internal/envelope"
	"github.com/mnvhq/mnv/gateway/internal/middleware"
	openapigen "github.com/mnvhq/mnv/proto/gen/openapi"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/rpcrule"
)

// Cache resolves client credentials: the gateway's principal cache in front of accounts.
type Cache interface {
	principal.Authenticator
	// Forget drops the client's principals.
	Forget(clientID string)
}

// route is what the gateway knows of a route: its header rule, and whether a request to it may
// change a principal.
type route struct {
	edge  rpcrule.Edge
	write bool
	// idempotent: the route's RPC honours Idempotency-Key.
	idempotent bool
	// action names the route in the audit log: its RPC's name.
	action string
	// console: the route is one of the console's own (consolePrefix).
	console bool
}

// Auth applies the header rules of the API's routes and resolves their credentials.
type Auth struct {
	cache Cache
	// routes by method and route pattern.
	routes map[string]route
	// origins refuses a cross-origin write made with the session cookie (session.go).
	origins *http.CrossOriginProtection
	auditor *AuditQueue
}

// accountsRPCs is the prefix of the RPCs of accounts' public service, which owns credentials and
// clients.
const accountsRPCs = "/mnv.accounts.v1.AccountsService/"

// New derives the rule of every route from the rule its RPC declares, and asks cache about the
// credentials the routes take. A route whose RPC declares none is an error: the gateway would
// not know what to ask of it.
func New(cache Cache, routes []openapigen.Route) (*Auth, error) {
	a := &Auth{cache: cache, routes: make(map[string]route, len(routes)), origins: http.NewCrossOriginProtection()}
	var errs []error
	for _, rt := range routes {
		rule, ok := rpcrule.Lookup(rt.RPC)
		if !ok {
			errs = append(errs, fmt.Errorf("route %s %s: %s declares no rule", rt.Method, rt.Pattern, rt.RPC))
			continue
		}
		a.routes[rt.Method+" "+rt.Pattern] = route{
			edge:       rpcrule.EdgeOf(rule, rt.Pattern),
			write:      rt.Method != http.MethodGet && strings.HasPrefix(rt.RPC, accountsRPCs),
			idempotent: rule.GetIdempotent(),
			action:     rt.RPC[strings.LastIndexByte(rt.RPC, '/')+1:],
			console:    strings.HasPrefix(rt.Pattern, consolePrefix),
		}
	}
	return a, errors.Join(errs...)
}

// Edge returns the rule of the route (method and grpc-gateway pattern).
func (a *Auth) Edge(method, pattern string) (rpcrule.Edge, bool) {
	rt, ok := a.routes[method+" "+pattern]
	return rt.edge, ok
}

// Idempotent reports whether the route's RPC honours Idempotency-Key.
func (a *Auth) Idempotent(method, pattern string) bool {
	return a.routes[method+" "+pattern].idempotent
}

// assertion is what the middleware resolved for a request: the encoded principal, its client,
// and whether the request may change it.
type assertion struct {
	value    string
	clientID string
	write    bool
	// session is the console session the principal was resolved from, passed on with it.
	session string
}

type assertionKey struct{}

// Middleware applies the rules to every matched route of a grpc-gateway mux, then resolves the
// request's credential and keeps the assertion for Metadata. It reads the pattern
// middleware.RouteMiddleware recorded, when that runs before it. A route without a rule (the
// route table is older than the mux) is answered 500 rather than guessed at.
func (a *Auth) Middleware() runtime.Middleware {
	return func(next runtime.HandlerFunc) runtime.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
			rt, ok := a.routes[r.Method+" "+RoutePattern(r.Context())]
			if !ok {
				envelope.WriteError(w, envelope.Internal(r.Context()))
				return
			}
			if rt.edge.Session && a.session(w, r, rt, params, next) {
				return
			}
			if rt.console {
				r = withConsoleCookies(r)
			}
			if rt.console && unsafe(r.Method) && a.origins.Check(r) != nil {
				// Signing in opens a session: only the console's own pages may.
				envelope.WriteError(w, errCrossOrigin)
				return
			}
			c, problems := Check(rt.edge, r.Header)
			if len(problems) > 0 {
				envelope.WriteErrors(w, Unauthenticated(problems))
				return
			}
			if bad := CheckIdempotencyKey(rt.idempotent, r.Header); bad != nil {
				envelope.WriteError(w, *bad)
				return
			}
			if !c.Kind.Client() || a.cache == nil {
				next(w, r, params)
				return
			}
			p, err := principal.Resolve(r.Context(), a.cache, c.Kind, c.Secret, c.ClientID)
			switch {
			case errors.Is(err, principal.ErrUnauthenticated):
				envelope.WriteError(w, envelope.FromErr(r.Context(), auth.ErrUnauthenticated))
				return
			case err != nil:
				// Accounts did not answer: the service asks it itself.
				next(w, r, params)
				return
			}
			v, err := auth.AssertPrincipal(p)
			if err != nil {
				next(w, r, params)
				return
			}
			as := assertion{value: v, clientID: p.ClientID, write: rt.write}
			next(w, r.WithContext(context.WithValue(r.Context(), assertionKey{}, as)), params)
		}
	}
}

// Metadata is the grpc-gateway metadata annotator that passes the request's assertion, if any,
// to the service.
func Metadata(_ context.Context, r *http.Request) metadata.MD {
	b, sso := r.Context().Value(ssoBindingKey{}).(string)
	prior, signedIn := r.Context().Value(priorSessionKey{}).(string)
	if sso || signedIn {
		md := metadata.MD{}
		if sso {
			md.Set(mdSSOBinding, b)
		}
		if signedIn {
			md.Set(mdPriorSession, prior)
		}
		return md
	}
	if as, ok := r.Context().Value(assertionKey{}).(assertion); ok {
		md := metadata.MD{auth.MDPrincipal: []string{as.value}}
		if as.session != "" {
			md.Set(principal.Session.MD(), as.session)
		}
		return md
	}
	return nil
}

// ForgetWritten is the grpc-gateway forward-response option that drops the client's principals
// after its write to accounts succeeded, before the answer is written.
func (a *Auth) ForgetWritten(ctx context.Context, _ http.ResponseWriter, _ proto.Message) error {
	if as, ok := ctx.Value(assertionKey{}).(assertion); ok && as.write {
		a.cache.Forget(as.clientID)
	}
	return nil
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
