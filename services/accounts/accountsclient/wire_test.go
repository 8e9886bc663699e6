package accountsclient

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	principalv1 "github.com/mnvhq/mnv/proto/gen/mnv/principal/v1"
)

// TestPrincipalEnumsMirrorAccounts: the principal on the wire (mnv.principal.v1) has its own
// enums, the shared kit must not read accounts' API, but accounts' public API says the same
// things in its own. The two must agree value for value, name and number, so that a value
// accounts adds is added to both, and one written by a version that sent accounts' Principal
// reads the same.
func TestPrincipalEnumsMirrorAccounts(t *testing.T) {
	tests := []struct {
		name            string
		shared, account protoreflect.EnumDescriptor
	}{
		{"Role", principalv1.Role(0).Descriptor(), accountsv1.Role(0).Descriptor()},
		{"ClientStatus", principalv1.ClientStatus(0).Descriptor(), accountsv1.ClientStatus(0).Descriptor()},
		{"Feature", principalv1.Feature(0).Descriptor(), accountsv1.Feature(0).Descriptor()},
		{"OperatorMethod", principalv1.OperatorMethod(0).Descriptor(), accountsv1.OperatorMethod(0).Descriptor()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sv, av := tt.shared.Values(), tt.account.Values()
			if sv.Len() != av.Len() {
				t.Errorf("%d values in mnv.principal.v1, %d in mnv.accounts.v1", sv.Len(), av.Len())
			}
			for i := range av.Len() {
				a := av.Get(i)
				s := sv.ByName(a.Name())
				if s == nil || s.Number() != a.Number() {
					t.Errorf("accounts' %s = %d has no equal in mnv.principal.v1", a.Name(), a.Number())
				}
			}
		})
	}
}
