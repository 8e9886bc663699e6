// Package apierr puts mnv's errors on the wire and reads them back: a gRPC status carries a stable
// reason (fault's vocabulary, the API's error code, docs/api-decisions.md#envelope) and, where
// there is one, the offending request field, in a google.rpc.ErrorInfo detail. Services answer with
// it (FromFault turns an error of their rules into its status); the gateway reads statuses back
// once, to choose the HTTP status and the envelope code.
package apierr

import (
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mnvhq/mnv/services/platform/fault"
)

// Domain names the ErrorInfo domain of every mnv error.
const Domain = "mnv"

// New returns a status error with code, reason and a message safe to show to the caller.
func New(code codes.Code, reason fault.Reason, msg string) error {
	return build(code, reason, "", msg)
}

// Field returns a status error about one request field (JSON name, e.g. "secretKey").
func Field(code codes.Code, reason fault.Reason, field, msg string) error {
	return build(code, reason, field, msg)
}

// Invalid is the common case: a request field with a bad value.
func Invalid(field, msg string) error {
	return build(codes.InvalidArgument, fault.InvalidArgument, field, msg)
}

// FromFault is the status of an error of the rules: the gRPC code of its reason (Code), the
// reason, its field and its message.
func FromFault(e *fault.Error) error {
	return build(Code(e.Reason), e.Reason, e.Field, e.Msg)
}

// Code is the gRPC code an error with reason is answered with. The gateway decides the HTTP
// status by the reason; the code is what gRPC callers and the RPC metrics see.
func Code(r fault.Reason) codes.Code {
	switch r {
	case fault.InvalidArgument, fault.FeatureNotEnabled, fault.PayloadTooLarge:
		return codes.InvalidArgument
	case fault.Unauthenticated:
		return codes.Unauthenticated
	case fault.InsufficientBalance, fault.BalanceExpired, fault.Conflict, fault.IdempotencyMismatch:
		return codes.FailedPrecondition
	case fault.PermissionDenied, fault.StepUpRequired:
		return codes.PermissionDenied
	case fault.NotFound:
		return codes.NotFound
	case fault.AlreadyUsed:
		return codes.AlreadyExists
	case fault.RateLimited:
		return codes.ResourceExhausted
	case fault.Unavailable:
		return codes.Unavailable
	}
	return codes.Internal
}

func build(code codes.Code, reason fault.Reason, field, msg string) error {
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
	Reason  fault.Reason
	Field   string
	Message string
}

// Err is the status error d was read from (Parse), for an error that travelled inside a
// message rather than as a call's status.
func (d Details) Err() error { return build(d.Code, d.Reason, d.Field, d.Message) }

// Parse reads an error back. Errors without an mnv ErrorInfo get the reason that matches their
// gRPC code, so a plain status from a library still maps to a sensible code.
func Parse(err error) Details {
	// FromError unwraps a wrapped status, and makes anything else UNKNOWN.
	st, _ := status.FromError(err)
	d := Details{Code: st.Code(), Message: st.Message(), Reason: DefaultReason(st.Code())}
	for _, det := range st.Details() {
		if info, ok := det.(*errdetails.ErrorInfo); ok && info.GetDomain() == Domain {
			d.Reason = fault.Reason(info.GetReason())
			d.Field = info.GetMetadata()["field"]
		}
	}
	return d
}

// DefaultReason is the reason of a gRPC code when the error names none.
func DefaultReason(c codes.Code) fault.Reason {
	switch c {
	case codes.InvalidArgument, codes.OutOfRange:
		return fault.InvalidArgument
	case codes.Unauthenticated:
		return fault.Unauthenticated
	case codes.PermissionDenied:
		return fault.PermissionDenied
	case codes.NotFound:
		return fault.NotFound
	case codes.AlreadyExists, codes.Aborted:
		return fault.Conflict
	case codes.ResourceExhausted:
		return fault.RateLimited
	case codes.Unavailable, codes.DeadlineExceeded:
		return fault.Unavailable
	case codes.FailedPrecondition:
		return fault.InvalidArgument
	default:
		return fault.Internal
	}
}
