package principal

import (
	"maps"
	"slices"
)

// The methods an operator can vouch for a number by (the verification serviceTypes). Accounts
// stores them in a client's enablement; verification's operator registry says which of them each
// operator supports.
const (
	MethodHeaderEnrichment = "HEADER_ENRICHMENT"
	MethodNetworkAPI       = "NETWORK_API"
)

// Methods lists every method, in the order messages name them.
var Methods = []string{MethodHeaderEnrichment, MethodNetworkAPI}

// AllOperators is the operator id of a grant that stands for every operator of the registry.
const AllOperators = "*"

// OperatorGrant enables an operator (or, with AllOperators, every operator of the registry) for
// a client, with the methods the client may use there.
type OperatorGrant struct {
	Operator string
	Methods  []string
}

// Operators is which operators, and which of their methods, a client may use
// (docs/api-decisions.md#operators). What a client can use in the end is this intersected with the
// operator registry, which only verification knows; a sandbox operator also needs the SANDBOX
// feature.
//
// The zero value enables nothing: a principal built without its enablement can use no operator.
type Operators struct {
	// Default is set when the client has no list of its own: it gets the default set, every
	// sandbox operator of the registry with all of its methods. Grants is then empty.
	Default bool
	// Grants, sorted by operator id, one per id, each with its methods sorted.
	Grants []OperatorGrant
}

// DefaultOperators is the enablement of a client that has no list of its own.
func DefaultOperators() Operators { return Operators{Default: true} }

// LegacyOperators is what every client could use before operators were enabled per client:
// every operator of the registry, with HEADER_ENRICHMENT. Clients that existed then were given
// it on upgrade, and it stands for the enablement of a principal from a version that did not
// carry one.
func LegacyOperators() Operators {
	return Operators{Grants: []OperatorGrant{{Operator: AllOperators, Methods: []string{MethodHeaderEnrichment}}}}
}

// MethodsOf returns the methods the client's own grants enable for operator id: those of its
// grant and of the AllOperators grant, sorted. It says nothing of the default set, which only
// the registry can resolve (see Default).
func (o Operators) MethodsOf(id string) []string {
	var out []string
	for _, g := range o.Grants {
		if g.Operator == id || g.Operator == AllOperators {
			for _, m := range g.Methods {
				if !slices.Contains(out, m) {
					out = append(out, m)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// Map is the enablement as a map from operator id to methods, the form accounts stores: nil for
// the default set, an empty map for none.
func (o Operators) Map() map[string][]string {
	if o.Default {
		return nil
	}
	m := make(map[string][]string, len(o.Grants))
	for _, g := range o.Grants {
		m[g.Operator] = slices.Clone(g.Methods)
	}
	return m
}

// OperatorsFromMap is the enablement of m (see Map): nil is the default set. The grants come out
// sorted, whatever order m iterates in.
func OperatorsFromMap(m map[string][]string) Operators {
	if m == nil {
		return DefaultOperators()
	}
	out := Operators{Grants: make([]OperatorGrant, 0, len(m))}
	for _, id := range slices.Sorted(maps.Keys(m)) {
		methods := slices.Clone(m[id])
		slices.Sort(methods)
		out.Grants = append(out.Grants, OperatorGrant{Operator: id, Methods: slices.Compact(methods)})
	}
	return out
}
