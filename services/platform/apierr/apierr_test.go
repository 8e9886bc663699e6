package apierr_test

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mnvhq/mnv/services/platform/apierr"
)

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want apierr.Details
	}{
		{
			"New",
			apierr.New(codes.NotFound, apierr.NotFound, "no such client"),
			apierr.Details{Code: codes.NotFound, Reason: apierr.NotFound, Message: "no such client"},
		},
		{
			"New with a reason other than the code's default",
			apierr.New(codes.FailedPrecondition, apierr.InsufficientBalance, "balance too low"),
			apierr.Details{Code: codes.FailedPrecondition, Reason: apierr.InsufficientBalance, Message: "balance too low"},
		},
		{
			"Field",
			apierr.Field(codes.FailedPrecondition, apierr.IdempotencyMismatch, "Idempotency-Key", "reused"),
			apierr.Details{Code: codes.FailedPrecondition, Reason: apierr.IdempotencyMismatch, Field: "Idempotency-Key", Message: "reused"},
		},
		{
			"Field with empty field is New",
			apierr.Field(codes.PermissionDenied, apierr.FeatureNotEnabled, "", "not enabled"),
			apierr.Details{Code: codes.PermissionDenied, Reason: apierr.FeatureNotEnabled, Message: "not enabled"},
		},
		{
			"Invalid",
			apierr.Invalid("secretKey", "must not be empty"),
			apierr.Details{Code: codes.InvalidArgument, Reason: apierr.InvalidArgument, Field: "secretKey", Message: "must not be empty"},
		},
		{
			"wrapped with %w",
			fmt.Errorf("store: %w", apierr.Invalid("page", "bad page")),
			apierr.Details{Code: codes.InvalidArgument, Reason: apierr.InvalidArgument, Field: "page"},
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
		{"plain error", errors.New("boom"), apierr.Details{Code: codes.Unknown, Reason: apierr.Internal, Message: "boom"}},
		{"status NotFound", status.Error(codes.NotFound, "gone"), apierr.Details{Code: codes.NotFound, Reason: apierr.NotFound, Message: "gone"}},
		{"status InvalidArgument", status.Error(codes.InvalidArgument, "bad"), apierr.Details{Code: codes.InvalidArgument, Reason: apierr.InvalidArgument, Message: "bad"}},
		{"status Unavailable", status.Error(codes.Unavailable, "down"), apierr.Details{Code: codes.Unavailable, Reason: apierr.Unavailable, Message: "down"}},
		{"status Internal", status.Error(codes.Internal, "oops"), apierr.Details{Code: codes.Internal, Reason: apierr.Internal, Message: "oops"}},
		{"ErrorInfo of another domain ignored", foreign.Err(), apierr.Details{Code: codes.PermissionDenied, Reason: apierr.PermissionDenied, Message: "other domain"}},
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
		want apierr.Reason
	}{
		{codes.InvalidArgument, apierr.InvalidArgument},
		{codes.OutOfRange, apierr.InvalidArgument},
		{codes.FailedPrecondition, apierr.InvalidArgument},
		{codes.Unauthenticated, apierr.Unauthenticated},
		{codes.PermissionDenied, apierr.PermissionDenied},
		{codes.NotFound, apierr.NotFound},
		{codes.AlreadyExists, apierr.Conflict},
		{codes.Aborted, apierr.Conflict},
		{codes.ResourceExhausted, apierr.RateLimited},
		{codes.Unavailable, apierr.Unavailable},
		{codes.DeadlineExceeded, apierr.Unavailable},
		{codes.Internal, apierr.Internal},
		{codes.Unknown, apierr.Internal},
		{codes.DataLoss, apierr.Internal},
		{codes.Unimplemented, apierr.Internal},
		{codes.Canceled, apierr.Internal},
		{codes.OK, apierr.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.code.String(), func(t *testing.T) {
			if got := apierr.DefaultReason(tt.code); got != tt.want {
				t.Errorf("DefaultReason(%v) = %q, want %q", tt.code, got, tt.want)
			}
		})
	}
}
