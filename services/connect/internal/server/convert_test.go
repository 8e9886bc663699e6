package server

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/mnvhq/mnv/services/platform/enumtable"

	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
)

// check fails t when table is not exactly the type's values and the enum's.
func check[D comparable, E ~int32](t *testing.T, name string, table enumtable.Table[D, E], values []D, enum protoreflect.EnumDescriptor) {
	t.Helper()
	if err := enumtable.Check(table, values, enum); err != nil {
		t.Errorf("%s: %v", name, err)
	}
}

func TestEnumTables(t *testing.T) {
	check(t, "profile sources", profileSources,
		[]domain.Source{domain.SourceImport, domain.SourceAPI, domain.SourceVerification},
		connectv1.ProfileSource(0).Descriptor())
	check(t, "import statuses", importStatuses,
		[]domain.ImportStatus{domain.ImportQueued, domain.ImportRunning, domain.ImportCompleted, domain.ImportFailed},
		connectv1.ImportStatus(0).Descriptor())
	check(t, "integration statuses", integrationStatuses,
		[]domain.IntegrationStatus{domain.IntegrationActive, domain.IntegrationPaused},
		connectv1.IntegrationStatus(0).Descriptor())
	check(t, "sync statuses", syncStatuses,
		[]domain.SyncStatus{domain.SyncSucceeded, domain.SyncFailed, domain.SyncRetrying},
		connectv1.SyncStatus(0).Descriptor())
	check(t, "disabled reasons", disabledReasons,
		[]domain.DisabledReason{domain.WebhookDisabledByClient, domain.WebhookDisabledByOperator, domain.WebhookDisabledFailing},
		connectv1.WebhookDisabledReason(0).Descriptor())
	check(t, "delivery statuses", deliveryStatuses,
		[]domain.DeliveryStatus{domain.DeliveryPending, domain.DeliverySucceeded, domain.DeliveryFailed, domain.DeliveryCancelled},
		connectv1.WebhookDeliveryStatus(0).Descriptor())
	if got := disabledReasons.Enum(""); got != 0 {
		t.Errorf("an enabled endpoint's reason reads as %v, want UNSPECIFIED (null)", got)
	}
}
