package principal_test

import (
	"reflect"
	"testing"

	"github.com/mnvhq/mnv/services/platform/principal"
)

func TestOperatorsMethodsOf(t *testing.T) {
	he, api := principal.MethodHeaderEnrichment, principal.MethodNetworkAPI
	tests := []struct {
		name string
		ops  principal.Operators
		id   string
		want []string
	}{
		{"zero value enables nothing", principal.Operators{}, "acme", nil},
		{"default set names no operator", principal.DefaultOperators(), "sandbox", nil},
		{"its own grant", principal.Operators{Grants: []principal.OperatorGrant{{"acme", []string{api}}}}, "acme", []string{api}},
		{"another operator's grant", principal.Operators{Grants: []principal.OperatorGrant{{"acme", []string{api}}}}, "acmex", nil},
		{"the wildcard", principal.LegacyOperators(), "anything", []string{he}},
		{"own and wildcard join", principal.Operators{Grants: []principal.OperatorGrant{
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
		want principal.Operators
	}{
		{"nil is the default set", nil, principal.Operators{Default: true}},
		{"empty is none", map[string][]string{}, principal.Operators{Grants: []principal.OperatorGrant{}}},
		{"sorted and compacted", map[string][]string{
			"zed": {"NETWORK_API", "HEADER_ENRICHMENT", "NETWORK_API"}, "acme": {"NETWORK_API"},
		}, principal.Operators{Grants: []principal.OperatorGrant{
			{"acme", []string{"NETWORK_API"}}, {"zed", []string{"HEADER_ENRICHMENT", "NETWORK_API"}},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := principal.OperatorsFromMap(tt.m)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("OperatorsFromMap(%v) = %+v, want %+v", tt.m, got, tt.want)
			}
			if back := principal.OperatorsFromMap(got.Map()); !reflect.DeepEqual(back, got) {
				t.Errorf("round trip: %+v, want %+v", back, got)
			}
			if (got.Map() == nil) != (tt.m == nil) {
				t.Errorf("Map() nil = %v, want %v", got.Map() == nil, tt.m == nil)
			}
		})
	}
}
