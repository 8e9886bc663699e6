package clients

import (
	"context"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// MaxOperatorGrants bounds a client's list of operators: it travels in every principal.
const MaxOperatorGrants = 100

// operatorID is the form of an operator id in verification's registry. Accounts does not know
// the registry (verification owns it): an id it does not list is kept and enables nothing.
var operatorID = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// SetOperators replaces the operators (and per operator the methods) the client may use, or
// with ops.Default returns it to the default set. It is a change of the client like its status
// or features, made the same way.
func (s *Service) SetOperators(ctx context.Context, id string, ops principal.Operators) (domain.Client, error) {
	ops, err := normaliseOperators(ops)
	if err != nil {
		return domain.Client{}, err
	}
	if _, err := uuid.Parse(id); err != nil {
		return domain.Client{}, fault.ErrNotFound
	}
	if err := s.st.SetClientOperators(ctx, id, ops); err != nil {
		return domain.Client{}, err
	}
	return s.Get(ctx, id)
}

// normaliseOperators checks an enablement and returns it in its stored form: grants sorted by
// operator id, methods sorted.
func normaliseOperators(ops principal.Operators) (principal.Operators, error) {
	if ops.Default {
		if len(ops.Grants) > 0 {
			return ops, fault.Invalid("operators", "the default set takes no grants")
		}
		return principal.DefaultOperators(), nil
	}
	if len(ops.Grants) > MaxOperatorGrants {
		return ops, fault.Invalid("operators", "at most %d operators", MaxOperatorGrants)
	}
	m := make(map[string][]string, len(ops.Grants))
	for _, g := range ops.Grants {
		if g.Operator != principal.AllOperators && !operatorID.MatchString(g.Operator) {
			return ops, fault.Invalid("operators", "operator id %q must be 1 to 63 lower-case letters, digits or '-' (or * for every operator)",
				truncate(g.Operator, 80))
		}
		if _, dup := m[g.Operator]; dup {
			return ops, fault.Invalid("operators", "operator %q is listed twice", g.Operator)
		}
		if len(g.Methods) == 0 {
			return ops, fault.Invalid("operators", "operator %q needs at least one method (%s)", g.Operator, strings.Join(principal.Methods, ", "))
		}
		methods := make([]string, 0, len(g.Methods))
		for _, meth := range g.Methods {
			if !slices.Contains(principal.Methods, meth) {
				return ops, fault.Invalid("operators", "operator %q: unknown method %q; known: %s", g.Operator, truncate(meth, 40), strings.Join(principal.Methods, ", "))
			}
			if slices.Contains(methods, meth) {
				return ops, fault.Invalid("operators", "operator %q: method %s is listed twice", g.Operator, meth)
			}
			methods = append(methods, meth)
		}
		m[g.Operator] = methods
	}
	return principal.OperatorsFromMap(m), nil
}
