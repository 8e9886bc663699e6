package server_test

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/grpcserver/statustest"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
)

// TestErrorsOnTheWire pins what a caller hears for each error of the service's own rules: the
// gRPC code, the reason the gateway turns into an HTTP status, and the message. The shared
// errors (fault's, money's, auth's) are pinned once, in grpcserver's TestStatus.
func TestErrorsOnTheWire(t *testing.T) {
	statustest.Run(t, []statustest.Case{
		{Name: "number not kept", Err: domain.ErrNumberNotKept, Code: codes.NotFound, Reason: fault.NotFound, Msg: domain.ErrNumberNotKept.Error()},
		{Name: "blob used by a verification", Err: domain.UsedBy("v-1"), Code: codes.AlreadyExists, Reason: fault.AlreadyUsed, Msg: "this sealed session was already verified, by verification v-1"},
		{Name: "already used", Err: domain.ErrAlreadyUsed, Code: codes.AlreadyExists, Reason: fault.AlreadyUsed, Msg: "this sealed session or transaction was already used"},
		{Name: "origin not allowed", Err: domain.ErrOriginNotAllowed, Code: codes.PermissionDenied, Reason: fault.PermissionDenied, Msg: "this page's origin is not allowed to capture the account's transactions"},
	})
}
