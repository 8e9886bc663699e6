// Package principalpb is a principal (platform/identity) as accounts' API carries it
// (accountsv1.Principal): accounts answers its authentications with it, the other services read
// it back, and the gateway passes the principal it resolved to the services in it (auth's
// asserted principal). One home for the conversion, so that what one side writes the other reads.
package principalpb

import (
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/platform/identity"
)

// Enum values in the protos carry their type's prefix (ROLE_ADMIN); identity uses the bare names
// the API shows (ADMIN).

// Role is r on the wire.
func Role(r identity.Role) accountsv1.Role {
	return accountsv1.Role(accountsv1.Role_value["ROLE_"+string(r)])
}

// RoleOf is r read back; "" for UNSPECIFIED.
func RoleOf(r accountsv1.Role) identity.Role {
	if r == accountsv1.Role_ROLE_UNSPECIFIED {
		return ""
	}
	return identity.Role(strings.TrimPrefix(r.String(), "ROLE_"))
}

// Status is s on the wire.
func Status(s identity.Status) accountsv1.ClientStatus {
	return accountsv1.ClientStatus(accountsv1.ClientStatus_value["CLIENT_STATUS_"+string(s)])
}

// StatusOf is s read back; "" for UNSPECIFIED.
func StatusOf(s accountsv1.ClientStatus) identity.Status {
	if s == accountsv1.ClientStatus_CLIENT_STATUS_UNSPECIFIED {
		return ""
	}
	return identity.Status(strings.TrimPrefix(s.String(), "CLIENT_STATUS_"))
}

// Features are f on the wire.
func Features(f []string) []accountsv1.Feature {
	out := make([]accountsv1.Feature, 0, len(f))
	for _, v := range f {
		out = append(out, accountsv1.Feature(accountsv1.Feature_value["FEATURE_"+v]))
	}
	return out
}

// FeaturesOf are f read back. UNSPECIFIED (or a number this version does not know) becomes a
// name no feature has, so it enables nothing and an input check rejects it.
func FeaturesOf(f []accountsv1.Feature) []string {
	out := make([]string, 0, len(f))
	for _, v := range f {
		out = append(out, strings.TrimPrefix(v.String(), "FEATURE_"))
	}
	return out
}

// Operators is o on the wire.
func Operators(o identity.Operators) *accountsv1.OperatorEnablement {
	out := &accountsv1.OperatorEnablement{DefaultSet: o.Default, Grants: make([]*accountsv1.OperatorGrant, 0, len(o.Grants))}
	for _, g := range o.Grants {
		methods := make([]accountsv1.OperatorMethod, 0, len(g.Methods))
		for _, m := range g.Methods {
			methods = append(methods, accountsv1.OperatorMethod(accountsv1.OperatorMethod_value["OPERATOR_METHOD_"+m]))
		}
		out.Grants = append(out.Grants, &accountsv1.OperatorGrant{OperatorId: g.Operator, Methods: methods})
	}
	return out
}

// OperatorGrants are the grants of o read back. A method UNSPECIFIED (or unknown) becomes a name
// no method has.
func OperatorGrants(o *accountsv1.OperatorEnablement) []identity.OperatorGrant {
	out := make([]identity.OperatorGrant, 0, len(o.GetGrants()))
	for _, g := range o.GetGrants() {
		methods := make([]string, 0, len(g.GetMethods()))
		for _, m := range g.GetMethods() {
			methods = append(methods, strings.TrimPrefix(m.String(), "OPERATOR_METHOD_"))
		}
		out = append(out, identity.OperatorGrant{Operator: g.GetOperatorId(), Methods: methods})
	}
	return out
}

// ToProto is p on the wire.
func ToProto(p identity.Principal) *accountsv1.Principal {
	out := &accountsv1.Principal{
		ClientId: p.ClientID, KeyId: p.KeyID, SdkTokenId: p.SDKTokenID, Role: Role(p.Role),
		ClientStatus: Status(p.Status), Features: Features(p.Features), Operators: Operators(p.Operators),
	}
	if p.ValidFor != nil {
		out.CredentialValidFor = durationpb.New(*p.ValidFor)
	}
	return out
}

// FromProto is p read back.
func FromProto(p *accountsv1.Principal) identity.Principal {
	out := identity.Principal{
		ClientID: p.GetClientId(), KeyID: p.GetKeyId(), SDKTokenID: p.GetSdkTokenId(), Role: RoleOf(p.GetRole()),
		Status: StatusOf(p.GetClientStatus()), Features: FeaturesOf(p.GetFeatures()), Operators: operatorsOf(p.GetOperators()),
	}
	if p.CredentialValidFor != nil {
		d := p.GetCredentialValidFor().AsDuration()
		out.ValidFor = &d
	}
	return out
}

// operatorsOf is the enablement a principal carries. Accounts always sends one; a principal
// without it comes from an accounts of the version before operators were enabled per client
// (during a rolling upgrade), whose clients could all use every operator with header
// enrichment: that is what it stands for, no more.
func operatorsOf(o *accountsv1.OperatorEnablement) identity.Operators {
	if o == nil {
		return identity.LegacyOperators()
	}
	if o.GetDefaultSet() {
		return identity.DefaultOperators()
	}
	return identity.Operators{Grants: OperatorGrants(o)}
}
