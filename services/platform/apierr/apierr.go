// Package apierr is the error vocabulary shared by the services and the gateway: a gRPC status
// carries a stable reason (the contract's machine-readable code) and, where there is one, the
// offending request field, in a google.rpc.ErrorInfo detail. Services build errors with it at
// their edge; the gateway reads them back once, to choose the HTTP status and the envelope code.
package apierr

import (
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Domain names the ErrorInfo domain of every mnv error.
const Domain = "mnv"

// Reason is a stable, machine-readable error code (contract section 2).
type Reason string

// The reasons of the contract. New reasons may be added; none is ever renamed.
const (
	InvalidArgument     Reason = "INVALID_ARGUMENT"
	FeatureNotEnabled   Reason = "FEATURE_NOT_ENABLED"
	Unauthenticated     Reason = "UNAUTHENTICATED"
	InsufficientBalance Reason = "INSUFFICIENT_BALANCE"
	BalanceExpired      Reason = "BALANCE_EXPIRED"
	PermissionDenied    Reason = "PERMISSION_DENIED"
	NotFound            Reason = "NOT_FOUND"
	Conflict            Reason = "CONFLICT"
	AlreadyUsed         Reason = "ALREADY_USED"
	IdempotencyMismatch Reason = "IDEMPOTENCY_MISMATCH"
	PayloadTooLarge     Reason = "PAYLOAD_TOO_LARGE"
	RateLimited         Reason = "RATE_LIMITED"
	Internal            Reason = "INTERNAL"
	Unavailable         Reason = "UNAVAILABLE"
)

// New returns a status error with code, reason and a message safe to show to the caller.
func New(code codes.Code, reason Reason, msg string) error {
	return build(code, reason, "", msg)
}

// Field returns a status error about one request field (JSON name, e.g. "secretKey").
func Field(code codes.Code, reason Reason, field, msg string) error {
	return build(code, reason, field, msg)
}

// Invalid is the common case: a request field with a bad value.
func Invalid(field, msg string) error {
	return build(codes.InvalidArgument, InvalidArgument, field, msg)
}

func build(code codes.Code, reason Reason, field, msg string) error {
	info := &errdetails.ErrorInfo{Reason: string(reason), Domain: Domain}
	if field != "" {
		info.Metadata = map[string]string{"field": field}
	}
	st, err := status.New(code, msg).WithDetails(info)
	if err != nil {
		// Only a detail that cannot be marshalled fails; ErrorInfo always can.
		return status.Error(code, msg)
	}
	return st.Err()
}

// Details is what the gateway needs to know of an error.
type Details struct {
	Code    codes.Code
	Reason  Reason
	Field   string
	Message string
}

// Parse reads an error back. Errors without an mnv ErrorInfo get the reason that matches their
// gRPC code, so a plain status from a library still maps to a sensible code.
func Parse(err error) Details {
	// FromError unwraps a wrapped status, and makes anything else UNKNOWN.
	st, _ := status.FromError(err)
	d := Details{Code: st.Code(), Message: st.Message(), Reason: DefaultReason(st.Code())}
	for _, det := range st.Details() {
		if info, ok := det.(*errdetails.ErrorInfo); ok && info.GetDomain() == Domain {
			d.Reason = Reason(info.GetReason())
			d.Field = info.GetMetadata()["field"]
		}
	}
	return d
}

// DefaultReason is the reason of a gRPC code when the error names none.
func DefaultReason(c codes.Code) Reason {
	switch c {
	case codes.InvalidArgument, codes.OutOfRange:
		return InvalidArgument
	case codes.Unauthenticated:
		return Unauthenticated
	case codes.PermissionDenied:
		return PermissionDenied
	case codes.NotFound:
		return NotFound
	case codes.AlreadyExists, codes.Aborted:
		return Conflict
	case codes.ResourceExhausted:
		return RateLimited
	case codes.Unavailable, codes.DeadlineExceeded:
		return Unavailable
	case codes.FailedPrecondition:
		return InvalidArgument
	default:
		return Internal
	}
}
