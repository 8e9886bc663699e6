package identity_test

import (
	"reflect"
	"testing"

	"github.com/mnvhq/mnv/services/platform/identity"
)

func TestOperatorsMethodsOf(t *testing.T) {
	he, api := identity.MethodHeaderEnrichment, identity.MethodNetworkAPI
	tests := []struct {
		name string
		ops  identity.Operators
		id   string
		want []string
	}{
		{"zero value enables nothing", identity.Operators{}, "acme", nil},
		{"default set names no operator", identity.DefaultOperators(), "sandbox", nil},
		{"its own grant", identity.Operators{Grants: []identity.OperatorGrant{{"acme", []string{api}}}}, "acme", []string{api}},
		{"another operator's grant", identity.Operators{Grants: []identity.OperatorGrant{{"acme", []string{api}}}}, "acmex", nil},
		{"the wildcard", identity.LegacyOperators(), "anything", []string{he}},
		{"own and wildcard join", identity.Operators{Grants: []identity.OperatorGrant{
			{"*", []string{he}}, {"acme", []string{api, he}},
		}}, "acme", []string{he, api}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.ops.MethodsOf(tt.id); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("MethodsOf(%q) = %v, want %v", tt.id, got, tt.want)
			}
		})
	}
}

func TestOperatorsMapRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		m    map[string][]string
		want identity.Operators
	}{
		{"nil is the default set", nil, identity.Operators{Default: true}},
		{"empty is none", map[string][]string{}, identity.Operators{Grants: []identity.OperatorGrant{}}},
		{"sorted and compacted", map[string][]string{
			"zed": {"NETWORK_API", "HEADER_ENRICHMENT", "NETWORK_API"}, "acme": {"NETWORK_API"},
		}, identity.Operators{Grants: []identity.OperatorGrant{
			{"acme", []string{"NETWORK_API"}}, {"zed", []string{"HEADER_ENRICHMENT", "NETWORK_API"}},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := identity.OperatorsFromMap(tt.m)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("OperatorsFromMap(%v) = %+v, want %+v", tt.m, got, tt.want)
			}
			if back := identity.OperatorsFromMap(got.Map()); !reflect.DeepEqual(back, got) {
				t.Errorf("round trip: %+v, want %+v", back, got)
			}
			if (got.Map() == nil) != (tt.m == nil) {
				t.Errorf("Map() nil = %v, want %v", got.Map() == nil, tt.m == nil)
			}
		})
	}
}
