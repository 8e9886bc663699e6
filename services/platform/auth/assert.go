package auth

import (
	"context"

	"google.golang.org/protobuf/proto"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/platform/identity"
	"github.com/mnvhq/mnv/services/platform/principalpb"
)

// MDPrincipal carries the principal the gateway resolved from the call's client credential
// (from its principal cache, kept in step with accounts like the services' own, or from
// accounts), so that the service behind it does not resolve the same credential again: a
// credential is authenticated once per request, at the edge. It is accounts' Principal message,
// in binary metadata.
//
// A service believes it only from the gateway (CallerGateway's token; the gateway forwards no
// client header of this name), only beside the credential it was resolved from, and only for
// that kind of credential: an API key's principal on an API-key method, an SDK token's on an
// SDK-token method. Anything else, a value it cannot read included (a gateway of another
// version), is ignored and the credential authenticated as if the gateway had said nothing. The
// method's rule (status, role, feature) applies to it as to any principal.
const MDPrincipal = "x-mnv-principal-bin"

// AssertPrincipal is the MDPrincipal value that asserts p.
func AssertPrincipal(p identity.Principal) (string, error) {
	b, err := proto.Marshal(principalpb.ToProto(p))
	return string(b), err
}

// asserted returns the principal the gateway asserted for a call to a method taking credential
// c, clientID being the X-CLIENT-ID the call sent ("" when none), and whether there is one to
// believe.
func asserted(ctx context.Context, caller string, c Credential, clientID string) (identity.Principal, bool) {
	if caller != CallerGateway {
		return identity.Principal{}, false
	}
	v, ok := single(ctx, MDPrincipal)
	if !ok {
		return identity.Principal{}, false
	}
	var m accountsv1.Principal
	if proto.Unmarshal([]byte(v), &m) != nil {
		return identity.Principal{}, false
	}
	p := principalpb.FromProto(&m)
	if p.ClientID == "" || clientID != "" && clientID != p.ClientID {
		return identity.Principal{}, false
	}
	switch c {
	case APIKey:
		return p, p.KeyID != "" && p.SDKTokenID == ""
	case SDKToken:
		return p, p.SDKTokenID != "" && p.KeyID == ""
	}
	return identity.Principal{}, false
}
