package callerauth_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/mnvhq/mnv/gateway/internal/callerauth"
	"github.com/mnvhq/mnv/gateway/internal/middleware"
	// The services' protos declare the rules the routes are read from.
	_ "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	_ "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	_ "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
	openapigen "github.com/mnvhq/mnv/proto/gen/openapi"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// cache stands for the gateway's principal cache: a fixed answer, and what it was asked and
// told to forget. The middleware's decisions are what is under test; the real cache and the
// services' belief in the assertion are tested over real sockets (tests/principals,
// tests/gateway).
type cache struct {
	p      principal.Principal
	err    error
	asked  []string
	forgot []string
}

func (c *cache) AuthenticateAPIKey(_ context.Context, key, clientID string) (principal.Principal, error) {
	c.asked = append(c.asked, "key "+key+" "+clientID)
	return c.p, c.err
}

func (c *cache) AuthenticateSDKToken(_ context.Context, token, clientID string) (principal.Principal, error) {
	c.asked = append(c.asked, "token "+token+" "+clientID)
	return c.p, c.err
}

func (c *cache) Forget(clientID string) { c.forgot = append(c.forgot, clientID) }

// TestMiddleware serves a few real routes of the API through a grpc-gateway mux with the
// gateway's header rules, and checks what reaches the service and what the cache is told.
func TestMiddleware(t *testing.T) {
	key := crypto.NewToken(principal.APIKeyPrefix)
	token := crypto.NewToken(principal.SDKTokenPrefix)
	member := principal.Principal{ClientID: clientID, KeyID: "k1", Role: principal.RoleMember, Status: principal.StatusActive, Operators: principal.DefaultOperators()}
	sdk := principal.Principal{ClientID: clientID, SDKTokenID: "t1", Status: principal.StatusActive, Operators: principal.DefaultOperators()}
	tests := []struct {
		name           string
		method, path   string
		headers        map[string]string
		p              principal.Principal
		err            error
		wantStatus     int
		wantAsked      []string
		wantAssertion  *principal.Principal // nil: none reaches the service
		wantForgot     []string
		serviceReached bool
	}{
		{"a key is resolved and asserted", "GET", "/v1/api/me", map[string]string{"X-Api-Key": key}, member, nil,
			200, []string{"key " + key + " "}, &member, nil, true},
		{"with its client id, made canonical", "GET", "/v1/api/clients", map[string]string{"X-Api-Key": key, "X-Client-Id": strings.ToUpper(clientID)}, member, nil,
			200, []string{"key " + key + " " + clientID}, &member, nil, true},
		{"an SDK token on its route", "POST", "/v1/api/sdk/session", map[string]string{"X-Sdk-Token": token, "X-Client-Id": clientID}, sdk, nil,
			200, []string{"token " + token + " " + clientID}, &sdk, nil, true},
		{"a write to another service than accounts keeps them", "POST", "/v1/api/verify", map[string]string{"X-Api-Key": key, "X-Client-Id": clientID}, member, nil,
			200, []string{"key " + key + " " + clientID}, &member, nil, true},
		{"a write to accounts forgets the client's principals", "DELETE", "/v1/api/me/api-keys/k2", map[string]string{"X-Api-Key": key}, member, nil,
			200, []string{"key " + key + " "}, &member, []string{clientID}, true},
		{"a refused key is 401 here, the service not called", "GET", "/v1/api/me", map[string]string{"X-Api-Key": key}, principal.Principal{}, principal.ErrUnauthenticated,
			401, []string{"key " + key + " "}, nil, nil, false},
		{"accounts away: the service decides, unasserted", "GET", "/v1/api/me", map[string]string{"X-Api-Key": key}, principal.Principal{}, errors.New("unavailable"),
			200, []string{"key " + key + " "}, nil, nil, true},
		{"a malformed key never reaches the cache", "GET", "/v1/api/me", map[string]string{"X-Api-Key": "mnv_short"}, member, nil,
			401, nil, nil, nil, false},
		{"a route without a credential asks nothing", "POST", "/v1/api/me/api-key/generate", map[string]string{"X-Client-Id": clientID, "X-Api-Key": key}, member, nil,
			200, nil, nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &cache{p: tt.p, err: tt.err}
			edge, err := callerauth.New(c, openapigen.Routes)
			if err != nil {
				t.Fatal(err)
			}
			mux := runtime.NewServeMux(
				runtime.WithMiddlewares(middleware.RouteMiddleware(), edge.Middleware()),
				runtime.WithMetadata(callerauth.Metadata),
				runtime.WithForwardResponseOption(edge.ForgetWritten),
			)
			var (
				reached bool
				md      metadata.MD
				// forgotBefore: what the cache had been told when the answer was written.
				forgotBefore []string
			)
			for _, rt := range openapigen.Routes {
				if rt.Method != tt.method {
					continue
				}
				if err := mux.HandlePath(rt.Method, rt.Pattern, func(w http.ResponseWriter, r *http.Request, _ map[string]string) {
					reached = true
					ctx, err := runtime.AnnotateContext(r.Context(), mux, r, rt.RPC, runtime.WithHTTPPathPattern(rt.Pattern))
					if err != nil {
						t.Fatal(err)
					}
					md, _ = metadata.FromOutgoingContext(ctx)
					runtime.ForwardResponseMessage(ctx, mux, &runtime.JSONPb{}, &recorder{ResponseWriter: w, before: func() { forgotBefore = append([]string(nil), c.forgot...) }}, r, &emptypb.Empty{}, mux.GetForwardResponseOptions()...)
				}); err != nil {
					t.Fatal(err)
				}
			}
			req := httptest.NewRequest(tt.method, tt.path, nil)
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, req)
			body, _ := io.ReadAll(w.Result().Body)
			if w.Code != tt.wantStatus {
				t.Fatalf("status %d %s, want %d", w.Code, body, tt.wantStatus)
			}
			if tt.wantStatus == 401 && tt.err != nil && !strings.Contains(string(body), principal.ErrUnauthenticated.Error()) {
				t.Errorf("401 says %s, want the services' message", body)
			}
			if reached != tt.serviceReached {
				t.Errorf("service reached: %v, want %v", reached, tt.serviceReached)
			}
			if !reflect.DeepEqual(c.asked, tt.wantAsked) {
				t.Errorf("cache asked %q, want %q", c.asked, tt.wantAsked)
			}
			values := md.Get(auth.MDPrincipal)
			switch {
			case tt.wantAssertion == nil && len(values) > 0:
				t.Errorf("asserted %d principals, want none", len(values))
			case tt.wantAssertion != nil:
				want, err := auth.AssertPrincipal(*tt.wantAssertion)
				if err != nil {
					t.Fatal(err)
				}
				if len(values) != 1 || values[0] != want {
					t.Errorf("assertion %q, want %q", values, want)
				}
			}
			if !reflect.DeepEqual(c.forgot, tt.wantForgot) || !reflect.DeepEqual(forgotBefore, tt.wantForgot) && reached {
				t.Errorf("forgot %q (%q before the answer), want %q", c.forgot, forgotBefore, tt.wantForgot)
			}
		})
	}
}

// recorder calls before when the answer's status is written.
type recorder struct {
	http.ResponseWriter
	before func()
	done   bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.done {
		r.done = true
		r.before()
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.done {
		r.WriteHeader(http.StatusOK)
	}
	return r.ResponseWriter.Write(b)
}

// AuthenticateSession refuses every session: these tests are about keys and tokens.
func (c *cache) AuthenticateSession(context.Context, string) (principal.Principal, error) {
	return principal.Principal{}, principal.ErrUnauthenticated
}
