package auth

import (
	"context"

	"google.golang.org/protobuf/proto"

	principalv1 "github.com/mnvhq/mnv/proto/gen/mnv/principal/v1"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// MDPrincipal carries the principal the gateway resolved from the call's client credential
// (from its principal cache, kept in step with accounts like the services' own, or from
// accounts), so that the service behind it does not resolve the same credential again: a
// credential is authenticated once per request, at the edge. It is the shared Principal message
// (mnv.principal.v1), in binary metadata.
//
// A service believes it only from the gateway (CallerGateway's token; the gateway forwards no
// client header of this name), only beside a credential of the method's kind (whose shape the
// gateway checked, so the service does not parse it again), only for the X-CLIENT-ID sent, and
// only for that kind of credential: an API key's principal on an API-key method, an SDK token's
// on an SDK-token method. Anything else, a value it cannot read included (a gateway of another
// version), is ignored and the credential authenticated as if the gateway had said nothing. The
// method's rule (status, role, feature) applies to it as to any principal.
const MDPrincipal = "x-mnv-principal-bin"

// AssertPrincipal is the MDPrincipal value that asserts p.
func AssertPrincipal(p principal.Principal) (string, error) {
	b, err := proto.Marshal(PrincipalToProto(p))
	return string(b), err
}

// asserted returns the principal the gateway asserted for a call to a method taking credential
// kind k, clientID being the X-CLIENT-ID the call sent ("" when none), and whether there is one to
// believe.
func asserted(ctx context.Context, caller string, k principal.Kind, clientID string) (principal.Principal, bool) {
	if caller != CallerGateway {
		return principal.Principal{}, false
	}
	v, ok := single(ctx, MDPrincipal)
	if !ok {
		return principal.Principal{}, false
	}
	var m principalv1.Principal
	if proto.Unmarshal([]byte(v), &m) != nil {
		return principal.Principal{}, false
	}
	p := PrincipalFromProto(&m)
	if p.ClientID == "" || clientID != "" && clientID != p.ClientID {
		return principal.Principal{}, false
	}
	return p, p.Kind() == k
}
