package server

import (
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// operatorsFromProto is the enablement of an admin request; nil (the field left out) is an
// error, so that forgetting it cannot take every operator away from a client.
func operatorsFromProto(o *accountsv1.OperatorEnablement) (principal.Operators, error) {
	if o == nil {
		return principal.Operators{}, fault.Invalid("operators", "is required")
	}
	// A method UNSPECIFIED (or unknown) becomes a name SetOperators rejects.
	grants := make([]principal.OperatorGrant, 0, len(o.GetGrants()))
	for _, g := range o.GetGrants() {
		methods := make([]string, 0, len(g.GetMethods()))
		for _, m := range g.GetMethods() {
			methods = append(methods, strings.TrimPrefix(m.String(), "OPERATOR_METHOD_"))
		}
		grants = append(grants, principal.OperatorGrant{Operator: g.GetOperatorId(), Methods: methods})
	}
	return principal.Operators{Default: o.GetDefaultSet(), Grants: grants}, nil
}

// A principal's values in accounts' public API. Its enums carry their type's prefix
// (ROLE_ADMIN); a principal uses the bare names the API shows (ADMIN).

func roleToProto(r principal.Role) accountsv1.Role {
	return accountsv1.Role(accountsv1.Role_value["ROLE_"+string(r)])
}

// roleFromProto is r read back; "" for UNSPECIFIED.
func roleFromProto(r accountsv1.Role) principal.Role {
	if r == accountsv1.Role_ROLE_UNSPECIFIED {
		return ""
	}
	return principal.Role(strings.TrimPrefix(r.String(), "ROLE_"))
}

func statusToProto(s principal.Status) accountsv1.ClientStatus {
	return accountsv1.ClientStatus(accountsv1.ClientStatus_value["CLIENT_STATUS_"+string(s)])
}

// statusFromProto is s read back; "" for UNSPECIFIED.
func statusFromProto(s accountsv1.ClientStatus) principal.Status {
	if s == accountsv1.ClientStatus_CLIENT_STATUS_UNSPECIFIED {
		return ""
	}
	return principal.Status(strings.TrimPrefix(s.String(), "CLIENT_STATUS_"))
}

func featuresToProto(f []string) []accountsv1.Feature {
	out := make([]accountsv1.Feature, 0, len(f))
	for _, v := range f {
		out = append(out, accountsv1.Feature(accountsv1.Feature_value["FEATURE_"+v]))
	}
	return out
}

// featuresFromProto are f read back. UNSPECIFIED (or a number this version does not know)
// becomes a name no feature has, which an input check rejects.
func featuresFromProto(f []accountsv1.Feature) []string {
	out := make([]string, 0, len(f))
	for _, v := range f {
		out = append(out, strings.TrimPrefix(v.String(), "FEATURE_"))
	}
	return out
}

func operatorsToProto(o principal.Operators) *accountsv1.OperatorEnablement {
	out := &accountsv1.OperatorEnablement{DefaultSet: o.Default, Grants: make([]*accountsv1.OperatorGrant, 0, len(o.Grants))}
	for _, g := range o.Grants {
		methods := make([]accountsv1.OperatorMethod, 0, len(g.Methods))
		for _, m := range g.Methods {
			methods = append(methods, accountsv1.OperatorMethod(accountsv1.OperatorMethod_value["OPERATOR_METHOD_"+m]))
		}
		out.Grants = append(out.Grants, &accountsv1.OperatorGrant{OperatorId: g.Operator, Methods: methods})
	}
	return out
}

func kindToProto(k money.Kind) accountsv1.LedgerKind {
	return accountsv1.LedgerKind(accountsv1.LedgerKind_value["LEDGER_KIND_"+string(k)])
}

func kindFromProto(k accountsv1.LedgerKind) money.Kind {
	if k == accountsv1.LedgerKind_LEDGER_KIND_UNSPECIFIED {
		return ""
	}
	return money.Kind(strings.TrimPrefix(k.String(), "LEDGER_KIND_"))
}

func ts(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

func tsOrNil(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

func timeOrNil(t *timestamppb.Timestamp) *time.Time {
	if t == nil {
		return nil
	}
	v := t.AsTime()
	return &v
}

func clientToProto(c domain.Client, now time.Time) *accountsv1.Client {
	return &accountsv1.Client{
		Id:                     c.ID,
		ClientName:             c.Name,
		ContactPersonName:      c.Contact.Name,
		ContactPersonEmail:     c.Contact.Email,
		ContactPhoneNumber:     c.Contact.Phone,
		ClientStatus:           statusToProto(c.Status),
		Balance:                c.Balance,
		BalanceExpiryDate:      tsOrNil(c.BalanceExpiresAt),
		BalanceValid:           c.BalanceValid(now),
		DaysUntilBalanceExpiry: c.DaysUntilExpiry(now),
		EnabledFeatures:        featuresToProto(c.Features),
	}
}

func keyToProto(k domain.APIKey) *accountsv1.ApiKey {
	return &accountsv1.ApiKey{
		Id: k.ID, Name: k.Name, Role: roleToProto(k.Role), Hint: k.Hint,
		CreatedAt: ts(k.CreatedAt), LastUsedAt: tsOrNil(k.LastUsedAt), ExpiresAt: tsOrNil(k.ExpiresAt),
	}
}

func tokenToProto(t domain.SDKToken) *accountsv1.SdkToken {
	return &accountsv1.SdkToken{
		Id: t.ID, Label: t.Label, Hint: t.Hint, CreatedAt: ts(t.CreatedAt), ExpiresAt: tsOrNil(t.ExpiresAt),
	}
}

func entryToProto(e domain.LedgerEntry) *accountsv1.LedgerEntry {
	return &accountsv1.LedgerEntry{
		Id: e.ID, Kind: kindToProto(e.Kind), Amount: e.Amount, BalanceAfter: e.BalanceAfter,
		Reference: e.Reference, Description: e.Description, CreatedAt: ts(e.CreatedAt),
	}
}

func webOriginToProto(o domain.WebOrigin) *accountsv1.WebOrigin {
	return &accountsv1.WebOrigin{Origin: o.Origin, CreatedAt: ts(o.CreatedAt)}
}

func redirectURIToProto(u domain.RedirectURI) *accountsv1.RedirectUri {
	return &accountsv1.RedirectUri{Uri: u.URI, CreatedAt: ts(u.CreatedAt)}
}

func pricesToProto(ps []domain.Price) []*accountsv1.Price {
	out := make([]*accountsv1.Price, 0, len(ps))
	for _, p := range ps {
		out = append(out, &accountsv1.Price{Kind: kindToProto(p.Kind), Variant: p.Variant, Amount: p.Amount, Overridden: p.Overridden})
	}
	return out
}

// mapItems converts a slice with f.
func mapItems[T, P any](in []T, f func(T) P) []P {
	out := make([]P, 0, len(in))
	for _, v := range in {
		out = append(out, f(v))
	}
	return out
}
