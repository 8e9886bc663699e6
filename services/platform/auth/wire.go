package auth

// A principal on the wire (principalv1.Principal): accounts answers its authentications with
// it, the other services read it back, and the gateway passes the principal it resolved to the
// services in it (MDPrincipal). One home for the conversion, so that what one side writes the
// other reads. It is not platform/principal's because the rules read that package, and they
// link no generated protos.

import (
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"

	principalv1 "github.com/mnvhq/mnv/proto/gen/mnv/principal/v1"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// Enum values in the protos carry their type's prefix (ROLE_ADMIN); a Principal uses the bare
// names the API shows (ADMIN).

// roleProto is r on the wire.
func roleProto(r principal.Role) principalv1.Role {
	return principalv1.Role(principalv1.Role_value["ROLE_"+string(r)])
}

// roleOf is r read back; "" for UNSPECIFIED.
func roleOf(r principalv1.Role) principal.Role {
	if r == principalv1.Role_ROLE_UNSPECIFIED {
		return ""
	}
	return principal.Role(strings.TrimPrefix(r.String(), "ROLE_"))
}

// statusProto is s on the wire.
func statusProto(s principal.Status) principalv1.ClientStatus {
	return principalv1.ClientStatus(principalv1.ClientStatus_value["CLIENT_STATUS_"+string(s)])
}

// statusOf is s read back; "" for UNSPECIFIED.
func statusOf(s principalv1.ClientStatus) principal.Status {
	if s == principalv1.ClientStatus_CLIENT_STATUS_UNSPECIFIED {
		return ""
	}
	return principal.Status(strings.TrimPrefix(s.String(), "CLIENT_STATUS_"))
}

// featuresProto are f on the wire.
func featuresProto(f []string) []principalv1.Feature {
	out := make([]principalv1.Feature, 0, len(f))
	for _, v := range f {
		out = append(out, principalv1.Feature(principalv1.Feature_value["FEATURE_"+v]))
	}
	return out
}

// featuresOf are f read back. UNSPECIFIED (or a number this version does not know) becomes a
// name no feature has, so it enables nothing and an input check rejects it.
func featuresOf(f []principalv1.Feature) []string {
	out := make([]string, 0, len(f))
	for _, v := range f {
		out = append(out, strings.TrimPrefix(v.String(), "FEATURE_"))
	}
	return out
}

// operatorsProto is o on the wire.
func operatorsProto(o principal.Operators) *principalv1.OperatorEnablement {
	out := &principalv1.OperatorEnablement{DefaultSet: o.Default, Grants: make([]*principalv1.OperatorGrant, 0, len(o.Grants))}
	for _, g := range o.Grants {
		methods := make([]principalv1.OperatorMethod, 0, len(g.Methods))
		for _, m := range g.Methods {
			methods = append(methods, principalv1.OperatorMethod(principalv1.OperatorMethod_value["OPERATOR_METHOD_"+m]))
		}
		out.Grants = append(out.Grants, &principalv1.OperatorGrant{OperatorId: g.Operator, Methods: methods})
	}
	return out
}

// operatorGrants are the grants of o read back. A method UNSPECIFIED (or unknown) becomes a name
// no method has.
func operatorGrants(o *principalv1.OperatorEnablement) []principal.OperatorGrant {
	out := make([]principal.OperatorGrant, 0, len(o.GetGrants()))
	for _, g := range o.GetGrants() {
		methods := make([]string, 0, len(g.GetMethods()))
		for _, m := range g.GetMethods() {
			methods = append(methods, strings.TrimPrefix(m.String(), "OPERATOR_METHOD_"))
		}
		out = append(out, principal.OperatorGrant{Operator: g.GetOperatorId(), Methods: methods})
	}
	return out
}

// PrincipalToProto is p on the wire.
func PrincipalToProto(p principal.Principal) *principalv1.Principal {
	out := &principalv1.Principal{
		ClientId: p.ClientID, KeyId: p.KeyID, SdkTokenId: p.SDKTokenID, Role: roleProto(p.Role),
		ClientStatus: statusProto(p.Status), Features: featuresProto(p.Features), Operators: operatorsProto(p.Operators),
	}
	if p.ValidFor != nil {
		out.CredentialValidFor = durationpb.New(*p.ValidFor)
	}
	return out
}

// PrincipalFromProto is p read back.
func PrincipalFromProto(p *principalv1.Principal) principal.Principal {
	out := principal.Principal{
		ClientID: p.GetClientId(), KeyID: p.GetKeyId(), SDKTokenID: p.GetSdkTokenId(), Role: roleOf(p.GetRole()),
		Status: statusOf(p.GetClientStatus()), Features: featuresOf(p.GetFeatures()), Operators: operatorsOf(p.GetOperators()),
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
func operatorsOf(o *principalv1.OperatorEnablement) principal.Operators {
	if o == nil {
		return principal.LegacyOperators()
	}
	if o.GetDefaultSet() {
		return principal.DefaultOperators()
	}
	return principal.Operators{Grants: operatorGrants(o)}
}
