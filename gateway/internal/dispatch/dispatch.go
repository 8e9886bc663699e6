// Package dispatch hands each /v1/api request to the mux of the service its route belongs to.
//
// grpc-gateway's mux tries the route patterns of a method one after another, and every pattern
// that does not match costs a match, an errors.As and allocations. With the four services on one
// mux, that was 8% of the gateway's CPU and about 70 allocations of a GET /v1/api/clients
// (issue 15). A net/http.ServeMux built from the generated route table finds the route's service
// in one lookup of its routing tree; that service's own mux then tries its own patterns only.
package dispatch

import (
	"fmt"
	"net/http"
	"strings"

	openapigen "github.com/mnvhq/mnv/proto/gen/openapi"
)

// New returns the handler that serves each route of routes with the handler of its service
// (services, by the RPC's service: "mnv.accounts.v1.AccountsService"), and every other request
// (a method or a path no route has, or a route whose pattern net/http cannot express) with
// fallback, a mux of every service, which answers it as before. A route of a service without a
// handler is an error: a service added to the table must be given its mux.
func New(routes []openapigen.Route, services map[string]http.Handler, fallback http.Handler) (http.Handler, error) {
	mux := http.NewServeMux()
	for _, r := range routes {
		service, _, ok := strings.Cut(strings.TrimPrefix(r.RPC, "/"), "/")
		h := services[service]
		if !ok || h == nil {
			return nil, fmt.Errorf("dispatch: no mux for %s %s (RPC %s)", r.Method, r.Pattern, r.RPC)
		}
		path, ok := Pattern(r.Pattern)
		if !ok {
			continue
		}
		if err := handle(mux, r.Method+" "+path, h); err != nil {
			return nil, fmt.Errorf("dispatch: %s %s: %w", r.Method, r.Pattern, err)
		}
	}
	if err := handle(mux, "/", fallback); err != nil {
		return nil, fmt.Errorf("dispatch: fallback: %w", err)
	}
	return mux, nil
}

// handle registers h on mux, with net/http's panic on a conflicting pattern as an error.
func handle(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	mux.Handle(pattern, h)
	return nil
}

// Pattern is a grpc-gateway route pattern as a net/http one: a parameter of one segment
// ({key_id=*}) becomes {key_id}, one of the rest of the path ({name=**}, last) {name...}. A
// pattern with any other shape (a verb, a parameter over several segments or within a segment)
// has no net/http form: ok is false.
func Pattern(gateway string) (path string, ok bool) {
	if !strings.HasPrefix(gateway, "/") || strings.Contains(gateway, ":") {
		return "", false
	}
	segments := strings.Split(gateway[1:], "/")
	for i, s := range segments {
		if !strings.ContainsAny(s, "{}=*") {
			continue
		}
		name, template, found := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}"), "=")
		switch {
		case !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") || !found || name == "" || strings.ContainsAny(name, "{}=*"):
			return "", false
		case template == "*":
			segments[i] = "{" + name + "}"
		case template == "**" && i == len(segments)-1:
			segments[i] = "{" + name + "...}"
		default:
			return "", false
		}
	}
	return "/" + strings.Join(segments, "/"), true
}
