package billing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/money"
)

// RefundResult is the outcome of a refund.
type RefundResult struct {
	Entry    domain.LedgerEntry
	Refunded int64
	Replayed bool
}

// refundPrefix makes a refund's reference from its debit's; the unique reference per client is
// what makes a refund happen at most once.
const refundPrefix = "refund:"

// Refund gives back the debit with reference, once.
func (l *Ledger) Refund(ctx context.Context, clientID, reference string, description *string) (RefundResult, error) {
	if err := ValidateReference("reference", reference); err != nil {
		return RefundResult{}, err
	}
	res, err := l.refund(ctx, clientID, reference, description)
	l.Metrics.refund(res, err)
	if err == nil && !res.Replayed {
		l.seen.forget(clientID) // its next batch would find the balance changed
	}
	return res, err
}

func (l *Ledger) refund(ctx context.Context, clientID, reference string, description *string) (RefundResult, error) {
	var res RefundResult
	err := l.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		state, err := st.LockBalance(ctx, clientID)
		if err != nil {
			return err
		}
		if done, err := st.LedgerByReference(ctx, clientID, refundPrefix+reference); err == nil {
			res = RefundResult{Entry: done, Refunded: done.Amount, Replayed: true}
			return nil
		} else if !errors.Is(err, fault.ErrNotFound) {
			return err
		}
		debit, err := st.LedgerByReference(ctx, clientID, reference)
		if errors.Is(err, fault.ErrNotFound) || (err == nil && (!debit.Kind.Chargeable() || debit.Amount > 0)) {
			return money.ErrNothingToRefund
		}
		if err != nil {
			return err
		}
		entry := domain.LedgerEntry{
			ClientID: clientID, Kind: money.KindRefund, Amount: -debit.Amount, BalanceAfter: state.Balance - debit.Amount,
			Reference: refundPrefix + reference, Variant: debit.Variant, Description: description,
		}
		written, err := st.AppendLedger(ctx, []domain.LedgerEntry{entry})
		if err != nil {
			return err
		}
		res = RefundResult{Entry: written[0], Refunded: entry.Amount}
		return nil
	})
	if err != nil {
		return RefundResult{}, fmt.Errorf("refund: %w", err)
	}
	return res, nil
}

// TopUpRequest adds credit and optionally moves the expiry of the whole balance.
type TopUpRequest struct {
	ClientID  string
	Amount    int64
	ExpiresAt *time.Time
	Reference string
	// Description defaults to a note of what changed.
	Description *string
}

// TopUpResult is the outcome of a top-up.
type TopUpResult struct {
	Entry    domain.LedgerEntry
	Replayed bool
}

// ValidateTopUp checks a top-up request; now judges the expiry.
func ValidateTopUp(r *TopUpRequest, now time.Time) error {
	if r.Amount < 0 || r.Amount > MaxAmount {
		return fault.Invalid("amount", "must be between 0 and %d", int64(MaxAmount))
	}
	if r.Amount == 0 && r.ExpiresAt == nil {
		return fault.Invalid("amount", "a top-up adds credit, sets an expiry, or both")
	}
	if r.ExpiresAt != nil && !r.ExpiresAt.After(now) {
		return fault.Invalid("balanceExpiresAt", "must be in the future")
	}
	if r.Reference == "" {
		r.Reference = "top-up:" + uuid.NewString()
	}
	return ValidateReference("reference", r.Reference)
}

// TopUp adds credit (a TOP_UP ledger row), idempotent by reference. It runs on st when given:
// a store inside the caller's transaction (client creation); else in its own transaction.
func (l *Ledger) TopUp(ctx context.Context, st Store, r TopUpRequest) (TopUpResult, error) {
	if err := ValidateTopUp(&r, time.Now()); err != nil {
		return TopUpResult{}, err
	}
	// Its client's next batch would find the balance changed. Forgotten when TopUp returns,
	// which in a caller's transaction (st) is before it commits: a batch in between that sees
	// the old balance costs its next batch an optimistic attempt, no more.
	defer l.seen.forget(r.ClientID)
	if st == nil {
		var res TopUpResult
		err := l.tx.InTx(ctx, func(ctx context.Context, st Store) error {
			var err error
			res, err = l.topUp(ctx, st, r)
			return err
		})
		return res, err
	}
	return l.topUp(ctx, st, r)
}

func (l *Ledger) topUp(ctx context.Context, st Store, r TopUpRequest) (TopUpResult, error) {
	state, err := st.LockBalance(ctx, r.ClientID)
	if err != nil {
		return TopUpResult{}, err
	}
	if e, err := st.LedgerByReference(ctx, r.ClientID, r.Reference); err == nil {
		if e.Kind != money.KindTopUp || e.Amount != r.Amount {
			return TopUpResult{}, domain.ErrReferenceConflict
		}
		return TopUpResult{Entry: e, Replayed: true}, nil
	} else if !errors.Is(err, fault.ErrNotFound) {
		return TopUpResult{}, err
	}
	desc := r.Description
	if desc == nil && r.ExpiresAt != nil {
		d := "balance expiry set to " + r.ExpiresAt.UTC().Format(time.RFC3339)
		desc = &d
	}
	entry := domain.LedgerEntry{
		ClientID: r.ClientID, Kind: money.KindTopUp, Amount: r.Amount, BalanceAfter: state.Balance + r.Amount,
		Reference: r.Reference, Description: desc,
	}
	written, err := st.AppendLedger(ctx, []domain.LedgerEntry{entry})
	if err != nil {
		return TopUpResult{}, fmt.Errorf("top up: %w", err)
	}
	if r.ExpiresAt != nil {
		if err := st.SetExpiry(ctx, r.ClientID, *r.ExpiresAt); err != nil {
			return TopUpResult{}, err
		}
	}
	return TopUpResult{Entry: written[0]}, nil
}

// ListLedger reads a page of a client's ledger.
func (l *Ledger) ListLedger(ctx context.Context, clientID string, limit, offset int64) ([]domain.LedgerEntry, int64, error) {
	return l.st.ListLedger(ctx, clientID, limit, offset)
}

// Prices lists the prices that apply to a client.
func (l *Ledger) Prices(ctx context.Context, clientID string) ([]domain.Price, error) {
	o, err := l.st.PriceOverrides(ctx, clientID)
	if err != nil {
		return nil, err
	}
	return l.prices.Effective(o), nil
}

// SetPrice sets (amount not nil) or clears a client's price override and returns the prices.
func (l *Ledger) SetPrice(ctx context.Context, clientID string, kind money.Kind, variant string, amount *int64) ([]domain.Price, error) {
	if !kind.Chargeable() {
		return nil, fault.Invalid("kind", "must be VERIFICATION, CONNECT_ENRICHMENT, STUCK_PLUS_REVEAL or VERIFICATION_STEP")
	}
	if len(variant) > 64 {
		return nil, fault.Invalid("variant", "must be at most 64 characters")
	}
	if amount != nil && (*amount < 0 || *amount > MaxAmount) {
		return nil, fault.Invalid("amount", "must be between 0 and %d", int64(MaxAmount))
	}
	if err := l.st.SetPriceOverride(ctx, clientID, kind, variant, amount); err != nil {
		return nil, err
	}
	l.seen.forget(clientID) // its next batch would find the prices changed
	return l.Prices(ctx, clientID)
}
