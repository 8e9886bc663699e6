package openapi

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protoreflect"
	"gopkg.in/yaml.v3"

	optionsv1 "github.com/mnvhq/mnv/proto/gen/mnv/options/v1"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/rpcrule"
)

// route is one HTTP route of the API and the RPC it calls.
type route struct {
	method string // GET, POST...
	// path is the template as gateway.yaml writes it, parameters by proto name: /x/{key_id}.
	path string
	// body and responseBody are the HTTP rule's: "*", a field name, or "".
	body, responseBody string
	rpc                *protogen.Method
	rule               *optionsv1.Rule
	// own is the rule's gateway_route when the gateway serves the route with its own handler.
	own *optionsv1.GatewayRoute
	// binding counts the routes of one RPC (1 for its first), for unique operation ids.
	binding int
}

// operationID is the route's id: the RPC's name, or for an RPC with several routes the one its
// rule gives that route (operation_ids, in gateway.yaml's order). Document calls it once per
// route and refuses a duplicate.
func (r route) operationID() string {
	if ids := r.rule.GetOperationIds(); len(ids) >= r.binding {
		return ids[r.binding-1]
	}
	return string(r.rpc.Desc.Name())
}

// pattern is the path as grpc-gateway's Pattern.String writes it, the form the gateway's mux
// hands its middlewares: /x/{key_id=*}.
func (r route) pattern() string {
	var b strings.Builder
	for _, seg := range strings.Split(r.path, "/") {
		if b.Len() > 0 || seg != "" {
			b.WriteByte('/')
		}
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") && !strings.Contains(seg, "=") {
			seg = strings.TrimSuffix(seg, "}") + "=*}"
		}
		b.WriteString(seg)
	}
	return b.String()
}

// pathParams are the proto names of the path's parameters, in order.
func (r route) pathParams() []string {
	var out []string
	for _, seg := range strings.Split(r.path, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			name, _, _ = strings.Cut(strings.TrimSuffix(name, "}"), "=")
			out = append(out, name)
		}
	}
	return out
}

// httpRule is one rule of gateway.yaml (google.api.HttpRule, the parts we use).
type httpRule struct {
	Selector           string     `yaml:"selector"`
	Get                string     `yaml:"get"`
	Put                string     `yaml:"put"`
	Post               string     `yaml:"post"`
	Delete             string     `yaml:"delete"`
	Patch              string     `yaml:"patch"`
	Body               string     `yaml:"body"`
	ResponseBody       string     `yaml:"response_body"`
	AdditionalBindings []httpRule `yaml:"additional_bindings"`
}

func (h httpRule) methodAndPath() (string, string, error) {
	var found [][2]string
	for _, mp := range [][2]string{{"GET", h.Get}, {"PUT", h.Put}, {"POST", h.Post}, {"DELETE", h.Delete}, {"PATCH", h.Patch}} {
		if mp[1] != "" {
			found = append(found, mp)
		}
	}
	if len(found) != 1 {
		return "", "", fmt.Errorf("rule of %s: want exactly one of get, put, post, delete, patch", h.Selector)
	}
	return found[0][0], found[0][1], nil
}

// readHTTPRules reads the http.rules of a grpc_api_configuration file (google.api.Service).
func readHTTPRules(path string) ([]httpRule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var svc struct {
		Type          string `yaml:"type"`
		ConfigVersion int    `yaml:"config_version"`
		HTTP          struct {
			Rules []httpRule `yaml:"rules"`
		} `yaml:"http"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&svc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if svc.Type != "google.api.Service" {
		return nil, fmt.Errorf("%s: not a google.api.Service", path)
	}
	return svc.HTTP.Rules, nil
}

// collectRoutes pairs every HTTP rule and every gateway_route with its RPC, and checks what
// only the routes can tell: a route's RPC must exist and declare a rule fit for a public route.
func collectRoutes(methods map[string]*protogen.Method, rules []httpRule) ([]route, error) {
	var (
		routes []route
		errs   []error
		count  = map[*protogen.Method]int{}
	)
	add := func(rpc *protogen.Method, r route) {
		count[rpc]++
		r.rpc, r.rule, r.binding = rpc, rpcrule.Of(rpc.Desc), count[rpc]
		routes = append(routes, r)
	}
	for _, h := range rules {
		rpc := methods[h.Selector]
		if rpc == nil {
			errs = append(errs, fmt.Errorf("gateway.yaml: no RPC %s", h.Selector))
			continue
		}
		for _, b := range append([]httpRule{h}, h.AdditionalBindings...) {
			method, path, err := b.methodAndPath()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			add(rpc, route{method: method, path: path, body: b.Body, responseBody: h.ResponseBody})
		}
	}
	names := make([]string, 0, len(methods))
	for name := range methods {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		rpc := methods[name]
		if own := rpcrule.Of(rpc.Desc).GetGatewayRoute(); own != nil {
			add(rpc, route{method: own.GetMethod(), path: own.GetPath(), responseBody: own.GetResponseBody(), own: own})
		}
	}
	seen := map[string]bool{}
	for _, r := range routes {
		key := r.method + " " + r.pattern()
		if seen[key] {
			errs = append(errs, fmt.Errorf("%s is bound twice", key))
		}
		seen[key] = true
		errs = append(errs, checkRoute(r))
	}
	slices.SortFunc(routes, func(a, b route) int {
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		return strings.Compare(a.method, b.method)
	})
	return routes, errors.Join(errs...)
}

// checkRoute holds a route's RPC to what the HTTP edge can serve.
func checkRoute(r route) error {
	name := r.method + " " + r.path + " (" + string(r.rpc.Desc.FullName()) + ")"
	if err := rpcrule.Check(rpcrule.Method{FullMethod: rpcrule.FullMethod(r.rpc.Desc), Desc: r.rpc.Desc, Rule: r.rule}); err != nil {
		return err
	}
	var errs []error
	switch c := r.rule.GetCredential(); c {
	case optionsv1.Credential_CREDENTIAL_ADMIN:
		errs = append(errs, fmt.Errorf("%s: the operator's credential has no HTTP route", name))
	case optionsv1.Credential_CREDENTIAL_INTERNAL:
		if !slices.Contains(r.rule.GetCallers(), optionsv1.Caller_CALLER_GATEWAY) {
			errs = append(errs, fmt.Errorf("%s: an internal RPC with a route must admit the gateway, which calls it", name))
		}
	}
	if r.rule.GetSummary() == "" || !knownTag(r.rule.GetTag()) {
		errs = append(errs, fmt.Errorf("%s: a route's RPC needs a summary and one of the document's tags, not %q", name, r.rule.GetTag()))
	}
	if ids := r.rule.GetOperationIds(); len(ids) > 0 && len(ids) < r.binding {
		errs = append(errs, fmt.Errorf("%s: operation_ids names %d routes; the RPC has more", name, len(ids)))
	}
	if r.own == nil && r.rule.GetSuccessMessage() == "" {
		errs = append(errs, fmt.Errorf("%s: a route's RPC needs a success_message", name))
	}
	if r.own != nil && r.own.GetResponseMediaType() == "" && r.rule.GetSuccessMessage() == "" {
		errs = append(errs, fmt.Errorf("%s: a JSON answer needs a success_message", name))
	}
	edge := rpcrule.EdgeOf(r.rule, r.path)
	if strings.HasPrefix(r.path, rpcrule.MePrefix) && edge.Credential == principal.APIKey && edge.ClientID != rpcrule.ClientIDOptional {
		errs = append(errs, fmt.Errorf("%s: under %s the API key alone suffices (docs/api-decisions.md#credentials): X-CLIENT-ID must be optional", name, rpcrule.MePrefix))
	}
	if r.rule.GetIdempotent() && r.method != "POST" {
		errs = append(errs, fmt.Errorf("%s: Idempotency-Key is for POST routes", name))
	}
	if r.body != "" && r.body != "*" && r.rpc.Input.Desc.Fields().ByName(protoreflect.Name(r.body)) == nil {
		errs = append(errs, fmt.Errorf("%s: no body field %q", name, r.body))
	}
	if r.responseBody != "" && r.rpc.Output.Desc.Fields().ByName(protoreflect.Name(r.responseBody)) == nil {
		errs = append(errs, fmt.Errorf("%s: no response_body field %q", name, r.responseBody))
	}
	for _, p := range r.pathParams() {
		if r.rpc.Input.Desc.Fields().ByName(protoreflect.Name(p)) == nil {
			errs = append(errs, fmt.Errorf("%s: no field for the path parameter %q", name, p))
		}
	}
	return errors.Join(errs...)
}
