package auth

import (
	"reflect"
	"testing"
	"time"

	principalv1 "github.com/mnvhq/mnv/proto/gen/mnv/principal/v1"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// TestOperators: the enablement a principal carries, and what a principal without one (from an
// accounts of the version before) stands for: what its clients could use then, no more.
func TestOperators(t *testing.T) {
	tests := []struct {
		name string
		in   *principalv1.OperatorEnablement
		want principal.Operators
	}{
		{"absent: the previous version's rule", nil, principal.LegacyOperators()},
		{"the default set", &principalv1.OperatorEnablement{DefaultSet: true}, principal.DefaultOperators()},
		{"none", &principalv1.OperatorEnablement{}, principal.Operators{Grants: []principal.OperatorGrant{}}},
		{"grants", &principalv1.OperatorEnablement{Grants: []*principalv1.OperatorGrant{
			{OperatorId: "acme-ae", Methods: []principalv1.OperatorMethod{principalv1.OperatorMethod_OPERATOR_METHOD_NETWORK_API}},
			{OperatorId: "*", Methods: []principalv1.OperatorMethod{principalv1.OperatorMethod_OPERATOR_METHOD_HEADER_ENRICHMENT}},
		}}, principal.Operators{Grants: []principal.OperatorGrant{
			{Operator: "acme-ae", Methods: []string{"NETWORK_API"}},
			{Operator: "*", Methods: []string{"HEADER_ENRICHMENT"}},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := operatorsOf(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("operatorsOf(%v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

// TestRoundTrip: what ToProto writes, FromProto reads back the same, whichever credential the
// principal came from; the gateway's asserted principal depends on it.
func TestRoundTrip(t *testing.T) {
	grace := 90 * time.Second
	tests := []struct {
		name string
		p    principal.Principal
	}{
		{"an ADMIN key, default operators", principal.Principal{
			ClientID: "c1", KeyID: "k1", Role: principal.RoleAdmin, Status: principal.StatusActive,
			Features: []string{"VERIFY", "CONNECT"}, Operators: principal.DefaultOperators(),
		}},
		{"a MEMBER key in its grace, suspended, grants", principal.Principal{
			ClientID: "c2", KeyID: "k2", Role: principal.RoleMember, Status: principal.StatusSuspended, Features: []string{},
			Operators: principal.Operators{Grants: []principal.OperatorGrant{{Operator: "acme-ae", Methods: []string{"NETWORK_API", "HEADER_ENRICHMENT"}}}},
			ValidFor:  &grace,
		}},
		{"an SDK token", principal.Principal{
			ClientID: "c3", SDKTokenID: "t3", Status: principal.StatusActive, Features: []string{"VERIFY", "SANDBOX"},
			Operators: principal.Operators{Grants: []principal.OperatorGrant{}}, ValidFor: &grace,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PrincipalFromProto(PrincipalToProto(tt.p)); !reflect.DeepEqual(got, tt.p) {
				t.Errorf("PrincipalFromProto(PrincipalToProto(p)) = %+v, want %+v", got, tt.p)
			}
		})
	}
}
