package dispatch_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"

	"github.com/mnvhq/mnv/gateway/internal/dispatch"
	openapigen "github.com/mnvhq/mnv/proto/gen/openapi"
)

// named answers with its name, so a test sees which handler served.
func named(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(name)) })
}

func served(t *testing.T, h http.Handler, method, path string) string {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w.Body.String()
}

var services = map[string]http.Handler{
	"mnv.accounts.v1.AccountsService":         named("accounts"),
	"mnv.accounts.v1.PeopleService":           named("accounts"),
	"mnv.verification.v1.VerificationService": named("verification"),
	"mnv.connect.v1.ConnectService":           named("connect"),
	"mnv.connect.v1.WebhookService":           named("connect"),
}

func TestPattern(t *testing.T) {
	tests := []struct {
		gateway, want string
		ok            bool
	}{
		{"/v1/api/clients", "/v1/api/clients", true},
		{"/v1/api/me/api-keys/{key_id=*}", "/v1/api/me/api-keys/{key_id}", true},
		{"/v1/api/me/connect/profiles/{profile_id=*}/enrich", "/v1/api/me/connect/profiles/{profile_id}/enrich", true},
		{"/v1/api/me/connect/import/sample.csv", "/v1/api/me/connect/import/sample.csv", true},
		{"/v1/api/files/{path=**}", "/v1/api/files/{path...}", true},
		{"/v1/api/files/{path=**}/meta", "", false},   // the rest of the path, not last
		{"/v1/api/keys/{key_id=*}:rotate", "", false}, // a verb
		{"/v1/api/items/{name=shelves/*}", "", false}, // a parameter over two segments
		{"/v1/api/items/x{id=*}", "", false},          // a parameter within a segment
		{"/v1/api/items/{id}", "", false},             // not grpc-gateway's form
		{"v1/api/clients", "", false},                 // not absolute
		{"/v1/api/items/{=*}", "", false},             // no name
	}
	for _, tt := range tests {
		got, ok := dispatch.Pattern(tt.gateway)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Pattern(%q) = %q, %v; want %q, %v", tt.gateway, got, ok, tt.want, tt.ok)
		}
	}
}

// TestNew dispatches requests of a small table: a route goes to its service, anything else to
// the fallback, which must still answer the 404s and 405s.
func TestNew(t *testing.T) {
	routes := []openapigen.Route{
		{Method: "GET", Pattern: "/v1/api/clients", RPC: "/mnv.accounts.v1.AccountsService/GetClient"},
		{Method: "DELETE", Pattern: "/v1/api/me/api-keys/{key_id=*}", RPC: "/mnv.accounts.v1.AccountsService/RevokeApiKey"},
		{Method: "GET", Pattern: "/v1/api/me/connect/profiles/{profile_id=*}", RPC: "/mnv.connect.v1.ConnectService/GetProfile"},
		{Method: "GET", Pattern: "/v1/api/me/connect/import/sample.csv", RPC: "/mnv.connect.v1.ConnectService/GetImportSample"},
		{Method: "GET", Pattern: "/v1/api/me/connect/import/jobs/{job_id=*}", RPC: "/mnv.connect.v1.ConnectService/GetImportJob"},
		{Method: "POST", Pattern: "/v1/api/verify", RPC: "/mnv.verification.v1.VerificationService/Verify"},
		{Method: "POST", Pattern: "/v1/api/keys/{key_id=*}:rotate", RPC: "/mnv.accounts.v1.AccountsService/RotateApiKey"},
	}
	h, err := dispatch.New(routes, services, named("fallback"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		method, path, want string
	}{
		{"GET", "/v1/api/clients", "accounts"},
		{"HEAD", "/v1/api/clients", "accounts"}, // its mux answers HEAD as one of every service would
		{"DELETE", "/v1/api/me/api-keys/k1", "accounts"},
		{"GET", "/v1/api/me/connect/profiles/p1", "connect"},
		{"GET", "/v1/api/me/connect/import/sample.csv", "connect"},
		{"GET", "/v1/api/me/connect/import/jobs/j1", "connect"},
		{"POST", "/v1/api/verify", "verification"},
		{"PUT", "/v1/api/clients", "fallback"},         // a 405 of the fallback
		{"GET", "/v1/api/verify", "fallback"},          // a 405 of the fallback
		{"GET", "/v1/api/clients/", "fallback"},        // a 404 of the fallback
		{"GET", "/v1/api/nothing", "fallback"},         // a 404 of the fallback
		{"DELETE", "/v1/api/me/api-keys/", "fallback"}, // an empty parameter
		{"POST", "/v1/api/keys/k1:rotate", "fallback"}, // a pattern net/http cannot express
		{"GET", "/v1/api/me%2Fconnect%2Foverview", "fallback"},
	}
	for _, tt := range tests {
		if got := served(t, h, tt.method, tt.path); got != tt.want {
			t.Errorf("%s %s served by %q, want %q", tt.method, tt.path, got, tt.want)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name   string
		routes []openapigen.Route
	}{
		{"a service without a mux", []openapigen.Route{{Method: "GET", Pattern: "/v1/api/x", RPC: "/mnv.other.v1.OtherService/Get"}}},
		{"an RPC without a service", []openapigen.Route{{Method: "GET", Pattern: "/v1/api/x", RPC: "Get"}}},
		{"patterns net/http cannot tell apart", []openapigen.Route{
			{Method: "GET", Pattern: "/v1/api/a/{x=*}/b", RPC: "/mnv.accounts.v1.AccountsService/A"},
			{Method: "GET", Pattern: "/v1/api/a/c/{y=*}", RPC: "/mnv.accounts.v1.AccountsService/B"},
		}},
	}
	for _, tt := range tests {
		if _, err := dispatch.New(tt.routes, services, named("fallback")); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
}

// TestGeneratedRoutes dispatches every route of the generated table, with its parameters
// filled, to its own service.
func TestGeneratedRoutes(t *testing.T) {
	h, err := dispatch.New(openapigen.Routes, services, named("fallback"))
	if err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`\{[a-z_]+=\*\}`)
	for _, r := range openapigen.Routes {
		service := strings.Split(r.RPC, "/")[1]
		want := served(t, services[service], r.Method, "/")
		path := param.ReplaceAllString(r.Pattern, "x1")
		if got := served(t, h, r.Method, path); got != want {
			t.Errorf("%s %s served by %q, want %q", r.Method, path, got, want)
		}
	}
}

// BenchmarkRouting serves routes of the generated table with handlers that do nothing, through
// one grpc-gateway mux of every service (registered in the gateway's order: accounts,
// verification, connect) against dispatch to a mux per service: the cost of finding a route.
func BenchmarkRouting(b *testing.B) {
	order := []string{"mnv.accounts.v1.AccountsService", "mnv.verification.v1.VerificationService",
		"mnv.connect.v1.ConnectService", "mnv.connect.v1.WebhookService"}
	noop := func(http.ResponseWriter, *http.Request, map[string]string) {}
	register := func(b *testing.B, mux *runtime.ServeMux, service string) {
		for _, r := range openapigen.Routes {
			if strings.Split(r.RPC, "/")[1] == service {
				if err := mux.HandlePath(r.Method, r.Pattern, noop); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	one := runtime.NewServeMux()
	perService := map[string]http.Handler{}
	connect := runtime.NewServeMux()
	for _, s := range order {
		register(b, one, s)
		m := connect
		if !strings.HasPrefix(s, "mnv.connect.") {
			m = runtime.NewServeMux()
		}
		register(b, m, s)
		perService[s] = m
	}
	dispatched, err := dispatch.New(openapigen.Routes, perService, one)
	if err != nil {
		b.Fatal(err)
	}
	for _, rt := range []struct{ method, path string }{
		{"GET", "/v1/api/clients"},
		{"POST", "/v1/api/verify"},
		{"GET", "/v1/api/me/connect/profiles/x1"},
	} {
		for _, h := range []struct {
			name string
			h    http.Handler
		}{{"one mux", one}, {"dispatch", dispatched}} {
			b.Run(rt.method+" "+rt.path+"/"+h.name, func(b *testing.B) {
				req := httptest.NewRequest(rt.method, rt.path, nil)
				w := httptest.NewRecorder()
				b.ReportAllocs()
				for b.Loop() {
					h.h.ServeHTTP(w, req)
				}
			})
		}
	}
}
