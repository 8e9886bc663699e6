// Package billing moves money: debits (group-committed per client), refunds, top-ups, prices
// and the ledger. A balance never goes below zero, every change is a ledger row, and the
// balance is the sum of its ledger.
package billing

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/money"
)

// Prices are the configured default prices, by kind and optional variant.
type Prices struct {
	byKey map[priceKey]int64
}

type priceKey struct {
	kind    money.Kind
	variant string
}

// DefaultPrices are the prices out of the box (docs/api-decisions.md#money): verification 1,
// enrichment 1, reveal 5, a workflow's SMS step 2 (an SMS costs its sender more than a network
// check).
func DefaultPrices() Prices {
	return Prices{byKey: map[priceKey]int64{
		{money.KindVerification, ""}:      1,
		{money.KindConnectEnrichment, ""}: 1,
		{money.KindStuckPlusReveal, ""}:   5,
		{money.KindVerificationStep, ""}:  2,
	}}
}

// ParsePrices reads "KIND[/VARIANT]=AMOUNT,..." over the defaults, e.g.
// "VERIFICATION=2,VERIFICATION/NETWORK_API=3,STUCK_PLUS_REVEAL=0".
func ParsePrices(spec string) (Prices, error) {
	p := DefaultPrices()
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, val, ok := strings.Cut(item, "=")
		if !ok {
			return p, fmt.Errorf("price %q: want KIND[/VARIANT]=AMOUNT", item)
		}
		kind, variant, _ := strings.Cut(strings.TrimSpace(key), "/")
		if !money.Kind(kind).Chargeable() {
			return p, fmt.Errorf("price %q: kind must be VERIFICATION, CONNECT_ENRICHMENT, STUCK_PLUS_REVEAL or VERIFICATION_STEP", item)
		}
		amount, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil || amount < 0 || amount > MaxAmount {
			return p, fmt.Errorf("price %q: amount must be an integer from 0 to %d", item, MaxAmount)
		}
		p.byKey[priceKey{money.Kind(kind), variant}] = amount
	}
	return p, nil
}

// For returns the price of kind/variant for a client with overrides: the client's override of
// the variant, else of the kind, else the configured price of the variant, else of the kind. A
// variant "A:B" (a workflow step's channel and country, "SMS_OTP:GB") falls back to "A" before
// the kind, at each level: a client's price for SMS_OTP beats the configured SMS_OTP:GB.
func (p Prices) For(kind money.Kind, variant string, overrides []domain.Price) int64 {
	// At most three variants, kept on the stack: For runs for every debit of a batch.
	var buf [3]string
	variants := append(buf[:0], variant)
	if general, _, ok := strings.Cut(variant, ":"); ok && general != "" {
		variants = append(variants, general)
	}
	if variant != "" {
		variants = append(variants, "")
	}
	for _, v := range variants {
		for i := range overrides {
			if o := &overrides[i]; o.Kind == kind && o.Variant == v {
				return o.Amount
			}
		}
	}
	for _, v := range variants {
		if a, ok := p.byKey[priceKey{kind, v}]; ok {
			return a
		}
	}
	return 0
}

// Effective lists the prices that apply to a client: every configured price, and every
// override, marked as such.
func (p Prices) Effective(overrides []domain.Price) []domain.Price {
	seen := map[priceKey]bool{}
	var out []domain.Price
	for _, o := range overrides {
		seen[priceKey{o.Kind, o.Variant}] = true
		out = append(out, o)
	}
	for k := range p.byKey {
		if !seen[k] {
			out = append(out, domain.Price{Kind: k.kind, Variant: k.variant, Amount: p.For(k.kind, k.variant, overrides)})
		}
	}
	sortPrices(out)
	return out
}

func sortPrices(p []domain.Price) {
	slices.SortFunc(p, func(a, b domain.Price) int {
		if c := strings.Compare(string(a.Kind), string(b.Kind)); c != 0 {
			return c
		}
		return strings.Compare(a.Variant, b.Variant)
	})
}
