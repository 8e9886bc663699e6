// Package rpcrule reads the rule every RPC declares once, in its proto (the mnv.options.v1.rule
// method option): the credential it needs, its callers, role, product, whether Idempotency-Key
// applies, and how the HTTP edge answers it. The services' access policies (auth.PolicyOf), the
// idempotency interceptor's methods, the feature gate, the gateway's header rules and success
// messages and the OpenAPI document are all derived from it, so a new RPC costs one declaration.
package rpcrule

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	optionsv1 "github.com/mnvhq/mnv/proto/gen/mnv/options/v1"
)

// Method is one RPC with its rule.
type Method struct {
	// FullMethod is the name gRPC gives it: "/mnv.accounts.v1.AccountsService/GetClient".
	FullMethod string
	Desc       protoreflect.MethodDescriptor
	// Rule is nil when the RPC declares none.
	Rule *optionsv1.Rule
}

// FullMethod is gRPC's name of md.
func FullMethod(md protoreflect.MethodDescriptor) string {
	return "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
}

// Of returns the rule md declares, nil when it declares none.
func Of(md protoreflect.MethodDescriptor) *optionsv1.Rule {
	opts := md.Options()
	if opts == nil || !proto.HasExtension(opts, optionsv1.E_Rule) {
		return nil
	}
	r, _ := proto.GetExtension(opts, optionsv1.E_Rule).(*optionsv1.Rule)
	return r
}

// Services returns the methods of the services a gRPC server registers, with their rules. The
// descriptors are found by name among the registered proto files, so the generated package of
// each service must be linked in (it is, by whoever registers it).
func Services(descs ...*grpc.ServiceDesc) ([]Method, error) {
	var (
		out  []Method
		errs []error
	)
	for _, d := range descs {
		found, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(d.ServiceName))
		if err != nil {
			errs = append(errs, fmt.Errorf("service %s: %w", d.ServiceName, err))
			continue
		}
		sd, ok := found.(protoreflect.ServiceDescriptor)
		if !ok {
			errs = append(errs, fmt.Errorf("%s is not a service", d.ServiceName))
			continue
		}
		out = append(out, MethodsOf(sd)...)
	}
	return out, errors.Join(errs...)
}

// MustServices is Services for the fixed service lists of the servers, where a service that
// cannot be found is a build mistake.
func MustServices(descs ...*grpc.ServiceDesc) []Method {
	m, err := Services(descs...)
	if err != nil {
		panic("rpcrule: " + err.Error())
	}
	return m
}

// MethodsOf returns the methods of sd with their rules.
func MethodsOf(sd protoreflect.ServiceDescriptor) []Method {
	ms := sd.Methods()
	out := make([]Method, 0, ms.Len())
	for i := range ms.Len() {
		md := ms.Get(i)
		out = append(out, Method{FullMethod: FullMethod(md), Desc: md, Rule: Of(md)})
	}
	return out
}

// Lookup returns the rule of a full method name ("/pkg.Service/Method") among the registered
// proto files.
func Lookup(fullMethod string) (*optionsv1.Rule, bool) {
	svc, name, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !ok {
		return nil, false
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc + "." + name))
	if err != nil {
		return nil, false
	}
	md, ok := d.(protoreflect.MethodDescriptor)
	if !ok {
		return nil, false
	}
	r := Of(md)
	return r, r != nil
}

// Idempotent returns the full names of the methods that honour the Idempotency-Key header.
func Idempotent(methods []Method) []string {
	var out []string
	for _, m := range methods {
		if m.Rule.GetIdempotent() {
			out = append(out, m.FullMethod)
		}
	}
	return out
}

// FeatureName is the name a client's feature list uses for f: "CONNECT".
func FeatureName(f optionsv1.Feature) string {
	if f == optionsv1.Feature_FEATURE_UNSPECIFIED {
		return ""
	}
	return strings.TrimPrefix(f.String(), "FEATURE_")
}

// CallerName is the name MNV_INTERNAL_CALLERS uses for c: "gateway".
func CallerName(c optionsv1.Caller) string {
	return strings.ToLower(strings.TrimPrefix(c.String(), "CALLER_"))
}

// SuccessStatus is the HTTP status of a success of r: 200 unless it says otherwise.
func SuccessStatus(r *optionsv1.Rule) int {
	if s := r.GetHttpStatus(); s != 0 {
		return int(s)
	}
	return http.StatusOK
}

// clientCredential reports whether c names a client (and so yields a principal).
func clientCredential(c optionsv1.Credential) bool { return KindOf(c).Client() }

// Check reports what is missing or contradictory in the rule of m. It knows nothing of HTTP
// routes (the OpenAPI generator checks those against proto/gateway.yaml).
func Check(m Method) error {
	r := m.Rule
	if r == nil {
		return fmt.Errorf("%s: declares no rule (option (mnv.options.v1.rule))", m.FullMethod)
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{m.FullMethod}, args...)...))
	}
	c := r.GetCredential()
	switch c {
	case optionsv1.Credential_CREDENTIAL_UNSPECIFIED:
		bad("the rule names no credential")
	case optionsv1.Credential_CREDENTIAL_INTERNAL:
		if len(r.GetCallers()) == 0 {
			bad("a CREDENTIAL_INTERNAL rule must name its callers")
		}
	default:
		if len(r.GetCallers()) > 0 {
			bad("callers are for CREDENTIAL_INTERNAL rules only")
		}
	}
	for _, caller := range r.GetCallers() {
		if caller == optionsv1.Caller_CALLER_UNSPECIFIED {
			bad("CALLER_UNSPECIFIED is no caller")
		}
	}
	if r.GetAdminRole() && c != optionsv1.Credential_CREDENTIAL_API_KEY && c != optionsv1.Credential_CREDENTIAL_SESSION {
		bad("admin_role needs CREDENTIAL_API_KEY or CREDENTIAL_SESSION: only API keys and people have roles")
	}
	if r.GetSession() && c != optionsv1.Credential_CREDENTIAL_API_KEY {
		// A session stands in for an ADMIN or MEMBER key; an SDK token's routes are an app's.
		bad("session (the console may call it too) goes with CREDENTIAL_API_KEY")
	}
	if r.GetStepUp() && c != optionsv1.Credential_CREDENTIAL_SESSION && !r.GetSession() {
		bad("step_up needs a session: CREDENTIAL_SESSION, or session: true")
	}
	if !clientCredential(c) {
		if r.GetAllowSuspended() {
			bad("allow_suspended needs a client credential")
		}
		if r.GetFeature() != optionsv1.Feature_FEATURE_UNSPECIFIED {
			bad("feature needs a client credential")
		}
	}
	if r.GetIdempotent() && c != optionsv1.Credential_CREDENTIAL_NONE && !clientCredential(c) {
		// Keys are scoped to a client's credential, or for the bootstrap to the client it names.
		bad("idempotent needs a client credential or CREDENTIAL_NONE")
	}
	switch r.GetClientId() {
	case optionsv1.ClientIdHeader_CLIENT_ID_HEADER_UNSPECIFIED:
	case optionsv1.ClientIdHeader_CLIENT_ID_HEADER_OPTIONAL, optionsv1.ClientIdHeader_CLIENT_ID_HEADER_OPTIONAL_UNDER_ME:
		if c != optionsv1.Credential_CREDENTIAL_API_KEY {
			bad("X-CLIENT-ID can be optional with an API key only (the key names the client)")
		}
	case optionsv1.ClientIdHeader_CLIENT_ID_HEADER_REQUIRED:
		if !clientCredential(c) && c != optionsv1.Credential_CREDENTIAL_NONE {
			bad("X-CLIENT-ID cannot be required with %s", c)
		}
	case optionsv1.ClientIdHeader_CLIENT_ID_HEADER_DROPPED:
		if clientCredential(c) && c != optionsv1.Credential_CREDENTIAL_SESSION {
			bad("X-CLIENT-ID cannot be dropped with %s, which needs it", c)
		}
	}
	if s := r.GetHttpStatus(); s != 0 && (s < 200 || s > 299) {
		bad("http_status %d is not a success", s)
	}
	if gr := r.GetGatewayRoute(); gr != nil {
		if gr.GetMethod() == "" || !strings.HasPrefix(gr.GetPath(), "/v1/api/") {
			bad("gateway_route needs a method and a path under /v1/api/")
		}
		if (gr.GetFilePart() != "") != slices.Contains(gr.GetRequestMediaTypes(), "multipart/form-data") {
			bad("gateway_route: file_part goes with a multipart/form-data body")
		}
		if gr.GetResponseBody() == "" {
			bad("gateway_route names no response_body")
		} else if m.Desc != nil && m.Desc.Output().Fields().ByName(protoreflect.Name(gr.GetResponseBody())) == nil {
			bad("gateway_route: %s has no field %q", m.Desc.Output().FullName(), gr.GetResponseBody())
		}
	}
	if s := r.GetHttpStatus(); s != 0 && s != http.StatusOK && r.GetGatewayRoute() == nil {
		// grpc-gateway's generated handlers answer 200; only the gateway's own handlers set
		// another status.
		bad("http_status %d needs a gateway_route", s)
	}
	return errors.Join(errs...)
}

// CheckAll checks every method's rule.
func CheckAll(methods []Method) error {
	var errs []error
	for _, m := range methods {
		errs = append(errs, Check(m))
	}
	return errors.Join(errs...)
}
