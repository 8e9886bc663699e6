package server_test

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/grpcserver/statustest"
)

// TestErrorsOnTheWire pins what a caller hears for each error of the service's own rules: the
// gRPC code, the reason the gateway turns into an HTTP status, and the message. The shared
// errors (fault's, money's, auth's) are pinned once, in grpcserver's TestStatus.
func TestErrorsOnTheWire(t *testing.T) {
	statustest.Run(t, []statustest.Case{
		{Name: "first key exists", Err: domain.ErrKeyExists, Code: codes.FailedPrecondition, Reason: fault.Conflict, Msg: "the client already has an active API key; rotate it instead"},
		{Name: "key superseded", Err: domain.ErrKeySuperseded, Code: codes.FailedPrecondition, Reason: fault.Conflict, Msg: domain.ErrKeySuperseded.Error()},
		{Name: "last admin key", Err: domain.ErrLastAdminKey, Code: codes.FailedPrecondition, Reason: fault.Conflict, Msg: "the last ADMIN key cannot be revoked"},
		{Name: "reference reused", Err: domain.ErrReferenceConflict, Code: codes.FailedPrecondition, Reason: fault.Conflict, Msg: "reference already used for a different operation"},
	})
}
