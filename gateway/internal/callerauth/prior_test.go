package callerauth_test

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/metadata"

	"github.com/mnvhq/mnv/gateway/internal/callerauth"
	"github.com/mnvhq/mnv/gateway/internal/middleware"
	openapigen "github.com/mnvhq/mnv/proto/gen/openapi"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// TestPriorSession: a request that opens a session (the console's routes that take none) passes
// the one well-formed session cookie it carries on as x-mnv-session-prior, for accounts to end;
// nothing else is passed, and other routes pass none.
func TestPriorSession(t *testing.T) {
	session := crypto.NewToken(principal.SessionPrefix)
	other := crypto.NewToken(principal.SessionPrefix)
	tests := []struct {
		name, method, path string
		cookies            []string
		want               []string
	}{
		{"a sign-in with the browser's session", "POST", "/v1/api/console/sign-in", []string{session}, []string{session}},
		{"an invitation accepted while signed in", "POST", "/v1/api/console/invitations/accept", []string{session}, []string{session}},
		{"a sign-in with none", "POST", "/v1/api/console/sign-in", nil, nil},
		{"a cookie that is no session's", "POST", "/v1/api/console/sign-in", []string{"mnv_" + session}, nil},
		{"two cookies: neither", "POST", "/v1/api/console/sign-in", []string{session, other}, nil},
		{"a route of the API", "POST", "/v1/api/me/api-key/generate", []string{session}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edge, err := callerauth.New(&cache{}, openapigen.Routes)
			if err != nil {
				t.Fatal(err)
			}
			mux := runtime.NewServeMux(
				runtime.WithMiddlewares(middleware.RouteMiddleware(), edge.Middleware()),
				runtime.WithMetadata(callerauth.Metadata),
			)
			var md metadata.MD
			reached := false
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
				}); err != nil {
					t.Fatal(err)
				}
			}
			req := httptest.NewRequest(tt.method, tt.path, nil)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			req.Header.Set("X-Client-Id", "7d444840-9dc0-11d1-b245-5ffdce74fad2")
			for _, c := range tt.cookies {
				req.AddCookie(&http.Cookie{Name: principal.SessionCookie, Value: c})
			}
			mux.ServeHTTP(httptest.NewRecorder(), req)
			if !reached {
				t.Fatal("the route was not reached")
			}
			if got := md.Get("x-mnv-session-prior"); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("x-mnv-session-prior %q, want %q", got, tt.want)
			}
			if got := md.Get(principal.Session.MD()); len(got) > 0 {
				t.Errorf("the session went on as a credential: %q", got)
			}
		})
	}
}
