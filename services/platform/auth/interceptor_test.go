package auth_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// fakeAuthn is a stand-in for the accounts lookup: it answers with a fixed principal or error
// and records what it was asked. The Guard's policy logic is what is under test here.
type fakeAuthn struct {
	principal principal.Principal
	err       error
	calls     []authCall
}

type authCall struct{ kind, credential, clientID string }

func (f *fakeAuthn) AuthenticateAPIKey(_ context.Context, apiKey, clientID string) (principal.Principal, error) {
	f.calls = append(f.calls, authCall{"apikey", apiKey, clientID})
	return f.principal, f.err
}

func (f *fakeAuthn) AuthenticateSDKToken(_ context.Context, token, clientID string) (principal.Principal, error) {
	f.calls = append(f.calls, authCall{"sdk", token, clientID})
	return f.principal, f.err
}

const (
	// internalToken is the gateway's: the one caller mInternal admits.
	internalToken     = "gateway-service-token-0123456789"
	verificationToken = "verification-service-token-0123456789"
	connectToken      = "connect-service-token-0123456789"
	adminToken        = "admin-operator-token-0123456789"
	clientID          = "0f8fad5b-d9cb-469f-a165-70867728950e"

	mOpen      = "/test.Svc/Open"
	mInternal  = "/test.Svc/Internal"
	mServices  = "/test.Svc/Services"
	mAdmin     = "/test.Svc/Admin"
	mKey       = "/test.Svc/Key"
	mKeyAnyOK  = "/test.Svc/KeyAllowSuspended"
	mKeyAdmin  = "/test.Svc/KeyAdminRole"
	mSDK       = "/test.Svc/SDK"
	mZeroRule  = "/test.Svc/ZeroRule"
	mNoRule    = "/test.Svc/NoRule"
	mHealth    = "/grpc.health.v1.Health/Check"
	mHealthish = "/grpc.health.v1.HealthX/Check"
)

var policy = auth.Policy{
	mOpen:     {Credential: principal.None},
	mInternal: {Credential: principal.Internal, Callers: []string{auth.CallerGateway}},
	mServices: {Credential: principal.Internal, Callers: []string{auth.CallerVerification, auth.CallerConnect}},
	mAdmin:    {Credential: principal.Admin},
	mKey:      {Credential: principal.APIKey},
	mKeyAnyOK: {Credential: principal.APIKey, AllowSuspended: true},
	mKeyAdmin: {Credential: principal.APIKey, AdminRole: true},
	mSDK:      {Credential: principal.SDKToken},
	mZeroRule: {},
}

// callers are every internal caller, each with its own token.
var callers = auth.Callers{}.
	With(auth.CallerGateway, internalToken).
	With(auth.CallerVerification, verificationToken).
	With(auth.CallerConnect, connectToken)

var (
	activeAdmin     = principal.Principal{ClientID: clientID, KeyID: "k1", Role: principal.RoleAdmin, Status: principal.StatusActive, Features: []string{"VERIFY"}}
	activeMember    = principal.Principal{ClientID: clientID, KeyID: "k2", Role: principal.RoleMember, Status: principal.StatusActive}
	suspendedAdmin  = principal.Principal{ClientID: clientID, KeyID: "k3", Role: principal.RoleAdmin, Status: principal.StatusSuspended}
	suspendedMember = principal.Principal{ClientID: clientID, KeyID: "k4", Role: principal.RoleMember, Status: principal.StatusSuspended}
	sdkPrincipal    = principal.Principal{ClientID: clientID, SDKTokenID: "t1", Status: principal.StatusActive}
)

func TestGuardCheck(t *testing.T) {
	apiKey := crypto.NewToken(principal.APIKeyPrefix)
	sdkToken := crypto.NewToken(principal.SDKTokenPrefix)
	errDB := errors.New("connection refused")

	type want struct {
		code      codes.Code
		reason    fault.Reason // checked when code != OK
		principal *principal.Principal
		calls     []authCall // nil: the authenticator must not be asked
	}
	unauth := want{code: codes.Unauthenticated, reason: fault.Unauthenticated}
	denied := want{code: codes.PermissionDenied, reason: fault.PermissionDenied}
	ok := want{code: codes.OK}
	keyCall := []authCall{{"apikey", apiKey, ""}}
	keyCallWithClient := []authCall{{"apikey", apiKey, clientID}}
	withCalls := func(w want, calls []authCall) want { w.calls = calls; return w }
	withPrincipal := func(p principal.Principal, calls []authCall) want {
		return want{code: codes.OK, principal: &p, calls: calls}
	}

	tests := []struct {
		name      string
		method    string
		md        metadata.MD // nil: no incoming metadata
		principal principal.Principal
		authErr   error
		want      want
	}{
		// Methods without a rule.
		{"method without a rule is refused", mNoRule, metadata.Pairs("authorization", "Bearer "+adminToken), activeAdmin, nil, denied},
		{"method without a rule is refused even with an api key", mNoRule, metadata.Pairs("x-api-key", apiKey), activeAdmin, nil, denied},
		{"health passes without a rule", mHealth, nil, principal.Principal{}, nil, ok},
		{"health-like prefix is not health", mHealthish, nil, principal.Principal{}, nil, denied},
		{"zero rule is refused", mZeroRule, metadata.Pairs("x-api-key", apiKey), activeAdmin, nil, denied},

		// None.
		{"None passes without metadata", mOpen, nil, principal.Principal{}, nil, ok},
		{"None passes with junk credentials", mOpen, metadata.Pairs("x-api-key", "junk", "authorization", "junk"), principal.Principal{}, nil, ok},

		// Internal and Admin bearer tokens.
		{"internal: right token", mInternal, metadata.Pairs("authorization", "Bearer "+internalToken), principal.Principal{}, nil, ok},
		{"internal: wrong token", mInternal, metadata.Pairs("authorization", "Bearer "+internalToken+"x"), principal.Principal{}, nil, unauth},
		{"internal: admin token refused", mInternal, metadata.Pairs("authorization", "Bearer "+adminToken), principal.Principal{}, nil, unauth},
		{"internal: missing Bearer prefix", mInternal, metadata.Pairs("authorization", internalToken), principal.Principal{}, nil, unauth},
		{"internal: lower-case bearer", mInternal, metadata.Pairs("authorization", "bearer "+internalToken), principal.Principal{}, nil, unauth},
		{"internal: Basic scheme", mInternal, metadata.Pairs("authorization", "Basic "+internalToken), principal.Principal{}, nil, unauth},
		{"internal: empty bearer", mInternal, metadata.Pairs("authorization", "Bearer "), principal.Principal{}, nil, unauth},
		{"internal: repeated authorization", mInternal, metadata.Pairs("authorization", "Bearer "+internalToken, "authorization", "Bearer "+internalToken), principal.Principal{}, nil, unauth},
		{"internal: repeated authorization, one wrong", mInternal, metadata.Pairs("authorization", "Bearer "+internalToken, "authorization", "Bearer x"), principal.Principal{}, nil, unauth},
		{"internal: no metadata", mInternal, nil, principal.Principal{}, nil, unauth},
		{"internal: api key is no substitute", mInternal, metadata.Pairs("x-api-key", apiKey), activeAdmin, nil, unauth},
		{"admin: right token", mAdmin, metadata.Pairs("authorization", "Bearer "+adminToken), principal.Principal{}, nil, ok},
		{"admin: wrong token", mAdmin, metadata.Pairs("authorization", "Bearer nope"), principal.Principal{}, nil, unauth},
		{"admin: internal token refused", mAdmin, metadata.Pairs("authorization", "Bearer "+internalToken), principal.Principal{}, nil, unauth},
		{"admin: missing Bearer prefix", mAdmin, metadata.Pairs("authorization", adminToken), principal.Principal{}, nil, unauth},
		{"admin: repeated authorization", mAdmin, metadata.Pairs("authorization", "Bearer "+adminToken, "authorization", "Bearer "+adminToken), principal.Principal{}, nil, unauth},

		// API keys.
		{"api key: active member", mKey, metadata.Pairs("x-api-key", apiKey), activeMember, nil, withPrincipal(activeMember, keyCall)},
		{"api key: with matching client id", mKey, metadata.Pairs("x-api-key", apiKey, "x-client-id", clientID), activeMember, nil, withPrincipal(activeMember, keyCallWithClient)},
		{"api key: upper-case client id is passed canonical", mKey, metadata.Pairs("x-api-key", apiKey, "x-client-id", strings.ToUpper(clientID)), activeMember, nil, withPrincipal(activeMember, keyCallWithClient)},
		{"api key: missing", mKey, nil, activeAdmin, nil, unauth},
		{"api key: missing, client id only", mKey, metadata.Pairs("x-client-id", clientID), activeAdmin, nil, unauth},
		{"api key: empty", mKey, metadata.Pairs("x-api-key", ""), activeAdmin, nil, unauth},
		{"api key: malformed", mKey, metadata.Pairs("x-api-key", "mnv_short"), activeAdmin, nil, unauth},
		{"api key: sdk token in its place", mKey, metadata.Pairs("x-api-key", sdkToken), activeAdmin, nil, unauth},
		{"api key: trailing space", mKey, metadata.Pairs("x-api-key", apiKey+" "), activeAdmin, nil, unauth},
		{"api key: repeated", mKey, metadata.Pairs("x-api-key", apiKey, "x-api-key", apiKey), activeAdmin, nil, unauth},
		{"api key: malformed client id", mKey, metadata.Pairs("x-api-key", apiKey, "x-client-id", "not-a-uuid"), activeAdmin, nil, unauth},
		{"api key: client id without dashes", mKey, metadata.Pairs("x-api-key", apiKey, "x-client-id", strings.ReplaceAll(clientID, "-", "")), activeAdmin, nil, unauth},
		{"api key: repeated client id", mKey, metadata.Pairs("x-api-key", apiKey, "x-client-id", clientID, "x-client-id", clientID), activeAdmin, nil, unauth},
		{"api key: authenticator says unauthenticated", mKey, metadata.Pairs("x-api-key", apiKey), principal.Principal{}, principal.ErrUnauthenticated, withCalls(unauth, keyCall)},
		{"api key: authenticator wraps unauthenticated", mKey, metadata.Pairs("x-api-key", apiKey), principal.Principal{}, fmt.Errorf("revoked: %w", principal.ErrUnauthenticated), withCalls(unauth, keyCall)},
		{"api key: authenticator fails otherwise", mKey, metadata.Pairs("x-api-key", apiKey), principal.Principal{}, errDB, withCalls(want{code: codes.Unavailable, reason: fault.Unavailable}, keyCall)},
		{"api key: suspended refused", mKey, metadata.Pairs("x-api-key", apiKey), suspendedMember, nil, withCalls(denied, keyCall)},
		{"api key: empty status counts as not active", mKey, metadata.Pairs("x-api-key", apiKey), principal.Principal{ClientID: clientID, KeyID: "k1", Role: principal.RoleAdmin}, nil, withCalls(denied, keyCall)},
		{"api key: suspended allowed by AllowSuspended", mKeyAnyOK, metadata.Pairs("x-api-key", apiKey), suspendedMember, nil, withPrincipal(suspendedMember, keyCall)},
		{"api key: active allowed by AllowSuspended", mKeyAnyOK, metadata.Pairs("x-api-key", apiKey), activeMember, nil, withPrincipal(activeMember, keyCall)},
		{"admin role: member refused", mKeyAdmin, metadata.Pairs("x-api-key", apiKey), activeMember, nil, withCalls(denied, keyCall)},
		{"admin role: admin passes", mKeyAdmin, metadata.Pairs("x-api-key", apiKey), activeAdmin, nil, withPrincipal(activeAdmin, keyCall)},
		{"admin role: suspended admin refused", mKeyAdmin, metadata.Pairs("x-api-key", apiKey), suspendedAdmin, nil, withCalls(denied, keyCall)},
		{"api key: bearer token is no substitute", mKey, metadata.Pairs("authorization", "Bearer "+adminToken), activeAdmin, nil, unauth},

		// SDK tokens.
		{"sdk: token and client id", mSDK, metadata.Pairs("x-sdk-token", sdkToken, "x-client-id", clientID), sdkPrincipal, nil, withPrincipal(sdkPrincipal, []authCall{{"sdk", sdkToken, clientID}})},
		{"sdk: client id required", mSDK, metadata.Pairs("x-sdk-token", sdkToken), sdkPrincipal, nil, unauth},
		{"sdk: malformed token", mSDK, metadata.Pairs("x-sdk-token", apiKey, "x-client-id", clientID), sdkPrincipal, nil, unauth},
		{"sdk: repeated token", mSDK, metadata.Pairs("x-sdk-token", sdkToken, "x-sdk-token", sdkToken, "x-client-id", clientID), sdkPrincipal, nil, unauth},
		{"sdk: authenticator says unauthenticated", mSDK, metadata.Pairs("x-sdk-token", sdkToken, "x-client-id", clientID), principal.Principal{}, principal.ErrUnauthenticated, withCalls(unauth, []authCall{{"sdk", sdkToken, clientID}})},
		// Principals the gateway asserted (auth.MDPrincipal).
		{"asserted by the gateway: believed, accounts not asked", mKey, asserting(internalToken, activeMember, "x-api-key", apiKey), activeAdmin, nil, withPrincipal(wire(activeMember), nil)},
		{"asserted by the gateway: with its client id", mKey, asserting(internalToken, activeMember, "x-api-key", apiKey, "x-client-id", clientID), activeAdmin, nil, withPrincipal(wire(activeMember), nil)},
		{"asserted by the gateway: the role rule applies", mKeyAdmin, asserting(internalToken, activeMember, "x-api-key", apiKey), activeAdmin, nil, denied},
		{"asserted by the gateway: the status rule applies", mKey, asserting(internalToken, suspendedMember, "x-api-key", apiKey), activeAdmin, nil, denied},
		{"asserted by the gateway: an SDK token's", mSDK, asserting(internalToken, sdkPrincipal, "x-sdk-token", sdkToken, "x-client-id", clientID), activeAdmin, nil, withPrincipal(wire(sdkPrincipal), nil)},
		{"asserted by the gateway: no credential beside it", mKey, asserting(internalToken, activeAdmin), activeAdmin, nil, unauth},
		// The gateway checked the key's shape before it resolved it: the service does not again.
		{"asserted by the gateway: the key's shape is the gateway's to check", mKey, asserting(internalToken, activeMember, "x-api-key", "mnv_short"), activeAdmin, nil, withPrincipal(wire(activeMember), nil)},
		{"asserted by the gateway: beside a key repeated", mKey, asserting(internalToken, activeAdmin, "x-api-key", apiKey, "x-api-key", apiKey), activeAdmin, nil, unauth},
		{"asserted by the gateway: beside an SDK token on an API-key method", mKey, asserting(internalToken, sdkPrincipal, "x-sdk-token", sdkToken, "x-client-id", clientID), activeAdmin, nil, unauth},
		{"not asserted: a malformed key is refused unasked", mKey, metadata.Pairs("x-api-key", "mnv_short"), activeAdmin, nil, unauth},
		{"asserted by verification: ignored", mKey, asserting(verificationToken, activeAdmin, "x-api-key", apiKey), activeMember, nil, withPrincipal(activeMember, keyCall)},
		{"asserted without a token (a client's own): ignored", mKey, asserting("", activeAdmin, "x-api-key", apiKey), activeMember, nil, withPrincipal(activeMember, keyCall)},
		{"asserted with a wrong token: ignored", mKey, asserting(internalToken+"x", activeAdmin, "x-api-key", apiKey), activeMember, nil, withPrincipal(activeMember, keyCall)},
		{"asserted SDK token's on an API-key method: ignored", mKey, asserting(internalToken, sdkPrincipal, "x-api-key", apiKey), activeMember, nil, withPrincipal(activeMember, keyCall)},
		{"asserted key's on an SDK-token method: ignored", mSDK, asserting(internalToken, activeAdmin, "x-sdk-token", sdkToken, "x-client-id", clientID), sdkPrincipal, nil, withPrincipal(sdkPrincipal, []authCall{{"sdk", sdkToken, clientID}})},
		{"asserted of another client than X-CLIENT-ID: ignored", mKey, asserting(internalToken, otherClient, "x-api-key", apiKey, "x-client-id", clientID), activeMember, nil, withPrincipal(activeMember, keyCallWithClient)},
		{"asserted without a client: ignored", mKey, asserting(internalToken, principal.Principal{KeyID: "k9", Role: principal.RoleAdmin, Status: principal.StatusActive}, "x-api-key", apiKey), activeMember, nil, withPrincipal(activeMember, keyCall)},
		{"asserted unreadably: ignored", mKey, metadata.Pairs("authorization", "Bearer "+internalToken, "x-api-key", apiKey, auth.MDPrincipal, "\xff\xffnot a principal"), activeMember, nil, withPrincipal(activeMember, keyCall)},
		{"asserted twice: ignored", mKey, metadata.Join(asserting(internalToken, activeAdmin, "x-api-key", apiKey), metadata.Pairs(auth.MDPrincipal, assertion(activeAdmin))), activeMember, nil, withPrincipal(activeMember, keyCall)},
	}
	tokens := auth.NewServiceTokens(callers, adminToken)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeAuthn{principal: tt.principal, err: tt.authErr}
			g := auth.NewGuard(policy, fake, tokens)
			in := context.Background()
			if tt.md != nil {
				in = metadata.NewIncomingContext(in, tt.md)
			}
			ctx, err := g.Check(in, tt.method)

			if code := status.Code(err); code != tt.want.code {
				t.Fatalf("Check code = %v (%v), want %v", code, err, tt.want.code)
			}
			if tt.want.code != codes.OK {
				if d := apierr.Parse(err); d.Reason != tt.want.reason {
					t.Errorf("reason = %q, want %q", d.Reason, tt.want.reason)
				}
				if msg := apierr.Parse(err).Message; strings.Contains(msg, apiKey) || strings.Contains(msg, internalToken) || strings.Contains(msg, adminToken) {
					t.Errorf("error message %q quotes a credential", msg)
				}
			}
			if ctx == nil {
				t.Fatal("Check returned a nil context")
			}
			p, has := principal.FromContext(ctx)
			switch {
			case tt.want.principal == nil && has:
				t.Errorf("context carries principal %+v, want none", p)
			case tt.want.principal != nil && !has:
				t.Errorf("context carries no principal, want %+v", *tt.want.principal)
			case tt.want.principal != nil && !reflect.DeepEqual(p, *tt.want.principal):
				t.Errorf("principal = %+v, want %+v", p, *tt.want.principal)
			}
			if !reflect.DeepEqual(fake.calls, tt.want.calls) {
				t.Errorf("authenticator calls = %+v, want %+v", fake.calls, tt.want.calls)
			}
		})
	}
}

// TestGuardTokensNotConfigured checks that an unset internal or admin token never lets anyone
// in, whatever they send.
func TestGuardTokensNotConfigured(t *testing.T) {
	g := auth.NewGuard(policy, nil, auth.NewServiceTokens(auth.Callers{}, ""))
	tests := []struct {
		name, method, authorization string
	}{
		{"internal, empty bearer", mInternal, "Bearer "},
		{"internal, some token", mInternal, "Bearer x"},
		{"admin, empty bearer", mAdmin, "Bearer "},
		{"admin, some token", mAdmin, "Bearer x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", tt.authorization))
			if _, err := g.Check(ctx, tt.method); status.Code(err) != codes.Unauthenticated {
				t.Errorf("Check = %v, want Unauthenticated", err)
			}
		})
	}
}

func TestGuardWithoutAuthenticator(t *testing.T) {
	g := auth.NewGuard(policy, nil, auth.NewServiceTokens(callers, adminToken))
	tests := []struct {
		name   string
		method string
		md     metadata.MD
		want   codes.Code
	}{
		{"api key rule refused", mKey, metadata.Pairs("x-api-key", crypto.NewToken(principal.APIKeyPrefix)), codes.PermissionDenied},
		{"sdk rule refused", mSDK, metadata.Pairs("x-sdk-token", crypto.NewToken(principal.SDKTokenPrefix), "x-client-id", clientID), codes.PermissionDenied},
		{"internal still works", mInternal, metadata.Pairs("authorization", "Bearer "+internalToken), codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := g.Check(metadata.NewIncomingContext(context.Background(), tt.md), tt.method)
			if status.Code(err) != tt.want {
				t.Errorf("Check = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestGuardCanceled checks that an authenticator failing because the caller went away reports
// the context's error, not UNAVAILABLE.
func TestGuardCanceled(t *testing.T) {
	g := auth.NewGuard(policy, &fakeAuthn{err: context.Canceled}, auth.NewServiceTokens(callers, adminToken))
	ctx, cancel := context.WithCancel(metadata.NewIncomingContext(context.Background(),
		metadata.Pairs("x-api-key", crypto.NewToken(principal.APIKeyPrefix))))
	cancel()
	if _, err := g.Check(ctx, mKey); !errors.Is(err, context.Canceled) {
		t.Errorf("Check = %v, want context.Canceled", err)
	}
}

func TestGuardUnaryInterceptor(t *testing.T) {
	apiKey := crypto.NewToken(principal.APIKeyPrefix)
	tests := []struct {
		name       string
		md         metadata.MD
		wantCode   codes.Code
		wantCalled bool
	}{
		{"authenticated call reaches the handler with the principal", metadata.Pairs("x-api-key", apiKey), codes.OK, true},
		{"refused call never reaches the handler", metadata.Pairs("x-api-key", "bad"), codes.Unauthenticated, false},
	}
	g := auth.NewGuard(policy, &fakeAuthn{principal: activeMember}, auth.NewServiceTokens(callers, adminToken))
	icpt := g.UnaryInterceptor()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called := false
			resp, err := icpt(metadata.NewIncomingContext(context.Background(), tt.md), "req",
				&grpc.UnaryServerInfo{FullMethod: mKey},
				func(ctx context.Context, req any) (any, error) {
					called = true
					if p, ok := principal.FromContext(ctx); !ok || p.KeyID != activeMember.KeyID {
						t.Errorf("handler context principal = %+v, %v", p, ok)
					}
					return "resp", nil
				})
			if status.Code(err) != tt.wantCode || called != tt.wantCalled {
				t.Fatalf("interceptor = %v, %v, handler called %v; want %v, called %v", resp, err, called, tt.wantCode, tt.wantCalled)
			}
			if tt.wantCalled && resp != "resp" {
				t.Errorf("resp = %v, want the handler's", resp)
			}
		})
	}
}

// serverStream is the least of a grpc.ServerStream the stream interceptor touches: its context.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *serverStream) Context() context.Context { return s.ctx }

func TestGuardStreamInterceptor(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		md         metadata.MD
		wantCode   codes.Code
		wantCalled bool
	}{
		{"internal stream passes", mInternal, metadata.Pairs("authorization", "Bearer "+internalToken), codes.OK, true},
		{"sdk stream carries the principal", mSDK, metadata.Pairs("x-sdk-token", crypto.NewToken(principal.SDKTokenPrefix), "x-client-id", clientID), codes.OK, true},
		{"unknown stream refused", mNoRule, nil, codes.PermissionDenied, false},
	}
	g := auth.NewGuard(policy, &fakeAuthn{principal: sdkPrincipal}, auth.NewServiceTokens(callers, adminToken))
	icpt := g.StreamInterceptor()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.md != nil {
				ctx = metadata.NewIncomingContext(ctx, tt.md)
			}
			called := false
			err := icpt(nil, &serverStream{ctx: ctx}, &grpc.StreamServerInfo{FullMethod: tt.method}, func(_ any, ss grpc.ServerStream) error {
				called = true
				_, has := principal.FromContext(ss.Context())
				if wantP := tt.method == mSDK; has != wantP {
					t.Errorf("stream context has principal = %v, want %v", has, wantP)
				}
				return nil
			})
			if status.Code(err) != tt.wantCode || called != tt.wantCalled {
				t.Fatalf("interceptor = %v, handler called %v; want %v, called %v", err, called, tt.wantCode, tt.wantCalled)
			}
		})
	}
}

// TestBearerCredentialsPassGuard checks that what the client side sends is what the server
// side accepts.
func TestBearerCredentialsPassGuard(t *testing.T) {
	tests := []struct {
		name   string
		creds  auth.BearerCredentials
		method string
		want   codes.Code
	}{
		{"internal credentials on an internal method", auth.BearerCredentials{Token: internalToken}, mInternal, codes.OK},
		{"admin credentials on an admin method", auth.BearerCredentials{Token: adminToken, Insecure: true}, mAdmin, codes.OK},
		{"internal credentials on an admin method", auth.BearerCredentials{Token: internalToken}, mAdmin, codes.Unauthenticated},
	}
	g := auth.NewGuard(policy, nil, auth.NewServiceTokens(callers, adminToken))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.creds.RequireTransportSecurity(); got == tt.creds.Insecure {
				t.Errorf("RequireTransportSecurity = %v with Insecure %v", got, tt.creds.Insecure)
			}
			m, err := tt.creds.GetRequestMetadata(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			_, err = g.Check(metadata.NewIncomingContext(context.Background(), metadata.New(m)), tt.method)
			if status.Code(err) != tt.want {
				t.Errorf("Check = %v, want %v", err, tt.want)
			}
		})
	}
}

// otherClient is a principal of a client other than clientID.
var otherClient = principal.Principal{ClientID: "6ba7b810-9dad-41d1-80b4-00c04fd430c8", KeyID: "k5", Role: principal.RoleAdmin, Status: principal.StatusActive}

// assertion is the gateway's MDPrincipal value for p.
func assertion(p principal.Principal) string {
	v, err := auth.AssertPrincipal(p)
	if err != nil {
		panic(err)
	}
	return v
}

// asserting is incoming metadata asserting p, with token as the bearer ("" for none) and kv.
func asserting(token string, p principal.Principal, kv ...string) metadata.MD {
	md := metadata.Pairs(append(kv, auth.MDPrincipal, assertion(p))...)
	if token != "" {
		md.Set("authorization", "Bearer "+token)
	}
	return md
}

// wire is p as it arrives through its assertion: empty lists come back empty, not nil.
func wire(p principal.Principal) principal.Principal {
	return auth.PrincipalFromProto(auth.PrincipalToProto(p))
}

func (f *fakeAuthn) AuthenticateSession(_ context.Context, token string) (principal.Principal, error) {
	f.calls = append(f.calls, authCall{"session", token, ""})
	return f.principal, f.err
}
