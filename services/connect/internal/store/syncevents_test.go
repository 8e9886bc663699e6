package store_test

import (
	"context"
	"slices"
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
	statuses := []domain.SyncStatus{domain.SyncRetrying, domain.SyncSucceeded, domain.SyncRetrying, domain.SyncSucceeded, domain.SyncSucceeded}
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
		status        *domain.SyncStatus
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

// TestListTotals pages the other lists of a client on a real database: a page holds its rows
// of the whole list, in its order, under the total of the client's rows (another client's not
// counted), past the end too.
func TestListTotals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := store.New(migratedPool(ctx, t))
	clientID, otherID := uuid.NewString(), uuid.NewString()
	for i, c := range []string{clientID, clientID, clientID, otherID} {
		if _, err := st.InsertIntegration(ctx, domain.Integration{
			ID: uuid.NewString(), ClientID: c, DisplayName: "crm", Type: "WEBHOOK", EndpointURL: "https://crm.example.com/",
			HTTPMethod: "POST", SigningSecretSealed: []byte{1}, TriggerEvent: "VERIFIED", FieldMappings: map[string]string{},
			BatchSize: 2, Status: "ACTIVE",
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.InsertWebhookEndpoint(ctx, domain.WebhookEndpoint{
			ID: uuid.NewString(), ClientID: c, URL: "https://hooks.example.com/", Enabled: true,
		}); err != nil {
			t.Fatal(err)
		}
		job := uuid.NewString()
		if err := st.InsertJob(ctx, domain.ImportJob{ID: job, ClientID: c, FileName: "f.csv"}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.QueueJob(ctx, c, job, int64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	// A job still UPLOADING is in no list.
	if err := st.InsertJob(ctx, domain.ImportJob{ID: uuid.NewString(), ClientID: clientID, FileName: "f.csv"}); err != nil {
		t.Fatal(err)
	}
	checkPages(t, "integrations", func(limit, offset int64) (domain.Page[domain.Integration], error) {
		return st.ListIntegrations(ctx, clientID, limit, offset)
	}, func(it domain.Integration) string { return it.ID })
	checkPages(t, "webhook endpoints", func(limit, offset int64) (domain.Page[domain.WebhookEndpoint], error) {
		return st.ListWebhookEndpoints(ctx, clientID, limit, offset)
	}, func(e domain.WebhookEndpoint) string { return e.ID })
	checkPages(t, "import jobs", func(limit, offset int64) (domain.Page[domain.ImportJob], error) {
		return st.ListJobs(ctx, clientID, limit, offset)
	}, func(j domain.ImportJob) string { return j.ID })
}

// checkPages reads a list of 3 rows whole, then its pages from offset 1 and past the end.
func checkPages[T any](t *testing.T, name string, list func(limit, offset int64) (domain.Page[T], error), id func(T) string) {
	t.Helper()
	ids := func(p domain.Page[T]) []string {
		var out []string
		for _, it := range p.Items {
			out = append(out, id(it))
		}
		return out
	}
	all, err := list(10, 0)
	if err != nil || all.Total != 3 || len(all.Items) != 3 {
		t.Fatalf("%s: %d items under a total of %d, %v; want 3 of 3", name, len(all.Items), all.Total, err)
	}
	for _, tt := range []struct {
		limit, offset int64
		want          []string
	}{{2, 1, ids(all)[1:]}, {2, 3, nil}} {
		p, err := list(tt.limit, tt.offset)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := ids(p); p.Total != 3 || !slices.Equal(got, tt.want) {
			t.Errorf("%s from %d: %v under a total of %d; want %v under 3", name, tt.offset, got, p.Total, tt.want)
		}
	}
}
