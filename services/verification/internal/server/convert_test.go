package server

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	verificationv1 "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
)

// checkTable fails when a domain value of the type has no API value, or when an API value
// other than UNSPECIFIED is reached by none: either way a state would reach a client as
// UNSPECIFIED, or never.
func checkTable[D comparable, E ~int32](t *testing.T, name string, table enumTable[D, E], values []D, enum protoreflect.EnumDescriptor) {
	t.Helper()
	reached := map[E]D{}
	for _, d := range values {
		e, ok := table[d]
		if !ok || e == 0 {
			t.Errorf("%s: %v has no API value", name, d)
			continue
		}
		if other, dup := reached[e]; dup {
			t.Errorf("%s: %v and %v both read as %v", name, other, d, e)
		}
		reached[e] = d
	}
	if len(table) != len(values) {
		t.Errorf("%s: the table has %d entries, the domain %d values", name, len(table), len(values))
	}
	for i := 0; i < enum.Values().Len(); i++ {
		v := enum.Values().Get(i)
		if v.Number() == 0 {
			continue
		}
		if _, ok := reached[E(v.Number())]; !ok {
			t.Errorf("%s: no domain value reads as %s", name, v.Name())
		}
	}
}

func TestEnumTables(t *testing.T) {
	checkTable(t, "service types", serviceTypes,
		[]operators.Method{operators.MethodHeaderEnrichment, operators.MethodNetworkAPI},
		verificationv1.ServiceType(0).Descriptor())
	checkTable(t, "capture statuses", captureStatuses,
		[]domain.Status{domain.Captured, domain.NoNetworkIdentity, domain.AuthorizationPending},
		verificationv1.CaptureStatus(0).Descriptor())
	checkTable(t, "verification statuses", verificationStatuses,
		[]domain.Status{domain.StatusVerified, domain.StatusNotVerified, domain.StatusUndetermined, domain.StatusExpired},
		verificationv1.VerificationStatus(0).Descriptor())
	checkTable(t, "transaction statuses", transactionStatuses,
		[]domain.Status{domain.TransactionPending, domain.Captured, domain.NoNetworkIdentity, domain.TransactionExpired, domain.AuthorizationPending},
		verificationv1.TransactionStatus(0).Descriptor())

	// Every outcome a client can see is in the verification table.
	for _, s := range []domain.Status{domain.StatusVerified, domain.StatusNotVerified, domain.StatusUndetermined, domain.StatusExpired, domain.StatusPending, domain.StatusRejected} {
		if _, ok := verificationStatuses[s]; ok != domain.IsOutcome(s) {
			t.Errorf("%s: in the table %v, an outcome %v", s, ok, domain.IsOutcome(s))
		}
	}
}
