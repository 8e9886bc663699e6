package apierr_test

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/fault"
)

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want apierr.Details
	}{
		{
			"New",
			apierr.New(codes.NotFound, fault.NotFound, "no such client"),
			apierr.Details{Code: codes.NotFound, Reason: fault.NotFound, Message: "no such client"},
		},
		{
			"New with a reason other than the code's default",
			apierr.New(codes.FailedPrecondition, fault.InsufficientBalance, "balance too low"),
			apierr.Details{Code: codes.FailedPrecondition, Reason: fault.InsufficientBalance, Message: "balance too low"},
		},
		{
			"Field",
			apierr.Field(codes.FailedPrecondition, fault.IdempotencyMismatch, "Idempotency-Key", "reused"),
			apierr.Details{Code: codes.FailedPrecondition, Reason: fault.IdempotencyMismatch, Field: "Idempotency-Key", Message: "reused"},
		},
		{
			"Field with empty field is New",
			apierr.Field(codes.PermissionDenied, fault.FeatureNotEnabled, "", "not enabled"),
			apierr.Details{Code: codes.PermissionDenied, Reason: fault.FeatureNotEnabled, Message: "not enabled"},
		},
		{
			"Invalid",
			apierr.Invalid("secretKey", "must not be empty"),
			apierr.Details{Code: codes.InvalidArgument, Reason: fault.InvalidArgument, Field: "secretKey", Message: "must not be empty"},
		},
		{
			"wrapped with %w",
			fmt.Errorf("store: %w", apierr.Invalid("page", "bad page")),
			apierr.Details{Code: codes.InvalidArgument, Reason: fault.InvalidArgument, Field: "page"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := apierr.Parse(tt.err)
			if got.Code != tt.want.Code || got.Reason != tt.want.Reason || got.Field != tt.want.Field {
				t.Errorf("Parse = %+v, want %+v", got, tt.want)
			}
			if tt.want.Message != "" && got.Message != tt.want.Message {
				t.Errorf("Message = %q, want %q", got.Message, tt.want.Message)
			}
			if status.Code(tt.err) != tt.want.Code {
				t.Errorf("status.Code = %v, want %v", status.Code(tt.err), tt.want.Code)
			}
			// An error carried in a message comes back as the status it was.
			if again := apierr.Parse(got.Err()); again != got {
				t.Errorf("Parse(Err()) = %+v, want %+v", again, got)
			}
		})
	}
}

func TestErrorInfoDetail(t *testing.T) {
	st, ok := status.FromError(apierr.Invalid("size", "too big"))
	if !ok {
		t.Fatal("Invalid did not return a status error")
	}
	var infos []*errdetails.ErrorInfo
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			infos = append(infos, info)
		}
	}
	if len(infos) != 1 {
		t.Fatalf("details = %v, want one ErrorInfo", st.Details())
	}
	if infos[0].GetDomain() != apierr.Domain || infos[0].GetReason() != "INVALID_ARGUMENT" || infos[0].GetMetadata()["field"] != "size" {
		t.Errorf("ErrorInfo = %v", infos[0])
	}
}

func TestParseWithoutDetails(t *testing.T) {
	foreign, err := status.New(codes.PermissionDenied, "other domain").WithDetails(&errdetails.ErrorInfo{Reason: "SOMETHING_ELSE", Domain: "googleapis.com"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want apierr.Details
	}{
		{"plain error", errors.New("boom"), apierr.Details{Code: codes.Unknown, Reason: fault.Internal, Message: "boom"}},
		{"status NotFound", status.Error(codes.NotFound, "gone"), apierr.Details{Code: codes.NotFound, Reason: fault.NotFound, Message: "gone"}},
		{"status InvalidArgument", status.Error(codes.InvalidArgument, "bad"), apierr.Details{Code: codes.InvalidArgument, Reason: fault.InvalidArgument, Message: "bad"}},
		{"status Unavailable", status.Error(codes.Unavailable, "down"), apierr.Details{Code: codes.Unavailable, Reason: fault.Unavailable, Message: "down"}},
		{"status Internal", status.Error(codes.Internal, "oops"), apierr.Details{Code: codes.Internal, Reason: fault.Internal, Message: "oops"}},
		{"ErrorInfo of another domain ignored", foreign.Err(), apierr.Details{Code: codes.PermissionDenied, Reason: fault.PermissionDenied, Message: "other domain"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := apierr.Parse(tt.err); got != tt.want {
				t.Errorf("Parse = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDefaultReason(t *testing.T) {
	tests := []struct {
		code codes.Code
		want fault.Reason
	}{
		{codes.InvalidArgument, fault.InvalidArgument},
		{codes.OutOfRange, fault.InvalidArgument},
		{codes.FailedPrecondition, fault.InvalidArgument},
		{codes.Unauthenticated, fault.Unauthenticated},
		{codes.PermissionDenied, fault.PermissionDenied},
		{codes.NotFound, fault.NotFound},
		{codes.AlreadyExists, fault.Conflict},
		{codes.Aborted, fault.Conflict},
		{codes.ResourceExhausted, fault.RateLimited},
		{codes.Unavailable, fault.Unavailable},
		{codes.DeadlineExceeded, fault.Unavailable},
		{codes.Internal, fault.Internal},
		{codes.Unknown, fault.Internal},
		{codes.DataLoss, fault.Internal},
		{codes.Unimplemented, fault.Internal},
		{codes.Canceled, fault.Internal},
		{codes.OK, fault.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.code.String(), func(t *testing.T) {
			if got := apierr.DefaultReason(tt.code); got != tt.want {
				t.Errorf("DefaultReason(%v) = %q, want %q", tt.code, got, tt.want)
			}
		})
	}
}

// TestCode: the code each reason is answered with. The gateway chooses the HTTP status by the
// reason; gRPC callers, retries and the RPC metrics see the code.
func TestCode(t *testing.T) {
	tests := []struct {
		reason fault.Reason
		want   codes.Code
	}{
		{fault.InvalidArgument, codes.InvalidArgument},
		{fault.FeatureNotEnabled, codes.InvalidArgument},
		{fault.PayloadTooLarge, codes.InvalidArgument},
		{fault.Unauthenticated, codes.Unauthenticated},
		{fault.InsufficientBalance, codes.FailedPrecondition},
		{fault.BalanceExpired, codes.FailedPrecondition},
		{fault.Conflict, codes.FailedPrecondition},
		{fault.IdempotencyMismatch, codes.FailedPrecondition},
		{fault.PermissionDenied, codes.PermissionDenied},
		{fault.NotFound, codes.NotFound},
		{fault.AlreadyUsed, codes.AlreadyExists},
		{fault.RateLimited, codes.ResourceExhausted},
		{fault.Unavailable, codes.Unavailable},
		{fault.Internal, codes.Internal},
		{"A_REASON_NOBODY_KNOWS", codes.Internal},
	}
	for _, tt := range tests {
		if got := apierr.Code(tt.reason); got != tt.want {
			t.Errorf("Code(%s) = %v, want %v", tt.reason, got, tt.want)
		}
		// The status carries the reason, the field and the message, as the gateway reads them.
		err := apierr.FromFault(&fault.Error{Reason: tt.reason, Field: "f", Msg: "m"})
		if d := apierr.Parse(err); d.Code != tt.want || d.Reason != tt.reason || d.Field != "f" || d.Message != "m" {
			t.Errorf("FromFault(%s) reads back as %+v", tt.reason, d)
		}
	}
}
