package auth

// A principal on the wire (principalv1.Principal): accounts answers its authentications with
// it, the other services read it back, and the gateway passes the principal it resolved to the
// services in it (MDPrincipal). One home for the conversion, so that what one side writes the
// other reads. It is not platform/principal's because the rules read that package, and they
// link no generated protos.

import (
	"google.golang.org/protobuf/types/known/durationpb"

	principalv1 "github.com/mnvhq/mnv/proto/gen/mnv/principal/v1"
	"github.com/mnvhq/mnv/services/platform/enumtable"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// The enums on the wire carry their type's prefix (ROLE_ADMIN); a Principal uses the bare names
// the API shows (ADMIN). One table each (TestWireTables holds them to both sides).
var (
	roles = enumtable.New(map[principal.Role]principalv1.Role{
		principal.RoleAdmin:  principalv1.Role_ROLE_ADMIN,
		principal.RoleMember: principalv1.Role_ROLE_MEMBER,
	})
	statuses = enumtable.New(map[principal.Status]principalv1.ClientStatus{
		principal.StatusActive:    principalv1.ClientStatus_CLIENT_STATUS_ACTIVE,
		principal.StatusSuspended: principalv1.ClientStatus_CLIENT_STATUS_SUSPENDED,
	})
	// features are the products a client may have (accounts' domain names them).
	features = enumtable.New(map[string]principalv1.Feature{
		"VERIFY":       principalv1.Feature_FEATURE_VERIFY,
		"CONNECT":      principalv1.Feature_FEATURE_CONNECT,
		"STUCK_PLUS":   principalv1.Feature_FEATURE_STUCK_PLUS,
		"SANDBOX":      principalv1.Feature_FEATURE_SANDBOX,
		"NUMBER_SHARE": principalv1.Feature_FEATURE_NUMBER_SHARE,
	})
	methods = enumtable.New(map[string]principalv1.OperatorMethod{
		principal.MethodHeaderEnrichment: principalv1.OperatorMethod_OPERATOR_METHOD_HEADER_ENRICHMENT,
		principal.MethodNetworkAPI:       principalv1.OperatorMethod_OPERATOR_METHOD_NETWORK_API,
	})
)

// unknownName is what a number no table holds reads back as: its enum name (FEATURE_UNSPECIFIED,
// or the number itself), which no feature or method has, so it enables nothing and an input
// check rejects it.
func unknownName(e interface{ String() string }) string { return e.String() }

// roleOf is r read back; "" for UNSPECIFIED.
func roleOf(r principalv1.Role) principal.Role {
	v, _ := roles.Domain(r)
	return v
}

// statusOf is s read back; "" for UNSPECIFIED.
func statusOf(s principalv1.ClientStatus) principal.Status {
	v, _ := statuses.Domain(s)
	return v
}

// featuresProto are f on the wire.
func featuresProto(f []string) []principalv1.Feature {
	out := make([]principalv1.Feature, 0, len(f))
	for _, v := range f {
		out = append(out, features.Enum(v))
	}
	return out
}

// featuresOf are f read back.
func featuresOf(f []principalv1.Feature) []string {
	out := make([]string, 0, len(f))
	for _, v := range f {
		name, ok := features.Domain(v)
		if !ok {
			name = unknownName(v)
		}
		out = append(out, name)
	}
	return out
}

// operatorsProto is o on the wire.
func operatorsProto(o principal.Operators) *principalv1.OperatorEnablement {
	out := &principalv1.OperatorEnablement{DefaultSet: o.Default, Grants: make([]*principalv1.OperatorGrant, 0, len(o.Grants))}
	for _, g := range o.Grants {
		ms := make([]principalv1.OperatorMethod, 0, len(g.Methods))
		for _, m := range g.Methods {
			ms = append(ms, methods.Enum(m))
		}
		out.Grants = append(out.Grants, &principalv1.OperatorGrant{OperatorId: g.Operator, Methods: ms})
	}
	return out
}

// operatorGrants are the grants of o read back. A method UNSPECIFIED (or unknown) becomes a name
// no method has.
func operatorGrants(o *principalv1.OperatorEnablement) []principal.OperatorGrant {
	out := make([]principal.OperatorGrant, 0, len(o.GetGrants()))
	for _, g := range o.GetGrants() {
		ms := make([]string, 0, len(g.GetMethods()))
		for _, m := range g.GetMethods() {
			name, ok := methods.Domain(m)
			if !ok {
				name = unknownName(m)
			}
			ms = append(ms, name)
		}
		out = append(out, principal.OperatorGrant{Operator: g.GetOperatorId(), Methods: ms})
	}
	return out
}

// PrincipalToProto is p on the wire.
func PrincipalToProto(p principal.Principal) *principalv1.Principal {
	out := &principalv1.Principal{
		ClientId: p.ClientID, KeyId: p.KeyID, SdkTokenId: p.SDKTokenID, Role: roles.Enum(p.Role),
		ClientStatus: statuses.Enum(p.Status), Features: featuresProto(p.Features), Operators: operatorsProto(p.Operators),
		SessionId: p.SessionID, UserId: p.UserID,
	}
	if p.ValidFor != nil {
		out.CredentialValidFor = durationpb.New(*p.ValidFor)
	}
	if p.StepUpValidFor != nil {
		out.StepUpValidFor = durationpb.New(*p.StepUpValidFor)
	}
	return out
}

// PrincipalFromProto is p read back.
func PrincipalFromProto(p *principalv1.Principal) principal.Principal {
	out := principal.Principal{
		ClientID: p.GetClientId(), KeyID: p.GetKeyId(), SDKTokenID: p.GetSdkTokenId(), Role: roleOf(p.GetRole()),
		Status: statusOf(p.GetClientStatus()), Features: featuresOf(p.GetFeatures()), Operators: operatorsOf(p.GetOperators()),
		SessionID: p.GetSessionId(), UserID: p.GetUserId(),
	}
	if p.CredentialValidFor != nil {
		d := p.GetCredentialValidFor().AsDuration()
		out.ValidFor = &d
	}
	if p.StepUpValidFor != nil {
		d := p.GetStepUpValidFor().AsDuration()
		out.StepUpValidFor = &d
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
