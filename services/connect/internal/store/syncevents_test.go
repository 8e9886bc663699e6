package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/store"
)

// TestListSyncEvents pages an integration's sync history on a real database: newest first, the
// total of every event the filter matches on every page (past the end too), another
// integration's events never counted.
func TestListSyncEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := migratedPool(ctx, t)
	st := store.New(pool)
	clientID := uuid.NewString()
	integration := func() string {
		it, err := st.InsertIntegration(ctx, domain.Integration{
			ID: uuid.NewString(), ClientID: clientID, DisplayName: "crm", Type: "WEBHOOK", EndpointURL: "https://crm.example.com/",
			HTTPMethod: "POST", SigningSecretSealed: []byte{1}, TriggerEvent: "VERIFIED", FieldMappings: map[string]string{},
			BatchSize: 2, Status: "ACTIVE",
		})
		if err != nil {
			t.Fatal(err)
		}
		return it.ID
	}
	mine, other := integration(), integration()
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	statuses := []string{domain.SyncRetrying, domain.SyncSucceeded, domain.SyncRetrying, domain.SyncSucceeded, domain.SyncSucceeded}
	for i, status := range statuses {
		for _, in := range []string{mine, other} {
			at := base.Add(time.Duration(i) * time.Minute)
			if err := st.FinishDelivery(ctx, domain.SyncEvent{
				ID: uuid.NewString(), IntegrationID: in, ClientID: clientID, DeliveryID: uuid.NewString(), Trigger: "VERIFIED",
				Status: status, RecordCount: i + 1, Attempt: 1, StartedAt: at, FinishedAt: at,
			}, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	retrying := domain.SyncRetrying
	tests := []struct {
		name          string
		status        *string
		limit, offset int64
		wantRecords   []int // RecordCount of each item, in order: newest first
		wantTotal     int64
	}{
		{"first page", nil, 2, 0, []int{5, 4}, 5},
		{"last page", nil, 2, 4, []int{1}, 5},
		{"past the end", nil, 2, 10, nil, 5},
		{"filtered", &retrying, 10, 0, []int{3, 1}, 2},
		{"filtered, past the end", &retrying, 10, 2, nil, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := st.ListSyncEvents(ctx, clientID, mine, tt.status, tt.limit, tt.offset)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, e := range p.Items {
				if e.IntegrationID != mine {
					t.Errorf("an event of integration %s", e.IntegrationID)
				}
				got = append(got, e.RecordCount)
			}
			if p.Total != tt.wantTotal || len(got) != len(tt.wantRecords) {
				t.Fatalf("total %d, items %v; want %d, %v", p.Total, got, tt.wantTotal, tt.wantRecords)
			}
			for i := range got {
				if got[i] != tt.wantRecords[i] {
					t.Fatalf("items %v, want %v", got, tt.wantRecords)
				}
			}
		})
	}
	if p, err := st.ListSyncEvents(ctx, uuid.NewString(), mine, nil, 10, 0); err != nil || p.Total != 0 || len(p.Items) != 0 {
		t.Fatalf("another client's view: %+v, %v", p, err)
	}
}
