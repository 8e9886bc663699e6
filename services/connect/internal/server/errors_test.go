package server_test

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/imports"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/grpcserver/statustest"
)

// TestErrorsOnTheWire pins what a caller hears for each error of the service's own rules: the
// gRPC code, the reason the gateway turns into an HTTP status, and the message. The shared
// errors (fault's, money's, auth's) are pinned once, in grpcserver's TestStatus.
func TestErrorsOnTheWire(t *testing.T) {
	statustest.Run(t, []statustest.Case{
		{Name: "upload too large", Err: imports.ErrTooLarge, Code: codes.InvalidArgument, Reason: fault.PayloadTooLarge, Msg: "the file is larger than 50 MiB"},
		// Was ALREADY_EXISTS with "conflict: " before the message: every CONFLICT is now
		// FAILED_PRECONDITION, as accounts' always were; the HTTP status (409) is the reason's.
		{Name: "profile exists", Err: domain.ErrProfileExists, Code: codes.FailedPrecondition, Reason: fault.Conflict, Msg: "the account already has a profile with this number"},
		{Name: "enrichment in flight", Err: domain.ErrEnrichmentInFlight, Code: codes.FailedPrecondition, Reason: fault.Conflict, Msg: "a request with this Idempotency-Key is still in progress"},
	})
}
