package auth

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/rpcrule"
)

// PolicyOf is the policy the methods declare (rpcrule). A method that declares no rule gets an
// empty one, which Validate reports, so a server with such a method does not start.
func PolicyOf(methods []rpcrule.Method) Policy {
	p := make(Policy, len(methods))
	for _, m := range methods {
		r := m.Rule
		if r == nil {
			p[m.FullMethod] = Rule{}
			continue
		}
		rule := Rule{
			Credential:     rpcrule.KindOf(r.GetCredential()),
			AdminRole:      r.GetAdminRole(),
			AllowSuspended: r.GetAllowSuspended(),
			Feature:        rpcrule.FeatureName(r.GetFeature()),
			Session:        r.GetSession(),
			StepUp:         r.GetStepUp(),
		}
		for _, c := range r.GetCallers() {
			rule.Callers = append(rule.Callers, rpcrule.CallerName(c))
		}
		p[m.FullMethod] = rule
	}
	return p
}

// featureNames are how a refusal names each product.
var featureNames = map[string]string{
	"VERIFY":       "verification",
	"CONNECT":      "Connect",
	"STUCK_PLUS":   "STUCK_PLUS",
	"NUMBER_SHARE": "NUMBER_SHARE",
}

// checkFeature refuses a call to a method whose rule requires a product the client lacks.
func (g *Guard) checkFeature(ctx context.Context, method string) error {
	f := g.policy[method].Feature
	if f == "" {
		return nil
	}
	if p, _ := principal.FromContext(ctx); p.Has(f) {
		return nil
	}
	name := featureNames[f]
	if name == "" {
		name = f
	}
	return apierr.Field(codes.InvalidArgument, fault.FeatureNotEnabled, "", name+" is not enabled for this account")
}

// FeatureUnaryInterceptor enforces the products the rules require (Rule.Feature). It runs last,
// just before the handler (grpcserver puts it there), where the handlers used to check.
func (g *Guard) FeatureUnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := g.checkFeature(ctx, info.FullMethod); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// FeatureStreamInterceptor is FeatureUnaryInterceptor for streams.
func (g *Guard) FeatureStreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := g.checkFeature(ss.Context(), info.FullMethod); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}
