package server

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	connectv1 "github.com/mnvhq/mnv/proto/gen/mnv/connect/v1"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
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
	checkTable(t, "profile sources", profileSources,
		[]domain.Source{domain.SourceImport, domain.SourceAPI, domain.SourceVerification},
		connectv1.ProfileSource(0).Descriptor())
	checkTable(t, "import statuses", importStatuses,
		[]domain.ImportStatus{domain.ImportQueued, domain.ImportRunning, domain.ImportCompleted, domain.ImportFailed},
		connectv1.ImportStatus(0).Descriptor())
	checkTable(t, "integration statuses", integrationStatuses,
		[]domain.IntegrationStatus{domain.IntegrationActive, domain.IntegrationPaused},
		connectv1.IntegrationStatus(0).Descriptor())
	checkTable(t, "sync statuses", syncStatuses,
		[]domain.SyncStatus{domain.SyncSucceeded, domain.SyncFailed, domain.SyncRetrying},
		connectv1.SyncStatus(0).Descriptor())
	checkTable(t, "disabled reasons", disabledReasons,
		[]domain.DisabledReason{domain.WebhookDisabledByClient, domain.WebhookDisabledByOperator, domain.WebhookDisabledFailing},
		connectv1.WebhookDisabledReason(0).Descriptor())
	checkTable(t, "delivery statuses", deliveryStatuses,
		[]domain.DeliveryStatus{domain.DeliveryPending, domain.DeliverySucceeded, domain.DeliveryFailed, domain.DeliveryCancelled},
		connectv1.WebhookDeliveryStatus(0).Descriptor())
	if got := disabledReasons.of(""); got != 0 {
		t.Errorf("an enabled endpoint's reason reads as %v, want UNSPECIFIED (null)", got)
	}
}
