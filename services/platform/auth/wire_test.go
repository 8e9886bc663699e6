package auth

import (
	"encoding/hex"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

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

// TestReadsThePreviousVersionsPrincipal: the principal moved from accounts' proto package to
// mnv.principal.v1 with the same field numbers, so what a process of the version before wrote
// (accounts' answers, the gateway's assertion during a rolling upgrade) reads the same. The
// bytes are what that version's conversion (platform/principalpb) marshalled.
func TestReadsThePreviousVersionsPrincipal(t *testing.T) {
	const client = "0f8fad5b-d9cb-469f-a165-70867728950e"
	grace := 90 * time.Second
	tests := []struct {
		name string
		hex  string
		want principal.Principal
	}{
		{"a MEMBER key in its grace, suspended, grants",
			"0a2430663866616435622d643963622d343639662d613136352d37303836373732383935306512026b31180220022a030104053a0f120d0a0761636d652d6165120201025202085a",
			principal.Principal{ClientID: client, KeyID: "k1", Role: principal.RoleMember, Status: principal.StatusSuspended,
				Features:  []string{"VERIFY", "SANDBOX", "NUMBER_SHARE"},
				Operators: principal.Operators{Grants: []principal.OperatorGrant{{Operator: "acme-ae", Methods: []string{"HEADER_ENRICHMENT", "NETWORK_API"}}}},
				ValidFor:  &grace}},
		{"an SDK token, default operators",
			"0a2430663866616435622d643963622d343639662d613136352d37303836373732383935306520012a020203320274313a020801",
			principal.Principal{ClientID: client, SDKTokenID: "t1", Status: principal.StatusActive, Features: []string{"CONNECT", "STUCK_PLUS"}, Operators: principal.DefaultOperators()}},
		{"an ADMIN key, no operators",
			"0a2430663866616435622d643963622d343639662d613136352d37303836373732383935306512026b32180120013a00",
			principal.Principal{ClientID: client, KeyID: "k2", Role: principal.RoleAdmin, Status: principal.StatusActive, Features: []string{}, Operators: principal.Operators{Grants: []principal.OperatorGrant{}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := hex.DecodeString(tt.hex)
			if err != nil {
				t.Fatal(err)
			}
			var m principalv1.Principal
			if err := proto.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if got := PrincipalFromProto(&m); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("read %+v, want %+v", got, tt.want)
			}
			// And what this version writes, the version before reads the same.
			opts := proto.MarshalOptions{Deterministic: true}
			if again, err := opts.Marshal(PrincipalToProto(tt.want)); err != nil || hex.EncodeToString(again) != tt.hex {
				t.Errorf("wrote %x (%v), the version before wrote %s", again, err, tt.hex)
			}
		})
	}
}
