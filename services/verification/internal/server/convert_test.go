package server

import (
	"testing"

	verificationv1 "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
	"github.com/mnvhq/mnv/services/platform/enumtable"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
)

func TestEnumTables(t *testing.T) {
	for name, err := range map[string]error{
		"service types": enumtable.Check(serviceTypes,
			[]operators.Method{operators.MethodHeaderEnrichment, operators.MethodNetworkAPI},
			verificationv1.ServiceType(0).Descriptor()),
		"capture statuses": enumtable.Check(captureStatuses,
			[]domain.Status{domain.Captured, domain.NoNetworkIdentity, domain.AuthorizationPending},
			verificationv1.CaptureStatus(0).Descriptor()),
		"verification statuses": enumtable.Check(verificationStatuses,
			[]domain.Status{domain.StatusVerified, domain.StatusNotVerified, domain.StatusUndetermined, domain.StatusExpired},
			verificationv1.VerificationStatus(0).Descriptor()),
		"transaction statuses": enumtable.Check(transactionStatuses,
			[]domain.Status{domain.TransactionPending, domain.Captured, domain.NoNetworkIdentity, domain.TransactionExpired, domain.AuthorizationPending},
			verificationv1.TransactionStatus(0).Descriptor()),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	// Every outcome a client can see is in the verification table.
	for _, s := range []domain.Status{domain.StatusVerified, domain.StatusNotVerified, domain.StatusUndetermined, domain.StatusExpired, domain.StatusPending, domain.StatusRejected} {
		if _, ok := verificationStatuses.Domain(verificationStatuses.Enum(s)); ok != domain.IsOutcome(s) {
			t.Errorf("%s: in the table %v, an outcome %v", s, ok, domain.IsOutcome(s))
		}
	}
}
