package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mnvhq/mnv/services/platform/principal"

	middleware "github.com/grpc-ecosystem/go-grpc-middleware/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/fault"
)

// Rule is the access rule of one method.
type Rule struct {
	// Credential is the kind the caller must present.
	Credential principal.Kind
	// Callers are the internal callers an Internal rule admits (KnownCallers); an Internal rule
	// must name at least one (Guard.Validate).
	Callers []string
	// AdminRole requires an API key with the ADMIN role.
	AdminRole bool
	// AllowSuspended lets a suspended client through (it may still read its own details).
	AllowSuspended bool
	// Feature is the product the client must have (VERIFY, CONNECT...), checked last, just
	// before the handler (FeatureUnaryInterceptor); "" for none.
	Feature string
	// Session: a person's console session is taken too, beside an API key; AdminRole then asks
	// the person's role.
	Session bool
	// StepUp: a session must have proved its passkey again within the step-up window.
	StepUp bool
}

// Policy maps full method names ("/pkg.Service/Method") to rules. Servers build theirs from the
// rules their RPCs declare (PolicyOf).
type Policy map[string]Rule

// Authenticator resolves client credentials (principal.Authenticator).
type Authenticator = principal.Authenticator

// ServiceTokens are the bearer credentials a server accepts: its internal callers' token
// digests, and the digest of the admin token. Both are compared in constant time.
type ServiceTokens struct {
	callers  Callers
	admin    [sha256.Size]byte
	hasAdmin bool
}

// NewServiceTokens keeps the callers and a digest of the admin token; an empty admin token is
// never accepted.
func NewServiceTokens(callers Callers, admin string) ServiceTokens {
	return ServiceTokens{callers: callers, admin: sha256.Sum256([]byte(admin)), hasAdmin: admin != ""}
}

func (t ServiceTokens) isAdmin(d [sha256.Size]byte) bool {
	return t.hasAdmin && subtle.ConstantTimeCompare(d[:], t.admin[:]) == 1
}

// Guard enforces a Policy.
type Guard struct {
	policy Policy
	authn  Authenticator
	tokens ServiceTokens
}

// NewGuard returns a Guard. authn may be nil for a service whose policy needs no client
// credential.
func NewGuard(policy Policy, authn Authenticator, tokens ServiceTokens) *Guard {
	return &Guard{policy: policy, authn: authn, tokens: tokens}
}

// Validate checks the policy itself: every method has a rule, every Internal rule names its
// callers, all of them known. A rule without callers would refuse every call; one with a
// misspelt caller, that caller. The gRPC server refuses to start with such a policy
// (grpcserver.New).
func (g *Guard) Validate() error {
	var errs []error
	for method, rule := range g.policy {
		if rule.Credential == 0 {
			errs = append(errs, fmt.Errorf("policy of %s: the method declares no rule (option (mnv.options.v1.rule))", method))
			continue
		}
		if rule.Feature != "" && !rule.Credential.Client() {
			errs = append(errs, fmt.Errorf("policy of %s: a Feature needs a client credential", method))
		}
		if rule.Credential != principal.Internal {
			if len(rule.Callers) > 0 {
				errs = append(errs, fmt.Errorf("policy of %s: Callers given on a rule that is not Internal", method))
			}
			continue
		}
		if len(rule.Callers) == 0 {
			errs = append(errs, fmt.Errorf("policy of %s: an Internal rule must name its Callers", method))
		}
		for _, c := range rule.Callers {
			if !slices.Contains(KnownCallers, c) {
				errs = append(errs, fmt.Errorf("policy of %s: unknown caller %q", method, c))
			}
		}
	}
	return errors.Join(errs...)
}

// ErrUnauthenticated answers a client credential that is wrong, revoked, expired or of another
// client, whoever finds it so: the gateway, refusing one it resolved itself, gives the same.
var ErrUnauthenticated = apierr.New(codes.Unauthenticated, fault.Unauthenticated, principal.ErrUnauthenticated.Error())

var (
	errNoRule      = apierr.New(codes.PermissionDenied, fault.PermissionDenied, "method not allowed")
	errSuspended   = apierr.New(codes.PermissionDenied, fault.PermissionDenied, fault.ErrSuspended.Error())
	errNotAdmin    = apierr.New(codes.PermissionDenied, fault.PermissionDenied, "this operation needs an API key with the ADMIN role")
	errNotAdminYou = apierr.New(codes.PermissionDenied, fault.PermissionDenied, "this operation needs the ADMIN role in this client")
	errStepUp      = apierr.New(codes.PermissionDenied, fault.StepUpRequired, "this operation needs a fresh passkey check: step up (POST /v1/api/console/step-up) and try again")
	errUnavailable = apierr.New(codes.Unavailable, fault.Unavailable, "authentication is unavailable, try again")
	// errCallerNotAdmitted answers a valid internal token on a method whose rule does not name
	// its caller. UNAUTHENTICATED rather than PERMISSION_DENIED: the credential is not one this
	// method accepts, and callers read PERMISSION_DENIED as a business refusal (accountsclient
	// takes it for a suspended client, which would settle a verification as REJECTED), while an
	// unexpected UNAUTHENTICATED leaves a charge unknown, retried and alerted on. The message
	// tells the operator that the token is valid and the caller list is what to look at.
	errCallerNotAdmitted = apierr.New(codes.Unauthenticated, fault.Unauthenticated, "this internal caller may not call this method")
)

// Check authenticates the call to method and returns ctx carrying the principal, if any.
func (g *Guard) Check(ctx context.Context, method string) (context.Context, error) {
	rule, ok := g.policy[method]
	if !ok {
		// Health says whether the server serves; reflection describes the services' schemas
		// (public in the repository), and is only registered where it is switched on
		// (grpcserver.Transport.Reflection): grpc-go answers a service it does not serve
		// before any interceptor runs. Neither touches data, so neither needs a credential.
		if strings.HasPrefix(method, "/grpc.health.v1.Health/") || isReflection(method) {
			return ctx, nil
		}
		return ctx, errNoRule
	}
	token, hasBearer := bearer(ctx)
	var (
		digest   [sha256.Size]byte
		caller   string
		isCaller bool
	)
	if hasBearer {
		digest = sha256.Sum256([]byte(token))
		if caller, isCaller = g.tokens.callers.caller(digest); isCaller {
			ctx = context.WithValue(ctx, callerKey{}, caller)
		}
	}
	switch rule.Credential {
	case principal.None:
		return ctx, nil
	case principal.Internal:
		if !isCaller {
			return ctx, ErrUnauthenticated
		}
		if !slices.Contains(rule.Callers, caller) {
			return ctx, errCallerNotAdmitted
		}
		return ctx, nil
	case principal.Admin:
		if !hasBearer || !g.tokens.isAdmin(digest) {
			return ctx, ErrUnauthenticated
		}
		return ctx, nil
	}
	k := rule.Credential
	if !k.Client() {
		return ctx, errNoRule
	}
	if rule.Session && len(metadata.ValueFromIncomingContext(ctx, k.MD())) == 0 &&
		len(metadata.ValueFromIncomingContext(ctx, principal.Session.MD())) > 0 {
		// A person's session in place of the API key (the console's call).
		k = principal.Session
	}
	p, err := g.client(ctx, k, caller)
	if err != nil {
		return ctx, err
	}
	if p.Status != principal.StatusActive && !rule.AllowSuspended {
		return ctx, errSuspended
	}
	if rule.AdminRole && p.Role != principal.RoleAdmin {
		if k == principal.Session {
			return ctx, errNotAdminYou
		}
		return ctx, errNotAdmin
	}
	if rule.StepUp && k == principal.Session && !p.SteppedUp() {
		return ctx, errStepUp
	}
	return principal.WithPrincipal(ctx, p), nil
}

// client resolves the client credential of kind k the call carries, with the X-CLIENT-ID it
// sends, parsed here once. A principal the gateway asserted for them is believed as it is
// (asserted): the gateway resolved the very credential, whose shape it checked, so the service
// neither checks nor resolves it again. Otherwise the credential must have its shape before
// anyone is asked about it.
func (g *Guard) client(ctx context.Context, k principal.Kind, caller string) (principal.Principal, error) {
	if g.authn == nil {
		return principal.Principal{}, errNoRule
	}
	ids := metadata.ValueFromIncomingContext(ctx, principal.MDClientID)
	clientID, sent := only(ids)
	if sent {
		var ok bool
		if clientID, ok = principal.ParseClientID(clientID); !ok {
			return principal.Principal{}, ErrUnauthenticated
		}
	} else if len(ids) > 1 {
		return principal.Principal{}, ErrUnauthenticated
	}
	secret, ok := single(ctx, k.MD())
	if !ok || k.WithClientID() && clientID == "" {
		return principal.Principal{}, ErrUnauthenticated
	}
	if p, ok := asserted(ctx, caller, k, clientID); ok {
		return p, nil
	}
	if !k.WellFormed(secret) {
		return principal.Principal{}, ErrUnauthenticated
	}
	p, err := principal.Resolve(ctx, g.authn, k, secret, clientID)
	switch {
	case errors.Is(err, principal.ErrUnauthenticated):
		return principal.Principal{}, ErrUnauthenticated
	case err != nil:
		if ctx.Err() != nil {
			return principal.Principal{}, ctx.Err()
		}
		return principal.Principal{}, errUnavailable
	}
	if p.Kind() != k {
		// The rules that follow (role, step-up) read the kind: a principal of another kind than
		// the credential resolved is no answer to believe.
		return principal.Principal{}, ErrUnauthenticated
	}
	return p, nil
}

// single returns the only value of key in the incoming metadata; a repeated credential is as
// bad as a missing one.
func single(ctx context.Context, key string) (string, bool) {
	return only(metadata.ValueFromIncomingContext(ctx, key))
}

// only returns the one value of v, if v holds exactly one and it is not empty.
func only(v []string) (string, bool) {
	if len(v) != 1 || v[0] == "" {
		return "", false
	}
	return v[0], true
}

func bearer(ctx context.Context) (string, bool) {
	v, ok := single(ctx, MDAuthorization)
	if !ok {
		return "", false
	}
	token, ok := strings.CutPrefix(v, "Bearer ")
	return token, ok && token != ""
}

// UnaryInterceptor enforces the policy on unary calls.
func (g *Guard) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := g.Check(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamInterceptor enforces the policy on streams.
func (g *Guard) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, err := g.Check(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		ws := middleware.WrapServerStream(ss)
		ws.WrappedContext = ctx
		return handler(srv, ws)
	}
}

// BearerCredentials attaches a bearer token to every call of a client connection: the internal
// credential of one mnv service calling another, or the admin credential of mnvctl.
type BearerCredentials struct {
	Token string
	// Insecure allows plain-text connections (loopback, or a mesh that encrypts for us). When
	// false, gRPC refuses to send the token over a connection without TLS.
	Insecure bool
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (b BearerCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{MDAuthorization: "Bearer " + b.Token}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (b BearerCredentials) RequireTransportSecurity() bool { return !b.Insecure }

// isReflection tells the methods of gRPC server reflection, both versions grpc-go serves.
func isReflection(method string) bool {
	return method == "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo" ||
		method == "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
}
