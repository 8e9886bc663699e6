package server

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/accountsclient"
	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/enumtable"
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
		ms := make([]string, 0, len(g.GetMethods()))
		for _, m := range g.GetMethods() {
			ms = append(ms, nameOf(operatorMethods, m))
		}
		grants = append(grants, principal.OperatorGrant{Operator: g.GetOperatorId(), Methods: ms})
	}
	return principal.Operators{Default: o.GetDefaultSet(), Grants: grants}, nil
}

// A principal's values in accounts' public API, one table each (TestEnumTables holds them to
// both sides). The enums carry their type's prefix (ROLE_ADMIN); a principal uses the bare
// names the API shows (ADMIN).
var (
	roles = enumtable.New(map[principal.Role]accountsv1.Role{
		principal.RoleAdmin:  accountsv1.Role_ROLE_ADMIN,
		principal.RoleMember: accountsv1.Role_ROLE_MEMBER,
	})
	statuses = enumtable.New(map[principal.Status]accountsv1.ClientStatus{
		principal.StatusActive:    accountsv1.ClientStatus_CLIENT_STATUS_ACTIVE,
		principal.StatusSuspended: accountsv1.ClientStatus_CLIENT_STATUS_SUSPENDED,
	})
	features = enumtable.New(map[string]accountsv1.Feature{
		domain.FeatureVerify:      accountsv1.Feature_FEATURE_VERIFY,
		domain.FeatureConnect:     accountsv1.Feature_FEATURE_CONNECT,
		domain.FeatureStuckPlus:   accountsv1.Feature_FEATURE_STUCK_PLUS,
		domain.FeatureSandbox:     accountsv1.Feature_FEATURE_SANDBOX,
		domain.FeatureNumberShare: accountsv1.Feature_FEATURE_NUMBER_SHARE,
	})
	operatorMethods = enumtable.New(map[string]accountsv1.OperatorMethod{
		principal.MethodHeaderEnrichment: accountsv1.OperatorMethod_OPERATOR_METHOD_HEADER_ENRICHMENT,
		principal.MethodNetworkAPI:       accountsv1.OperatorMethod_OPERATOR_METHOD_NETWORK_API,
	})
)

// nameOf is e read back through t; a number t does not hold (UNSPECIFIED, or one this version
// does not know) becomes its enum name, which no feature or method has, so an input check
// rejects it.
func nameOf[E interface {
	~int32
	String() string
}](t enumtable.Table[string, E], e E) string {
	if v, ok := t.Domain(e); ok {
		return v
	}
	return e.String()
}

func roleToProto(r principal.Role) accountsv1.Role { return roles.Enum(r) }

// roleFromProto is r read back; "" for UNSPECIFIED.
func roleFromProto(r accountsv1.Role) principal.Role {
	v, _ := roles.Domain(r)
	return v
}

func statusToProto(s principal.Status) accountsv1.ClientStatus { return statuses.Enum(s) }

// statusFromProto is s read back; "" for UNSPECIFIED.
func statusFromProto(s accountsv1.ClientStatus) principal.Status {
	v, _ := statuses.Domain(s)
	return v
}

func featuresToProto(f []string) []accountsv1.Feature {
	out := make([]accountsv1.Feature, 0, len(f))
	for _, v := range f {
		out = append(out, features.Enum(v))
	}
	return out
}

// featuresFromProto are f read back.
func featuresFromProto(f []accountsv1.Feature) []string {
	out := make([]string, 0, len(f))
	for _, v := range f {
		out = append(out, nameOf(features, v))
	}
	return out
}

func operatorsToProto(o principal.Operators) *accountsv1.OperatorEnablement {
	out := &accountsv1.OperatorEnablement{DefaultSet: o.Default, Grants: make([]*accountsv1.OperatorGrant, 0, len(o.Grants))}
	for _, g := range o.Grants {
		ms := make([]accountsv1.OperatorMethod, 0, len(g.Methods))
		for _, m := range g.Methods {
			ms = append(ms, operatorMethods.Enum(m))
		}
		out.Grants = append(out.Grants, &accountsv1.OperatorGrant{OperatorId: g.Operator, Methods: ms})
	}
	return out
}

func kindToProto(k money.Kind) accountsv1.LedgerKind { return accountsclient.LedgerKinds.Enum(k) }

// kindFromProto is k read back; "" for UNSPECIFIED (or a kind this version does not know).
func kindFromProto(k accountsv1.LedgerKind) money.Kind {
	v, _ := accountsclient.LedgerKinds.Domain(k)
	return v
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
