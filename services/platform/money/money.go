// Package money is the port through which a service moves a client's money: accounts owns the
// ledger, the other services charge through a Ledger (accountsclient.Client is the one over
// gRPC). Its types are plain Go and its errors are fault's, the very values accounts' rules
// return, so a service's rules read a refusal without knowing of gRPC or of accounts' protos.
package money

import (
	"context"
	"errors"
	"fmt"

	"github.com/mnvhq/mnv/services/platform/fault"
)

// Kind of a ledger entry (docs/api-decisions.md#money).
type Kind string

// Ledger kinds.
const (
	KindTopUp             Kind = "TOP_UP"
	KindVerification      Kind = "VERIFICATION"
	KindConnectEnrichment Kind = "CONNECT_ENRICHMENT"
	KindStuckPlusReveal   Kind = "STUCK_PLUS_REVEAL"
	// KindVerificationStep is a step of a verification workflow with a price of its own (an
	// SMS), its variant the channel and the number's country: "SMS_OTP:GB".
	KindVerificationStep Kind = "VERIFICATION_STEP"
	KindRefund           Kind = "REFUND"
	KindAdjustment       Kind = "ADJUSTMENT"
)

// MaxDebitsPerCall is the most debits accounts takes in one DebitMany call (about one of its
// ledger's batches): accounts refuses more, and accountsclient sends no more.
const MaxDebitsPerCall = 500

// Chargeable reports whether k is a kind that Debit may charge.
func (k Kind) Chargeable() bool {
	return k == KindVerification || k == KindConnectEnrichment || k == KindStuckPlusReveal || k == KindVerificationStep
}

// Charge is a debit to make: the price of Kind (and Variant) for ClientID, once per Reference.
type Charge struct {
	ClientID  string
	Kind      Kind
	Variant   string
	Reference string
}

// Charged is a debit made. Replayed: the reference was charged before, and this is that charge.
type Charged struct {
	EntryID      string
	Amount       int64
	BalanceAfter int64
	Replayed     bool
}

// Refund gives back the debit of ClientID with Reference.
type Refund struct {
	ClientID    string
	Reference   string
	Description *string
}

// Refunded is a refund made. Replayed: the debit was refunded before, and this is that refund.
type Refunded struct {
	EntryID      string
	Amount       int64
	BalanceAfter int64
	Replayed     bool
}

// Ledger is the port to accounts' ledger.
//
// Debit charges once per reference: a repeated reference answers the first charge, whatever the
// balance is by then. A refused debit is ErrInsufficientBalance, ErrBalanceExpired or
// fault.ErrSuspended (Refused): nothing was charged. Any other error wraps fault.ErrUnavailable:
// the outcome is unknown, and the caller asks again with the same reference.
//
// Refund gives a debit back once. A reference that names no debit (it never committed) is
// ErrNothingToRefund; any other error wraps fault.ErrUnavailable, as for Debit.
//
// Balance reads the client's balance.
type Ledger interface {
	Debit(ctx context.Context, c Charge) (Charged, error)
	Refund(ctx context.Context, r Refund) (Refunded, error)
	Balance(ctx context.Context, clientID string) (int64, error)
}

// Errors of the ledger's rules, on both sides of the port: accounts returns them and a Ledger
// gives them back to the caller unchanged.
var (
	// ErrInsufficientBalance: the balance is below the price.
	ErrInsufficientBalance = fault.New(fault.InsufficientBalance, "the balance is too low for this operation")
	// ErrBalanceExpired: the balance has passed its expiry date.
	ErrBalanceExpired = fault.New(fault.BalanceExpired, "the balance has expired")
	// ErrNothingToRefund: the reference names no debit of the client.
	ErrNothingToRefund = fault.New(fault.NotFound, "no debit with that reference")
)

// refusals are the refused debits by the reason they travel with; a reason names one value,
// so the reason alone brings it back across a hop, whatever its message says.
var refusals = map[fault.Reason]error{
	fault.InsufficientBalance: ErrInsufficientBalance,
	fault.BalanceExpired:      ErrBalanceExpired,
	fault.PermissionDenied:    fault.ErrSuspended,
}

// Refusal is the refused debit that reason names, if it names one.
func Refusal(reason fault.Reason) (error, bool) {
	err, ok := refusals[reason]
	return err, ok
}

// errAway marks an unknown outcome whose cause is that accounts could not be reached or did
// not answer in time.
var errAway = errors.New("accounts is away")

// Unknown is the error of a call to accounts whose outcome is not known: it wraps
// fault.ErrUnavailable and cause, and is Away when away is set.
func Unknown(op string, cause error, away bool) error {
	if away {
		return fmt.Errorf("%w: %s: %w: %w", fault.ErrUnavailable, op, errAway, cause)
	}
	return fmt.Errorf("%w: %s: %w", fault.ErrUnavailable, op, cause)
}

// Away tells an error of a call that failed because accounts could not be reached or did not
// answer in time, as opposed to one accounts answered: a caller working through a queue stops
// there instead of waiting out every item's timeout.
func Away(err error) bool {
	return errors.Is(err, errAway) || errors.Is(err, context.DeadlineExceeded)
}
