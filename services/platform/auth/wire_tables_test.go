package auth

import (
	"testing"

	principalv1 "github.com/mnvhq/mnv/proto/gen/mnv/principal/v1"
	"github.com/mnvhq/mnv/services/platform/enumtable"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// TestWireTables: every role, status, feature and operator method has its value on the wire,
// and every value on the wire reads back.
func TestWireTables(t *testing.T) {
	for name, err := range map[string]error{
		"roles":    enumtable.Check(roles, []principal.Role{principal.RoleAdmin, principal.RoleMember}, principalv1.Role(0).Descriptor()),
		"statuses": enumtable.Check(statuses, []principal.Status{principal.StatusActive, principal.StatusSuspended}, principalv1.ClientStatus(0).Descriptor()),
		"features": enumtable.Check(features, []string{"VERIFY", "CONNECT", "STUCK_PLUS", "SANDBOX", "NUMBER_SHARE"}, principalv1.Feature(0).Descriptor()),
		"methods":  enumtable.Check(methods, []string{principal.MethodHeaderEnrichment, principal.MethodNetworkAPI}, principalv1.OperatorMethod(0).Descriptor()),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A number this version does not know enables nothing.
	if got := featuresOf([]principalv1.Feature{0, 99}); got[0] == "" || got[1] == "" || got[0] == "VERIFY" {
		t.Errorf("unknown features read back as %q", got)
	}
}
