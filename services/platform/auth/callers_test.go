package auth_test

import (
	"context"
	"maps"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// TestGuardCallers holds each internal method to the callers its rule names: every caller has
// its own token, a valid token on a method that does not admit its caller is refused, and the
// caller is known to the handler (auth.Caller) whatever the method's rule.
func TestGuardCallers(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		token      string // "" sends no authorization
		wantCode   codes.Code
		wantCaller string // "" for no recognised caller
	}{
		{"gateway on a gateway-only method", mInternal, internalToken, codes.OK, auth.CallerGateway},
		{"connect on a gateway-only method", mInternal, connectToken, codes.Unauthenticated, auth.CallerConnect},
		{"verification on a gateway-only method", mInternal, verificationToken, codes.Unauthenticated, auth.CallerVerification},
		{"verification on a services method", mServices, verificationToken, codes.OK, auth.CallerVerification},
		{"connect on a services method", mServices, connectToken, codes.OK, auth.CallerConnect},
		{"gateway on a services method", mServices, internalToken, codes.Unauthenticated, auth.CallerGateway},
		{"unknown token", mServices, "some-other-token-0123456789abcdef", codes.Unauthenticated, ""},
		{"admin token is no caller", mServices, adminToken, codes.Unauthenticated, ""},
		{"no token", mServices, "", codes.Unauthenticated, ""},
		{"a caller's token on an admin method", mAdmin, internalToken, codes.Unauthenticated, auth.CallerGateway},
		// The API key decides; the bearer only says which service relays the call.
		{"connect's token beside no api key", mKey, connectToken, codes.Unauthenticated, auth.CallerConnect},
		{"connect's token on an open method", mOpen, connectToken, codes.OK, auth.CallerConnect},
		{"gateway's token on an open method", mOpen, internalToken, codes.OK, auth.CallerGateway},
		{"no token on an open method", mOpen, "", codes.OK, ""},
	}
	g := auth.NewGuard(policy, &fakeAuthn{err: principal.ErrUnauthenticated}, auth.NewServiceTokens(callers, adminToken))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md := metadata.MD{}
			if tt.token != "" {
				md.Set("authorization", "Bearer "+tt.token)
			}
			ctx, err := g.Check(metadata.NewIncomingContext(context.Background(), md), tt.method)
			if code := status.Code(err); code != tt.wantCode {
				t.Fatalf("Check = %v, want %v", err, tt.wantCode)
			}
			if err != nil {
				if d := apierr.Parse(err); d.Reason != fault.Unauthenticated {
					t.Errorf("reason = %q, want %q", d.Reason, fault.Unauthenticated)
				}
				return
			}
			got, ok := auth.Caller(ctx)
			if got != tt.wantCaller || ok != (tt.wantCaller != "") {
				t.Errorf("Caller = %q, %v; want %q", got, ok, tt.wantCaller)
			}
		})
	}
}

// TestRollingACallersToken: during a roll a caller has two digests, and both tokens are that
// caller.
func TestRollingACallersToken(t *testing.T) {
	const oldToken, newToken = "connect-old-token-0123456789abcdef", "connect-new-token-0123456789abcdef"
	c, err := auth.ParseCallers(auth.CallerEntry(auth.CallerConnect, oldToken) + ", " + auth.CallerEntry(auth.CallerConnect, newToken))
	if err != nil {
		t.Fatal(err)
	}
	g := auth.NewGuard(policy, nil, auth.NewServiceTokens(c, ""))
	for _, tok := range []string{oldToken, newToken} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+tok))
		ctx, err := g.Check(ctx, mServices)
		if err != nil {
			t.Fatalf("token %s…: %v", tok[:11], err)
		}
		if name, _ := auth.Caller(ctx); name != auth.CallerConnect {
			t.Errorf("token %s… is caller %q", tok[:11], name)
		}
	}
}

func TestParseCallers(t *testing.T) {
	gw, co := auth.CallerEntry(auth.CallerGateway, internalToken), auth.CallerEntry(auth.CallerConnect, connectToken)
	tests := []struct {
		name    string
		in      string
		wantErr string // "" for none
		accepts []string
	}{
		{"two callers", gw + "," + co, "", []string{internalToken, connectToken}},
		{"spaces and empty entries", " " + gw + " ,, " + co + ",", "", []string{internalToken, connectToken}},
		{"upper-case name", strings.ToUpper(gw[:8]) + gw[8:], "unknown caller", nil},
		{"upper-case digest", auth.CallerGateway + ":" + strings.ToUpper(auth.TokenDigest(internalToken)), "", []string{internalToken}},
		{"empty", "", "", nil},
		{"no colon", "gateway" + auth.TokenDigest(internalToken), "want name:sha256-hex", nil},
		{"unknown caller", "gatway:" + auth.TokenDigest(internalToken), `unknown caller "gatway"`, nil},
		{"short digest", "gateway:abcd", "64 hex digits", nil},
		{"not hex", "gateway:" + strings.Repeat("zz", 32), "64 hex digits", nil},
		{"the plaintext token instead of its digest", "gateway:" + internalToken, "64 hex digits", nil},
		{"one token for two callers", gw + "," + auth.CallerEntry(auth.CallerConnect, internalToken), "every caller needs its own token", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := auth.ParseCallers(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), internalToken) {
					t.Errorf("the error quotes a token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, tok := range tt.accepts {
				if !c.Accepts(tok) {
					t.Errorf("does not accept %s…", tok[:8])
				}
			}
			if c.Accepts(adminToken) {
				t.Error("accepts a token it was not given")
			}
			if again, err := auth.ParseCallers(c.String()); err != nil || again.String() != c.String() {
				t.Errorf("String %q does not parse back: %v", c.String(), err)
			}
		})
	}
}

func TestLoadCallers(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"set", map[string]string{"MNV_INTERNAL_CALLERS": auth.CallerEntry(auth.CallerGateway, internalToken)}, ""},
		{"unset", nil, "MNV_INTERNAL_CALLERS: required"},
		{"blank", map[string]string{"MNV_INTERNAL_CALLERS": " , "}, "MNV_INTERNAL_CALLERS: required"},
		{"malformed", map[string]string{"MNV_INTERNAL_CALLERS": "gateway"}, "MNV_INTERNAL_CALLERS: entry 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := auth.LoadCallers(config.FromMap(tt.env))
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestGuardValidate(t *testing.T) {
	tests := []struct {
		name    string
		rule    auth.Rule
		wantErr string
	}{
		{"internal with callers", auth.Rule{Credential: principal.Internal, Callers: []string{auth.CallerGateway}}, ""},
		{"internal without callers", auth.Rule{Credential: principal.Internal}, "must name its Callers"},
		{"internal with an unknown caller", auth.Rule{Credential: principal.Internal, Callers: []string{"gatway"}}, `unknown caller "gatway"`},
		{"callers on an api key rule", auth.Rule{Credential: principal.APIKey, Callers: []string{auth.CallerGateway}}, "not Internal"},
		{"api key", auth.Rule{Credential: principal.APIKey}, ""},
		// What PolicyOf makes of a method that declares no rule.
		{"no rule", auth.Rule{}, "declares no rule"},
		{"feature on an api key", auth.Rule{Credential: principal.APIKey, Feature: "CONNECT"}, ""},
		{"feature on an internal rule", auth.Rule{Credential: principal.Internal, Callers: []string{auth.CallerGateway}, Feature: "CONNECT"}, "a Feature needs a client credential"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := auth.NewGuard(auth.Policy{"/test.Svc/M": tt.rule}, nil, auth.NewServiceTokens(callers, "")).Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate = %v, want %q", err, tt.wantErr)
			}
		})
	}
	valid := maps.Clone(policy)
	delete(valid, mZeroRule) // there to show that Check refuses it
	if err := auth.NewGuard(valid, nil, auth.NewServiceTokens(callers, "")).Validate(); err != nil {
		t.Errorf("the tests' policy: %v", err)
	}
}
