package envelope

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mnvhq/mnv/services/platform/apierr"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/requestid"
)

func TestStatusName(t *testing.T) {
	for code, want := range map[int]string{
		200: "OK", 202: "ACCEPTED", 400: "BAD_REQUEST", 401: "UNAUTHORIZED", 402: "PAYMENT_REQUIRED",
		403: "FORBIDDEN", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 409: "CONFLICT", 413: "PAYLOAD_TOO_LARGE",
		422: "UNPROCESSABLE_ENTITY", 429: "TOO_MANY_REQUESTS", 500: "INTERNAL_SERVER_ERROR", 503: "SERVICE_UNAVAILABLE",
	} {
		if got := StatusName(code); got != want {
			t.Errorf("StatusName(%d) = %q, want %q", code, got, want)
		}
	}
}

func TestFromErr(t *testing.T) {
	ctx := requestid.With(context.Background(), "req-1")
	tests := []struct {
		name        string
		err         error
		wantStatus  int
		wantCode    string
		wantField   string
		wantMessage string
	}{
		{"invalid field", apierr.Invalid("name", "too long"), 400, "INVALID_ARGUMENT", "name", "too long"},
		{"feature", apierr.New(codes.InvalidArgument, fault.FeatureNotEnabled, "no"), 400, "FEATURE_NOT_ENABLED", "", "no"},
		{"balance", apierr.New(codes.FailedPrecondition, fault.InsufficientBalance, "poor"), 402, "INSUFFICIENT_BALANCE", "", "poor"},
		{"expired", apierr.New(codes.FailedPrecondition, fault.BalanceExpired, "late"), 402, "BALANCE_EXPIRED", "", "late"},
		{"already used", apierr.New(codes.FailedPrecondition, fault.AlreadyUsed, "used"), 409, "ALREADY_USED", "", "used"},
		{"mismatch", apierr.New(codes.FailedPrecondition, fault.IdempotencyMismatch, "other body"), 422, "IDEMPOTENCY_MISMATCH", "", "other body"},
		{"rate", apierr.New(codes.ResourceExhausted, fault.RateLimited, "slow down"), 429, "RATE_LIMITED", "", "slow down"},
		{"plain not found", status.Error(codes.NotFound, "x"), 404, "NOT_FOUND", "", "x"},
		{"unknown field", status.Error(codes.InvalidArgument, `proto: (line 1:2): unknown field "foo"`), 400, "INVALID_ARGUMENT", "foo", `unknown field "foo"`},
		{"duplicate key", status.Error(codes.InvalidArgument, `duplicate field "fieldMappings.e\"mail"`), 400, "INVALID_ARGUMENT", `fieldMappings.e"mail`, `duplicate field "fieldMappings.e\"mail"`},
		{"duplicate field from protojson", status.Error(codes.InvalidArgument, `proto: (line 1:24): duplicate field "secret_key"`), 400, "INVALID_ARGUMENT", "secret_key", `duplicate field "secret_key"`},
		{"bad value", status.Error(codes.InvalidArgument, `invalid value for field "items[0].role": expected one of ADMIN, MEMBER; got "unknown field \"x\""`), 400, "INVALID_ARGUMENT", "items[0].role", `invalid value for field "items[0].role": expected one of ADMIN, MEMBER; got "unknown field \"x\""`},
		{"protojson's echo is cut", status.Error(codes.InvalidArgument, `proto: (line 1:9): invalid value for bytes field blob: "`+strings.Repeat("A", 5000)+`"`), 400, "INVALID_ARGUMENT", "blob", `invalid value "` + strings.Repeat("A", 39) + "…" + ` for field blob`},
		{"malformed, with protojson's no-break space", status.Error(codes.InvalidArgument, "proto:\u00a0unexpected EOF"), 400, "INVALID_ARGUMENT", "", "malformed JSON body: unexpected EOF"},
		{"bad query", status.Error(codes.InvalidArgument, `parsing field "size": strconv.ParseInt: parsing "abc": invalid syntax`), 400, "INVALID_ARGUMENT", "size", "invalid value for query parameter size"},
		{"internal hides details", status.Error(codes.Internal, "pq: relation does not exist"), 500, "INTERNAL", "", "the service could not complete the request (request id req-1)"},
		{"backend down", status.Error(codes.Unavailable, "connection refused 10.0.0.1"), 503, "UNAVAILABLE", "", "the service is temporarily unavailable, try again (request id req-1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := FromErr(ctx, tt.err)
			if e.Status != tt.wantStatus || e.Code != tt.wantCode || e.Field != tt.wantField || e.Message != tt.wantMessage {
				t.Fatalf("got %+v, want %d %s %q %q", e, tt.wantStatus, tt.wantCode, tt.wantField, tt.wantMessage)
			}
			if http.StatusText(e.Status) == "" {
				t.Fatal("not an HTTP status")
			}
		})
	}
}
