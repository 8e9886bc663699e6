// Package fault is the one vocabulary of errors in mnv: the API's error codes (the stable,
// machine-readable codes of docs/api-decisions.md#envelope) and the errors of the services' rules,
// each of which carries one. It knows nothing of gRPC or HTTP, so domain packages return its errors
// as plain values; apierr puts them on the wire (grpcserver.Status, once for every service) and the
// gateway turns the reason into an HTTP status (gateway/internal/envelope).
package fault

import (
	"errors"
	"fmt"
	"time"
)

// Reason is a stable, machine-readable error code (docs/api-decisions.md#envelope).
type Reason string

// The reasons the API answers. New reasons may be added; none is ever renamed.
const (
	InvalidArgument     Reason = "INVALID_ARGUMENT"
	FeatureNotEnabled   Reason = "FEATURE_NOT_ENABLED"
	Unauthenticated     Reason = "UNAUTHENTICATED"
	InsufficientBalance Reason = "INSUFFICIENT_BALANCE"
	BalanceExpired      Reason = "BALANCE_EXPIRED"
	PermissionDenied    Reason = "PERMISSION_DENIED"
	// StepUpRequired: a person's session must prove its passkey again before this call
	// (docs/api-decisions.md#console).
	StepUpRequired      Reason = "STEP_UP_REQUIRED"
	NotFound            Reason = "NOT_FOUND"
	Conflict            Reason = "CONFLICT"
	AlreadyUsed         Reason = "ALREADY_USED"
	IdempotencyMismatch Reason = "IDEMPOTENCY_MISMATCH"
	PayloadTooLarge     Reason = "PAYLOAD_TOO_LARGE"
	RateLimited         Reason = "RATE_LIMITED"
	Internal            Reason = "INTERNAL"
	Unavailable         Reason = "UNAVAILABLE"
)

// Error is an error of a rule, as the caller will hear it. Compare sentinels with errors.Is
// (identity) and read one out of a wrapped error with errors.As: wrapping adds context for the
// logs, never to what the caller hears.
type Error struct {
	Reason Reason
	// Field is the JSON name of the request field at fault, if there is one.
	Field string
	// Msg is the message for the caller: safe to show, no internals.
	Msg string
	// RetryAfter is how long a RateLimited caller should wait.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Msg }

// Find is the error of the rules that err holds, wrapped or not, if it has reason; else nil.
func Find(err error, reason Reason) *Error {
	var f *Error
	if errors.As(err, &f) && f.Reason == reason {
		return f
	}
	return nil
}

// New returns an error with reason and a message for the caller.
func New(reason Reason, msg string) error { return &Error{Reason: reason, Msg: msg} }

// Invalid is a request field with a bad value (400 INVALID_ARGUMENT). The message names the
// field, as callers have always read it: "clientName: must not be blank".
func Invalid(field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	return &Error{Reason: InvalidArgument, Field: field, Msg: msg}
}

// NotEnabled is a product, operator, service type or kind the client may not use
// (400 FEATURE_NOT_ENABLED); field is "" when the whole product is off.
func NotEnabled(field, format string, args ...any) error {
	return &Error{Reason: FeatureNotEnabled, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Limited is a request over a limit (429 RATE_LIMITED), to be retried after retryAfter.
func Limited(msg string, retryAfter time.Duration) error {
	return &Error{Reason: RateLimited, Msg: msg, RetryAfter: retryAfter}
}

// Errors every service's rules return.
var (
	// ErrNotFound: no such thing for this client, including things of other clients (never
	// confirm that another client's id exists).
	ErrNotFound = New(NotFound, "not found")
	// ErrSuspended: the client is suspended.
	ErrSuspended = New(PermissionDenied, "the account is suspended")
	// ErrUnavailable: a service this one needs could not be reached, or did not answer in
	// time; what became of the request there is not known. It wraps the cause.
	ErrUnavailable = New(Unavailable, "a backend service is unavailable, try again")
)
