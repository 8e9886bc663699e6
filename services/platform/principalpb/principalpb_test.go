package principalpb

import (
	"reflect"
	"testing"
	"time"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/platform/identity"
)

// TestOperators: the enablement a principal carries, and what a principal without one (from an
// accounts of the version before) stands for: what its clients could use then, no more.
func TestOperators(t *testing.T) {
	tests := []struct {
		name string
		in   *accountsv1.OperatorEnablement
		want identity.Operators
	}{
		{"absent: the previous version's rule", nil, identity.LegacyOperators()},
		{"the default set", &accountsv1.OperatorEnablement{DefaultSet: true}, identity.DefaultOperators()},
		{"none", &accountsv1.OperatorEnablement{}, identity.Operators{Grants: []identity.OperatorGrant{}}},
		{"grants", &accountsv1.OperatorEnablement{Grants: []*accountsv1.OperatorGrant{
			{OperatorId: "acme-ae", Methods: []accountsv1.OperatorMethod{accountsv1.OperatorMethod_OPERATOR_METHOD_NETWORK_API}},
			{OperatorId: "*", Methods: []accountsv1.OperatorMethod{accountsv1.OperatorMethod_OPERATOR_METHOD_HEADER_ENRICHMENT}},
		}}, identity.Operators{Grants: []identity.OperatorGrant{
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
		p    identity.Principal
	}{
		{"an ADMIN key, default operators", identity.Principal{
			ClientID: "c1", KeyID: "k1", Role: identity.RoleAdmin, Status: identity.StatusActive,
			Features: []string{"VERIFY", "CONNECT"}, Operators: identity.DefaultOperators(),
		}},
		{"a MEMBER key in its grace, suspended, grants", identity.Principal{
			ClientID: "c2", KeyID: "k2", Role: identity.RoleMember, Status: identity.StatusSuspended, Features: []string{},
			Operators: identity.Operators{Grants: []identity.OperatorGrant{{Operator: "acme-ae", Methods: []string{"NETWORK_API", "HEADER_ENRICHMENT"}}}},
			ValidFor:  &grace,
		}},
		{"an SDK token", identity.Principal{
			ClientID: "c3", SDKTokenID: "t3", Status: identity.StatusActive, Features: []string{"VERIFY", "SANDBOX"},
			Operators: identity.Operators{Grants: []identity.OperatorGrant{}}, ValidFor: &grace,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FromProto(ToProto(tt.p)); !reflect.DeepEqual(got, tt.p) {
				t.Errorf("FromProto(ToProto(p)) = %+v, want %+v", got, tt.p)
			}
		})
	}
}
