// Package charge is the one way a service charges a client for an operation (a verification,
// a NETWORK_API verification, an enrichment, a reveal, whatever is priced next): a saga over the
// service's own record of the operation and accounts' ledger (money.Ledger).
//
//  1. Record. The owner writes its record PENDING, with the debit's reference fixed by it, and
//     commits: a charge never exists without its record.
//  2. Debit. The saga asks accounts to debit the reference outside any transaction of the owner:
//     no row lock and no connection waits on accounts.
//  3. Settle or reject, through the owner's Books, in a short transaction of the owner's.
//
// Every priced operation fails the same way:
//   - refused (money.ErrInsufficientBalance, money.ErrBalanceExpired, fault.ErrSuspended):
//     nothing was charged; the record is rejected with the refusal and the caller hears it;
//   - outcome unknown (fault.ErrUnavailable: accounts away, a timeout, a crash): the record stays
//     PENDING; a retry of the operation resumes it, else the Reconciler finishes it;
//   - a repeated reference (that retry, the reconciler, a crash between debit and settle) is the
//     first charge, once: accounts keeps UNIQUE (client_id, reference);
//   - what the record charged for is gone when the charge comes back (Books.Settle answers Void):
//     the reference is refunded and the record voided.
//
// The owner records; the saga owns the order of the other steps and what each failure means.
// Batching stays the owner's and the ledger's: Books.Settle may group-commit with concurrent
// settles (verify's does), and accountsclient groups concurrent debits into one call.
package charge

import (
	"context"
	"errors"
	"time"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/money"
)

// Intent is a charge recorded PENDING: the owner's record and the debit it stands for, whose
// reference the record fixed.
type Intent[R any] struct {
	Record R
	Charge money.Charge
}

// Books is the port to the owner's records of charged operations.
//
// Settle writes the charge onto a PENDING record (a record found final already is left as it
// is: someone else finished it), or answers Void when the record can no longer take it. Reject
// marks a PENDING record refused. Each writes in a transaction of its own, or in the
// reconciler's (Claims).
type Books[R any] interface {
	Settle(ctx context.Context, rec R, c money.Charged) error
	Reject(ctx context.Context, rec R, refusal error) error
}

// Voider is Books whose records can outlive what they charge for (an erased profile): Void
// marks a PENDING record void once its charge is refunded.
type Voider[R any] interface {
	Void(ctx context.Context, rec R) error
}

// voided is Settle's answer for a record that can no longer take its charge.
type voided struct {
	cause error
	why   string
}

func (v *voided) Error() string { return "charge void: " + v.why + ": " + v.cause.Error() }
func (v *voided) Unwrap() error { return v.cause }

// Void is what Books.Settle answers when the record can no longer take its charge: the saga
// refunds the charge (described by why) and Voids the record, and its caller hears cause.
func Void(cause error, why string) error { return &voided{cause: cause, why: why} }

// Outcome is where a charge ended.
type Outcome int

// Outcomes.
const (
	// Pending: the outcome is not known (accounts away) or not written; the record stays PENDING.
	Pending Outcome = iota
	// Settled: charged, and the record says so.
	Settled
	// Rejected: refused, nothing charged, and the record says so.
	Rejected
	// Voided: charged and refunded, and the record says so.
	Voided
)

// Saga moves intents through their debit to their settlement.
type Saga[R any] struct {
	Ledger money.Ledger
	// DebitTimeout bounds the debit alone (0: the caller's context does); a reconciler's
	// transaction holds its claims meanwhile.
	DebitTimeout time.Duration
}

// Complete takes an intent recorded PENDING (committed) through the debit and its settlement
// in b. The error is the refusal for Rejected, Void's cause for Voided, and for Pending what
// kept it pending (wrapping fault.ErrUnavailable when accounts did not answer; money.Away
// tells whether it was away).
func (s Saga[R]) Complete(ctx context.Context, b Books[R], in Intent[R]) (Outcome, money.Charged, error) {
	dctx, cancel := ctx, context.CancelFunc(func() {})
	if s.DebitTimeout > 0 {
		dctx, cancel = context.WithTimeout(ctx, s.DebitTimeout)
	}
	c, err := s.Ledger.Debit(dctx, in.Charge)
	cancel()
	switch {
	case errors.Is(err, fault.ErrUnavailable):
		return Pending, money.Charged{}, err
	case err != nil: // refused: nothing was charged (money.Ledger says every other error is)
		if rerr := b.Reject(ctx, in.Record, err); rerr != nil {
			return Pending, money.Charged{}, rerr
		}
		return Rejected, money.Charged{}, err
	}
	err = b.Settle(ctx, in.Record, c)
	var v *voided
	switch {
	case errors.As(err, &v):
		if verr := s.void(ctx, b, in, v.why); verr != nil {
			return Pending, c, verr
		}
		return Voided, c, v.cause
	case err != nil:
		return Pending, c, err
	}
	return Settled, c, nil
}

// void refunds a charge whose record cannot take it, then voids the record. A refund whose
// outcome is unknown leaves the record PENDING: the reconciler debits the reference again (the
// same charge) and refunds it then.
func (s Saga[R]) void(ctx context.Context, b Books[R], in Intent[R], why string) error {
	rctx, cancel := ctx, context.CancelFunc(func() {})
	if s.DebitTimeout > 0 {
		rctx, cancel = context.WithTimeout(ctx, s.DebitTimeout)
	}
	_, err := s.Ledger.Refund(rctx, money.Refund{ClientID: in.Charge.ClientID, Reference: in.Charge.Reference, Description: &why})
	cancel()
	if err != nil && !errors.Is(err, money.ErrNothingToRefund) {
		return err
	}
	if vd, ok := b.(Voider[R]); ok {
		return vd.Void(ctx, in.Record)
	}
	return errors.New("charge: Settle answered Void, but its Books cannot void")
}

// Refusal is the reason a refused debit travelled with (INSUFFICIENT_BALANCE, BALANCE_EXPIRED,
// PERMISSION_DENIED for a suspended account), "" for another error.
func Refusal(err error) string {
	var f *fault.Error
	if errors.As(err, &f) {
		return string(f.Reason)
	}
	return ""
}
