package allow_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/gateway/internal/allow"
	openapigen "github.com/mnvhq/mnv/proto/gen/openapi"
)

func TestOf(t *testing.T) {
	m := allow.New([]openapigen.Route{
		{Method: "GET", Pattern: "/v1/api/me/api-keys"},
		{Method: "POST", Pattern: "/v1/api/me/api-keys"},
		{Method: "DELETE", Pattern: "/v1/api/me/api-keys/{key_id=*}"},
		{Method: "GET", Pattern: "/v1/api/me/connect/profiles/{profile_id=*}"},
		{Method: "PATCH", Pattern: "/v1/api/me/connect/profiles/{profile_id=*}"},
		{Method: "POST", Pattern: "/v1/api/me/connect/profiles/{profile_id=*}/enrich"},
		{Method: "GET", Pattern: "/v1/api/files/{name=**}"},
	})
	tests := []struct {
		path string
		want []string
	}{
		{"/v1/api/me/api-keys", []string{"GET", "POST"}},
		{"/v1/api/me/api-keys/8b6d0130", []string{"DELETE"}},
		{"/v1/api/me/api-keys/", nil},
		{"/v1/api/me/connect/profiles/p1", []string{"GET", "PATCH"}},
		{"/v1/api/me/connect/profiles/p1/enrich", []string{"POST"}},
		{"/v1/api/me/connect/profiles/p1/other", nil},
		{"/v1/api/files/a/b/c", []string{"GET"}},
		{"/v1/api/nothing", nil},
	}
	for _, tt := range tests {
		if got := m.Of(tt.path); !slices.Equal(got, tt.want) {
			t.Errorf("Of(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

// TestEveryRouteHasItsMethod: each route of the generated table is found at its own path.
func TestEveryRouteHasItsMethod(t *testing.T) {
	m := allow.New(openapigen.Routes)
	for _, rt := range openapigen.Routes {
		path := rt.Pattern
		for {
			i, j := strings.IndexByte(path, '{'), strings.IndexByte(path, '}')
			if i < 0 || j < i {
				break
			}
			path = path[:i] + "p1" + path[j+1:]
		}
		if got := m.Of(path); !slices.Contains(got, rt.Method) {
			t.Errorf("%s %s: Of(%q) = %q", rt.Method, rt.Pattern, path, got)
		}
	}
}
