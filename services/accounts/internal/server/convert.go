package server

import (
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/identity"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/principalpb"
)

// operatorsFromProto is the enablement of an admin request; nil (the field left out) is an
// error, so that forgetting it cannot take every operator away from a client.
func operatorsFromProto(o *accountsv1.OperatorEnablement) (identity.Operators, error) {
	if o == nil {
		return identity.Operators{}, fault.Invalid("operators", "is required")
	}
	// A method UNSPECIFIED (or unknown) becomes a name SetOperators rejects.
	return identity.Operators{Default: o.GetDefaultSet(), Grants: principalpb.OperatorGrants(o)}, nil
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
		ClientStatus:           principalpb.Status(c.Status),
		Balance:                c.Balance,
		BalanceExpiryDate:      tsOrNil(c.BalanceExpiresAt),
		BalanceValid:           c.BalanceValid(now),
		DaysUntilBalanceExpiry: c.DaysUntilExpiry(now),
		EnabledFeatures:        principalpb.Features(c.Features),
	}
}

func keyToProto(k domain.APIKey) *accountsv1.ApiKey {
	return &accountsv1.ApiKey{
		Id: k.ID, Name: k.Name, Role: principalpb.Role(k.Role), Hint: k.Hint,
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
