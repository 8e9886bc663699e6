package server

import (
	"testing"

	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/platform/enumtable"
)

func TestEnumTables(t *testing.T) {
	for name, err := range map[string]error{
		"profile sources": enumtable.Check(profileSources,
			[]domain.Source{domain.SourceImport, domain.SourceAPI, domain.SourceVerification},
			connectv1.ProfileSource(0).Descriptor()),
		"import statuses": enumtable.Check(importStatuses,
			[]domain.ImportStatus{domain.ImportQueued, domain.ImportRunning, domain.ImportCompleted, domain.ImportFailed},
			connectv1.ImportStatus(0).Descriptor()),
		"integration statuses": enumtable.Check(integrationStatuses,
			[]domain.IntegrationStatus{domain.IntegrationActive, domain.IntegrationPaused},
			connectv1.IntegrationStatus(0).Descriptor()),
		"sync statuses": enumtable.Check(syncStatuses,
			[]domain.SyncStatus{domain.SyncSucceeded, domain.SyncFailed, domain.SyncRetrying},
			connectv1.SyncStatus(0).Descriptor()),
		"disabled reasons": enumtable.Check(disabledReasons,
			[]domain.DisabledReason{domain.WebhookDisabledByClient, domain.WebhookDisabledByOperator, domain.WebhookDisabledFailing},
			connectv1.WebhookDisabledReason(0).Descriptor()),
		"delivery statuses": enumtable.Check(deliveryStatuses,
			[]domain.DeliveryStatus{domain.DeliveryPending, domain.DeliverySucceeded, domain.DeliveryFailed, domain.DeliveryCancelled},
			connectv1.WebhookDeliveryStatus(0).Descriptor()),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := disabledReasons.Enum(""); got != 0 {
		t.Errorf("an enabled endpoint's reason reads as %v, want UNSPECIFIED (null)", got)
	}
}
