// Package allow answers which methods a path has, from the generated route table, for the
// Allow header a 405 must carry (RFC 9110 15.5.6). grpc-gateway's mux knows that a path has
// other methods, but tells its routing error handler only the status.
package allow

import (
	"slices"
	"strings"

	openapigen "github.com/mnvhq/mnv/proto/gen/openapi"
)

// Methods lists the methods of each route pattern.
type Methods struct {
	routes []route
}

type route struct {
	method   string
	segments []string // literal segments; "" stands for a parameter ({name=*}: one segment)
	rest     bool     // the last parameter takes the rest of the path ({name=**})
}

// New reads the route table.
func New(routes []openapigen.Route) *Methods {
	m := &Methods{routes: make([]route, 0, len(routes))}
	for _, rt := range routes {
		r := route{method: rt.Method}
		for _, seg := range strings.Split(strings.TrimPrefix(rt.Pattern, "/"), "/") {
			if strings.HasPrefix(seg, "{") {
				r.rest = r.rest || strings.Contains(seg, "**")
				seg = ""
			}
			r.segments = append(r.segments, seg)
		}
		m.routes = append(m.routes, r)
	}
	return m
}

// Of returns the methods of the routes that match path, sorted; none for a path no route has.
func (m *Methods) Of(path string) []string {
	segments := strings.Split(strings.TrimPrefix(path, "/"), "/")
	var out []string
	for _, r := range m.routes {
		if r.matches(segments) && !slices.Contains(out, r.method) {
			out = append(out, r.method)
		}
	}
	slices.Sort(out)
	return out
}

func (r route) matches(segments []string) bool {
	if len(segments) != len(r.segments) && !(r.rest && len(segments) >= len(r.segments)) {
		return false
	}
	for i, want := range r.segments {
		if want != "" && segments[i] != want || want == "" && segments[i] == "" && !r.rest {
			return false
		}
	}
	return true
}
