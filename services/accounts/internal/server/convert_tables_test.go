package server

import (
	"testing"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/enumtable"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// TestEnumTables: every role, status, feature and operator method has its value in the public
// API, and every value of those enums reads back.
func TestEnumTables(t *testing.T) {
	for name, err := range map[string]error{
		"roles":    enumtable.Check(roles, []principal.Role{principal.RoleAdmin, principal.RoleMember}, accountsv1.Role(0).Descriptor()),
		"statuses": enumtable.Check(statuses, []principal.Status{principal.StatusActive, principal.StatusSuspended}, accountsv1.ClientStatus(0).Descriptor()),
		"features": enumtable.Check(features, []string{domain.FeatureVerify, domain.FeatureConnect, domain.FeatureStuckPlus, domain.FeatureSandbox, domain.FeatureNumberShare}, accountsv1.Feature(0).Descriptor()),
		"methods":  enumtable.Check(operatorMethods, []string{principal.MethodHeaderEnrichment, principal.MethodNetworkAPI}, accountsv1.OperatorMethod(0).Descriptor()),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
