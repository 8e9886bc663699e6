package accountsclient

import (
	"reflect"
	"testing"

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
			if got := operators(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("operators(%v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}
