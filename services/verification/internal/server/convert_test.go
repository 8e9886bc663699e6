package server

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/mnvhq/mnv/services/platform/enumtable"

	verificationv1 "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
)

// check fails t when table is not exactly the type's values and the enum's.
func check[D comparable, E ~int32](t *testing.T, name string, table enumtable.Table[D, E], values []D, enum protoreflect.EnumDescriptor) {
	t.Helper()
	if err := enumtable.Check(table, values, enum); err != nil {
		t.Errorf("%s: %v", name, err)
	}
}

func TestEnumTables(t *testing.T) {
	check(t, "service types", serviceTypes,
		[]operators.Method{operators.MethodHeaderEnrichment, operators.MethodNetworkAPI},
		verificationv1.ServiceType(0).Descriptor())
	check(t, "capture statuses", captureStatuses,
		[]domain.Status{domain.Captured, domain.NoNetworkIdentity, domain.AuthorizationPending},
		verificationv1.CaptureStatus(0).Descriptor())
	check(t, "verification statuses", verificationStatuses,
		[]domain.Status{domain.StatusVerified, domain.StatusNotVerified, domain.StatusUndetermined, domain.StatusExpired},
		verificationv1.VerificationStatus(0).Descriptor())
	check(t, "transaction statuses", transactionStatuses,
		[]domain.Status{domain.TransactionPending, domain.Captured, domain.NoNetworkIdentity, domain.TransactionExpired, domain.AuthorizationPending},
		verificationv1.TransactionStatus(0).Descriptor())

	// Every outcome a client can see is in the verification table.
	for _, s := range []domain.Status{domain.StatusVerified, domain.StatusNotVerified, domain.StatusUndetermined, domain.StatusExpired, domain.StatusPending, domain.StatusRejected} {
		if _, ok := verificationStatuses.Domain(verificationStatuses.Enum(s)); ok != domain.IsOutcome(s) {
			t.Errorf("%s: in the table %v, an outcome %v", s, ok, domain.IsOutcome(s))
		}
	}
}
