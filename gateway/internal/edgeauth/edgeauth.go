// Package edgeauth authenticates the client credential of a request once, at the edge, and
// asserts the principal to the service the request goes to (auth.MDPrincipal), so that the
// service does not resolve the same credential again: with the gateway's principal cache, a
// request's authentication costs no call and no query at all.
//
// It runs after headerauth, which let through only one well-formed credential of the route's
// kind. The credential is resolved through the gateway's principal cache (platform/
// principalcache: kept in step with accounts by its WatchPrincipals stream, asking accounts
// whenever that stream is not trusted), so a revoked key, a suspended client or a changed role
// stops working here within the cache's bound, as in the services. A credential accounts refuses
// is answered here with the 401 a service would give (auth.ErrUnauthenticated). When accounts
// cannot answer, nothing is asserted: the service authenticates the credential itself and
// answers as it would without the gateway's help.
//
// A client's own write to accounts through the gateway (a request but GET to accounts' routes,
// which own credentials and clients: a key revoked or rotated, say) drops the client's
// principals from the gateway's cache when it succeeded, before the answer leaves, so the
// client's next request here sees the change at once; other replicas learn of it from accounts'
// push, like the services. Writes to the other services change no principal and keep them.
//
// The gateway decides nothing else: the method's rule (client status, the key's role, the
// feature) is the service's to apply to the asserted principal, as to any other.
package edgeauth

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/mnvhq/mnv/gateway/internal/envelope"
	"github.com/mnvhq/mnv/gateway/internal/headerauth"
	openapigen "github.com/mnvhq/mnv/proto/gen/openapi"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/credential"
	"github.com/mnvhq/mnv/services/platform/identity"
	"github.com/mnvhq/mnv/services/platform/rpcrule"
)

// Cache resolves client credentials: the gateway's principal cache (platform/principalcache) in
// front of accounts.
type Cache interface {
	AuthenticateAPIKey(ctx context.Context, apiKey, clientID string) (identity.Principal, error)
	AuthenticateSDKToken(ctx context.Context, sdkToken, clientID string) (identity.Principal, error)
	// Forget drops the client's principals.
	Forget(clientID string)
}

// Resolver resolves the credentials of the routes that take one.
type Resolver struct {
	cache Cache
	rules *headerauth.Rules
	// writes are the routes (method and pattern) that may change a principal.
	writes map[string]bool
}

// accountsRPCs is the prefix of the RPCs of accounts' public service, which owns credentials and
// clients.
const accountsRPCs = "/mnv.accounts.v1.AccountsService/"

// New returns a Resolver that asks cache about the credentials of the routes, whose rules are
// rules.
func New(cache Cache, rules *headerauth.Rules, routes []openapigen.Route) *Resolver {
	rs := &Resolver{cache: cache, rules: rules, writes: map[string]bool{}}
	for _, rt := range routes {
		if rt.Method != http.MethodGet && strings.HasPrefix(rt.RPC, accountsRPCs) {
			rs.writes[rt.Method+" "+rt.Pattern] = true
		}
	}
	return rs
}

// assertion is what the middleware resolved for a request: the encoded principal, its client,
// and whether the request may change it.
type assertion struct {
	value    string
	clientID string
	write    bool
}

type assertionKey struct{}

// Middleware resolves the request's credential and keeps the assertion for Metadata. It must
// run after headerauth's middleware, on a grpc-gateway mux.
func (rs *Resolver) Middleware() runtime.Middleware {
	return func(next runtime.HandlerFunc) runtime.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
			pattern := headerauth.RoutePattern(r.Context())
			e, ok := rs.rules.Edge(r.Method, pattern)
			if !ok || e.Credential != rpcrule.APIKeyHeader && e.Credential != rpcrule.SDKTokenHeader {
				next(w, r, params)
				return
			}
			p, err := rs.resolve(r, e.Credential)
			switch {
			case errors.Is(err, credential.ErrUnauthenticated):
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
			a := assertion{value: v, clientID: p.ClientID, write: rs.writes[r.Method+" "+pattern]}
			next(w, r.WithContext(context.WithValue(r.Context(), assertionKey{}, a)), params)
		}
	}
}

// resolve asks the authenticator about the request's credential, of kind c. headerauth has
// made sure the credential header is there once, well formed, and X-CLIENT-ID too when sent.
func (rs *Resolver) resolve(r *http.Request, c rpcrule.EdgeCredential) (identity.Principal, error) {
	clientID := ""
	if v := r.Header.Get(headerauth.HeaderClientID); v != "" {
		var ok bool
		if clientID, ok = credential.ParseClientID(v); !ok {
			return identity.Principal{}, credential.ErrUnauthenticated
		}
	}
	if c == rpcrule.SDKTokenHeader {
		return rs.cache.AuthenticateSDKToken(r.Context(), r.Header.Get(headerauth.HeaderSDKToken), clientID)
	}
	return rs.cache.AuthenticateAPIKey(r.Context(), r.Header.Get(headerauth.HeaderAPIKey), clientID)
}

// Metadata is the grpc-gateway metadata annotator that passes the request's assertion, if any,
// to the service.
func Metadata(_ context.Context, r *http.Request) metadata.MD {
	if a, ok := r.Context().Value(assertionKey{}).(assertion); ok {
		return metadata.MD{auth.MDPrincipal: []string{a.value}}
	}
	return nil
}

// ForgetWritten is the grpc-gateway forward-response option that drops the client's principals
// after its write to accounts succeeded, before the answer is written.
func (rs *Resolver) ForgetWritten(ctx context.Context, _ http.ResponseWriter, _ proto.Message) error {
	if a, ok := ctx.Value(assertionKey{}).(assertion); ok && a.write {
		rs.cache.Forget(a.clientID)
	}
	return nil
}
