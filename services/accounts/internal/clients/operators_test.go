package clients_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/services/accounts/internal/accountstest"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/accounts/internal/clients"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
)

func grants(gs ...principal.OperatorGrant) principal.Operators {
	return principal.Operators{Grants: gs}
}

func grant(op string, methods ...string) principal.OperatorGrant {
	return principal.OperatorGrant{Operator: op, Methods: methods}
}

// TestSetOperators: a client's enablement is stored as given (normalised), reaches the principal
// of its API keys and SDK tokens, and is another client's business in nothing.
func TestSetOperators(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	a := env.Client(t, 0, "VERIFY", "SANDBOX")
	b := env.Client(t, 0, "VERIFY")
	tok, err := env.Credentials.CreateSDKToken(ctx, a.Client.ID, "app", nil)
	if err != nil {
		t.Fatal(err)
	}
	he, api := principal.MethodHeaderEnrichment, principal.MethodNetworkAPI

	// principals reads the enablement where verification learns it: the principal of each
	// credential.
	principals := func(t *testing.T) (key, sdk principal.Operators) {
		t.Helper()
		pk, err := env.Credentials.AuthenticateAPIKey(ctx, a.APIKey, a.Client.ID)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := env.Credentials.AuthenticateSDKToken(ctx, tok.Secret, a.Client.ID)
		if err != nil {
			t.Fatal(err)
		}
		return pk.Operators, ps.Operators
	}

	// A new client has the default set.
	if !a.Client.Operators.Default {
		t.Fatalf("new client: %+v, want the default set", a.Client.Operators)
	}
	if k, s := principals(t); !k.Default || !s.Default {
		t.Fatalf("new client's principals: %+v %+v", k, s)
	}

	steps := []struct {
		name string
		set  principal.Operators
		want principal.Operators
	}{
		{"own list, normalised", grants(grant("zz-op", api, he), grant("acme-ae", api)),
			grants(grant("acme-ae", api), grant("zz-op", he, api))},
		{"every operator", grants(grant("*", he), grant("sandbox", api)),
			grants(grant("*", he), grant("sandbox", api))},
		{"none", grants(), grants()},
		{"back to the default", principal.DefaultOperators(), principal.DefaultOperators()},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			c, err := env.Clients.SetOperators(ctx, a.Client.ID, st.set)
			if err != nil {
				t.Fatal(err)
			}
			if !sameOperators(c.Operators, st.want) {
				t.Fatalf("set = %+v, want %+v", c.Operators, st.want)
			}
			if got, _ := env.Clients.Get(ctx, a.Client.ID); !sameOperators(got.Operators, st.want) {
				t.Fatalf("read back = %+v, want %+v", got.Operators, st.want)
			}
			if k, s := principals(t); !sameOperators(k, st.want) || !sameOperators(s, st.want) {
				t.Fatalf("principals = %+v %+v, want %+v", k, s, st.want)
			}
			if other, _ := env.Clients.Get(ctx, b.Client.ID); !other.Operators.Default {
				t.Fatalf("the other client changed: %+v", other.Operators)
			}
		})
	}

	// Refusals change nothing.
	if _, err := env.Clients.SetOperators(ctx, a.Client.ID, grants(grant("acme-ae", he))); err != nil {
		t.Fatal(err)
	}
	many := make([]principal.OperatorGrant, clients.MaxOperatorGrants+1)
	for i := range many {
		many[i] = grant("op-"+strings.Repeat("x", i%40)+string(rune('a'+i%26))+strings.Repeat("y", i/26), he)
	}
	for name, set := range map[string]principal.Operators{
		"default with grants":   {Default: true, Grants: []principal.OperatorGrant{grant("acme-ae", he)}},
		"upper-case id":         grants(grant("ACME", he)),
		"empty id":              grants(grant("", he)),
		"long id":               grants(grant(strings.Repeat("a", 64), he)),
		"a pattern":             grants(grant("acme-*", he)),
		"no method":             grants(grant("acme-ae")),
		"unknown method":        grants(grant("acme-ae", "SMS")),
		"lower-case method":     grants(grant("acme-ae", "network_api")),
		"method twice":          grants(grant("acme-ae", he, he)),
		"operator twice":        grants(grant("acme-ae", he), grant("acme-ae", api)),
		"too many operators":    grants(many...),
		"unknown method on all": grants(grant("*", "")),
	} {
		_, err := env.Clients.SetOperators(ctx, a.Client.ID, set)
		if invalid := fault.Find(err, fault.InvalidArgument); invalid == nil || invalid.Field != "operators" {
			t.Errorf("%s: err = %v, want invalid operators", name, err)
		}
	}
	if got, _ := env.Clients.Get(ctx, a.Client.ID); !sameOperators(got.Operators, grants(grant("acme-ae", he))) {
		t.Fatalf("after refusals: %+v", got.Operators)
	}
	for _, id := range []string{"6f1c2e4a-0000-4000-8000-000000000000", "not-a-uuid"} {
		if _, err := env.Clients.SetOperators(ctx, id, grants()); !errors.Is(err, fault.ErrNotFound) {
			t.Errorf("client %q: %v, want not found", id, err)
		}
	}
}

// sameOperators compares enablements, an empty grant list equal to none.
func sameOperators(a, b principal.Operators) bool {
	return a.Default == b.Default && len(a.Grants) == len(b.Grants) && (len(a.Grants) == 0 || reflect.DeepEqual(a.Grants, b.Grants))
}
