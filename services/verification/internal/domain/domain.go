// Package domain is the vocabulary of the verification service: its types and the errors its
// rules return. The server maps the errors to gRPC status codes in one place.
package domain

import (
	"errors"
	"fmt"
	"time"

	"github.com/mnvhq/mnv/services/platform/accountsclient"
)

// Errors of the rules; compared with errors.Is.
var (
	// ErrNotFound: no such thing for this client (including things of other clients).
	ErrNotFound = errors.New("not found")
	// ErrNumberNotKept: a stuck-plus session whose number was dropped after its retention; the
	// session and its reveal audit remain, the number cannot be revealed any more.
	ErrNumberNotKept = errors.New("the number of this stuck-plus session is no longer kept: its retention period has passed")
	// ErrAlreadyUsed: a sealed blob or a transaction was used already.
	ErrAlreadyUsed = errors.New("already used")
	// ErrInsufficientBalance and ErrBalanceExpired: the charge was refused.
	ErrInsufficientBalance = errors.New("the balance is too low for this operation")
	ErrBalanceExpired      = errors.New("the balance has expired")
	// ErrSuspended: the client is suspended.
	ErrSuspended = errors.New("the account is suspended")
	// ErrUnavailable: accounts could not be reached; the outcome of a charge is not known yet.
	ErrUnavailable = errors.New("a backend service is unavailable")
	// ErrOriginNotAllowed: a browser capture from a page whose origin the transaction's client
	// did not allow (or with no origin at all).
	ErrOriginNotAllowed = errors.New("this page's origin is not allowed to capture the account's transactions")
)

// UsedByError is ErrAlreadyUsed for a blob the client already verified: it names that
// verification, so a client whose first call ended without an answer (a timeout, a 503 settled
// later by the reconciler) can read what it was charged for.
type UsedByError struct{ VerificationID string }

func (e *UsedByError) Error() string        { return "already used by verification " + e.VerificationID }
func (e *UsedByError) Is(target error) bool { return target == ErrAlreadyUsed }

// ChargeError turns the error of a debit into the domain's: a refusal (balance, expiry,
// suspension) is returned as such; any other error means the outcome of the debit is unknown,
// and is wrapped in ErrUnavailable.
func ChargeError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, accountsclient.ErrInsufficientBalance):
		return ErrInsufficientBalance
	case errors.Is(err, accountsclient.ErrBalanceExpired):
		return ErrBalanceExpired
	case errors.Is(err, accountsclient.ErrSuspended):
		return ErrSuspended
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// InvalidError is a request field with a bad value (400 INVALID_ARGUMENT).
type InvalidError struct{ Field, Msg string }

func (e *InvalidError) Error() string { return e.Field + ": " + e.Msg }

// Invalid returns an *InvalidError.
func Invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// NotEnabledError is a product, operator or service type the client may not use
// (400 FEATURE_NOT_ENABLED).
type NotEnabledError struct{ Field, Msg string }

func (e *NotEnabledError) Error() string { return e.Field + ": " + e.Msg }

// NotEnabled returns a *NotEnabledError.
func NotEnabled(field, format string, args ...any) error {
	return &NotEnabledError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// RateLimitedError is a request over a limit (429), to be retried after RetryAfter.
type RateLimitedError struct {
	Msg        string
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string { return e.Msg }

// Capture statuses.
const (
	Captured          = "CAPTURED"
	NoNetworkIdentity = "NO_NETWORK_IDENTITY"
)

// Verification statuses and outcomes (contract section 5).
const (
	StatusVerified     = "VERIFIED"
	StatusNotVerified  = "NOT_VERIFIED"
	StatusUndetermined = "UNDETERMINED"
	StatusExpired      = "EXPIRED"
	// StatusPending and StatusRejected are internal: recorded before the charge settles, and
	// after it was refused.
	StatusPending  = "PENDING"
	StatusRejected = "REJECTED"
)

// Reasons: the finer cause of an outcome.
const (
	ReasonMatch             = "NUMBER_MATCH"
	ReasonMismatch          = "NUMBER_MISMATCH"
	ReasonNoNetworkIdentity = "NO_NETWORK_IDENTITY"
	ReasonSessionExpired    = "SESSION_EXPIRED"
)

// IsOutcome reports whether s is one of the four outcomes a client sees.
func IsOutcome(s string) bool {
	return s == StatusVerified || s == StatusNotVerified || s == StatusUndetermined || s == StatusExpired
}

// Charged reports whether an outcome is charged.
func Charged(outcome string) bool { return outcome == StatusVerified || outcome == StatusNotVerified }

// Features this service checks.
const (
	FeatureVerify    = "VERIFY"
	FeatureStuckPlus = "STUCK_PLUS"
)

// Session is a capture: the single-use right to one verify.
type Session struct {
	ID         string
	ClientID   string
	Source     string // SDK or WEB
	OperatorID *string
	Status     string
	Platform   *string
	DeviceID   *string
	AppVersion *string
	CreatedAt  time.Time
	ExpiresAt  time.Time
}

// Verification is a kept verification.
type Verification struct {
	ID           string
	ClientID     string
	SessionID    string
	Status       string
	Outcome      string
	Reason       string
	OperatorID   string
	ServiceType  string
	NumberSealed []byte
	NumberHash   []byte
	Charged      int64
	BalanceAfter *int64
	CreatedAt    time.Time
}

// Transaction is a browser flow.
type Transaction struct {
	ID                 string
	ClientID           string
	ServiceCode        string
	MetadataID         string
	Features           []string // the client's, when the flow started
	Status             string   // PENDING, CAPTURED, NO_NETWORK_IDENTITY (EXPIRED is derived)
	OperatorID         *string
	SessionID          *string
	Blob               *string
	StuckPlusSessionID *string
	CreatedAt          time.Time
	ExpiresAt          time.Time
}

// Transaction statuses beyond the capture statuses.
const (
	TransactionPending = "PENDING"
	TransactionExpired = "EXPIRED"
)

// Service codes of a browser flow.
const (
	ServiceVerify    = "VERIFY"
	ServiceStuckPlus = "STUCK_PLUS"
)

// StuckPlusSession is a number captured by a STUCK_PLUS browser flow.
type StuckPlusSession struct {
	ID            string
	ClientID      string
	TransactionID string
	MetadataID    string
	OperatorID    string
	NumberSealed  []byte
	NumberMasked  string
	CreatedAt     time.Time
	RevealedAt    *time.Time
}

// Reveal is one audited reveal.
type Reveal struct {
	ID        string
	ClientID  string
	SessionID string
	KeyID     string
	Reason    string
	Charged   int64
	CreatedAt time.Time
}

// Page is a page of a list.
type Page[T any] struct {
	Items []T
	Total int64
}
