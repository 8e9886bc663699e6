package delivery_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/connect/internal/connecttest"
	"github.com/mnvhq/mnv/services/connect/internal/delivery"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/integrations"
	"github.com/mnvhq/mnv/services/connect/internal/profiles"
	"github.com/mnvhq/mnv/services/connect/internal/webhook"
	"github.com/mnvhq/mnv/services/platform/fault"
)

// fakeQueue is an in-memory delivery.Store and delivery.Tx holding due batches. What the
// worker does with a batch is told on events: "finished", "postponed" or "gone" (its
// integration was deleted).
type fakeQueue struct {
	mu        sync.Mutex
	inTx      bool
	due       []domain.Delivery
	its       map[string]domain.Integration
	profiles  map[string]domain.Profile
	finished  []finished
	postponed []string
	events    chan string
}

type finished struct {
	ev      domain.SyncEvent
	retryAt *time.Time
}

func (q *fakeQueue) InTx(ctx context.Context, fn func(ctx context.Context, st delivery.Store) error) error {
	q.mu.Lock()
	q.inTx = true
	q.mu.Unlock()
	defer func() { q.mu.Lock(); q.inTx = false; q.mu.Unlock() }()
	return fn(ctx, q)
}

func (q *fakeQueue) ClaimDeliveries(_ context.Context, n, _ int, _ time.Duration) ([]domain.Delivery, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.inTx {
		return nil, errors.New("claim outside a transaction")
	}
	n = min(n, len(q.due))
	out := slices.Clone(q.due[:n])
	q.due = q.due[n:]
	return out, nil
}

func (q *fakeQueue) GetIntegration(_ context.Context, clientID, id string) (domain.Integration, error) {
	q.mu.Lock()
	it, ok := q.its[id]
	q.mu.Unlock()
	if !ok || it.ClientID != clientID {
		q.events <- "gone"
		return domain.Integration{}, fault.ErrNotFound
	}
	return it, nil
}

func (q *fakeQueue) ProfilesByID(_ context.Context, clientID string, ids []string) ([]domain.Profile, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []domain.Profile
	for _, id := range ids {
		if p, ok := q.profiles[id]; ok && p.ClientID == clientID {
			out = append(out, p)
		}
	}
	return out, nil
}

func (q *fakeQueue) PostponeDelivery(_ context.Context, id string, _ time.Time) error {
	q.mu.Lock()
	q.postponed = append(q.postponed, id)
	q.mu.Unlock()
	q.events <- "postponed"
	return nil
}

func (q *fakeQueue) FinishDelivery(_ context.Context, ev domain.SyncEvent, retryAt *time.Time) error {
	q.mu.Lock()
	q.finished = append(q.finished, finished{ev, retryAt})
	q.mu.Unlock()
	q.events <- "finished"
	return nil
}

// captured is an integrations.Store that keeps the one integration created.
type captured struct {
	integrations.Store
	it domain.Integration
}

func (c *captured) InsertIntegration(_ context.Context, it domain.Integration) (domain.Integration, error) {
	c.it = it
	return it, nil
}

const maxAttempts = 3

// TestWorkerDelivers: one batch is one request with every record still there (matched ones
// only for a matchedOnly integration); the outcome is recorded as a sync event, retried
// (429, 5xx) until the last attempt, failed at once otherwise; a paused integration's batch is
// put back unsent and a deleted one's dropped.
func TestWorkerDelivers(t *testing.T) {
	tests := []struct {
		name        string
		matchedOnly bool
		matched     []bool // one profile each, matched or not
		erased      int    // the first profiles erased since the batch was queued
		answer      int    // the endpoint's status
		attempt     int
		paused      bool
		deleted     bool
		wantEvent   string
		wantRecords int // in the one request; -1: no request
		wantStatus  string
		wantRetry   bool
	}{
		{name: "a batch is one request", matched: []bool{false, false, true}, answer: 204, attempt: 1,
			wantEvent: "finished", wantRecords: 3, wantStatus: domain.SyncSucceeded},
		{name: "matchedOnly sends the matched", matchedOnly: true, matched: []bool{false, true, false}, answer: 200, attempt: 1,
			wantEvent: "finished", wantRecords: 1, wantStatus: domain.SyncSucceeded},
		{name: "matchedOnly, none matched: nothing to send", matchedOnly: true, matched: []bool{false, false}, answer: 200, attempt: 1,
			wantEvent: "finished", wantRecords: -1, wantStatus: domain.SyncSucceeded},
		{name: "erased profiles are not sent", matched: []bool{true, true, true}, erased: 2, answer: 200, attempt: 1,
			wantEvent: "finished", wantRecords: 1, wantStatus: domain.SyncSucceeded},
		{name: "a refusal fails at once", matched: []bool{true}, answer: 400, attempt: 1,
			wantEvent: "finished", wantRecords: 1, wantStatus: domain.SyncFailed},
		{name: "a server error is retried", matched: []bool{true}, answer: 503, attempt: 1,
			wantEvent: "finished", wantRecords: 1, wantStatus: domain.SyncRetrying, wantRetry: true},
		{name: "too many requests is retried", matched: []bool{true}, answer: 429, attempt: 2,
			wantEvent: "finished", wantRecords: 1, wantStatus: domain.SyncRetrying, wantRetry: true},
		{name: "the last attempt fails", matched: []bool{true}, answer: 503, attempt: maxAttempts,
			wantEvent: "finished", wantRecords: 1, wantStatus: domain.SyncFailed},
		{name: "paused: put back unsent", matched: []bool{true}, answer: 200, attempt: 1, paused: true,
			wantEvent: "postponed", wantRecords: -1},
		{name: "deleted: dropped", matched: []bool{true}, answer: 200, attempt: 1, deleted: true,
			wantEvent: "gone", wantRecords: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var bodies [][]map[string]any
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				var recs []map[string]any
				if err := json.Unmarshal(b, &recs); err != nil {
					t.Errorf("body %s: %v", b, err)
				}
				mu.Lock()
				bodies = append(bodies, recs)
				mu.Unlock()
				w.WriteHeader(tt.answer)
			}))
			defer srv.Close()

			vault, keyring := connecttest.Keys(t)
			policy := webhook.Policy{AllowHTTP: true, AllowedNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
			client := uuid.NewString()
			its := &captured{}
			if _, err := integrations.New(its, keyring, policy).Create(context.Background(), client, integrations.CreateRequest{
				DisplayName: "CRM", Type: domain.TypeWebhook, EndpointURL: srv.URL, HTTPMethod: "POST", TriggerEvent: domain.TriggerManual,
				FieldMappings: map[string]string{"mobileNumber": "phone", "id": "id"}, MatchedOnly: &tt.matchedOnly,
			}); err != nil {
				t.Fatal(err)
			}
			it := its.it
			if tt.paused {
				it.Status = domain.IntegrationPaused
			}
			q := &fakeQueue{its: map[string]domain.Integration{}, profiles: map[string]domain.Profile{}, events: make(chan string, 4)}
			if !tt.deleted {
				q.its[it.ID] = it
			}
			d := domain.Delivery{ID: uuid.NewString(), IntegrationID: it.ID, ClientID: client, Trigger: domain.TriggerManual, Attempts: tt.attempt}
			for i, m := range tt.matched {
				id, e164 := uuid.NewString(), fmt.Sprintf("+9715012345%02d", i)
				p := domain.Profile{ID: id, ClientID: client, NumberSealed: profiles.SealNumber(vault, e164, id), NumberMasked: "+97150*****67"}
				if m {
					at := time.Now()
					p.MatchedAt = &at
				}
				if i >= tt.erased {
					q.profiles[id] = p
				}
				d.ProfileIDs = append(d.ProfileIDs, id)
			}
			q.due = []domain.Delivery{d}

			w := delivery.New(q, q, vault, keyring, webhook.NewClient(policy, 5*time.Second), delivery.Config{
				Workers: 2, PerIntegration: 2, Poll: 10 * time.Millisecond, Lease: time.Minute,
				BackoffBase: time.Second, BackoffMax: time.Minute, MaxAttempts: maxAttempts,
			}, zaptest.NewLogger(t))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); w.Run(ctx) }()
			var event string
			select {
			case event = <-q.events:
			case <-time.After(10 * time.Second):
				t.Fatal("the batch was not handled")
			}
			time.Sleep(20 * time.Millisecond) // time for a wrong second step to show
			cancel()
			<-done

			if event != tt.wantEvent || len(q.events) != 0 {
				t.Fatalf("event %q (then %d more), want %q", event, len(q.events), tt.wantEvent)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case tt.wantRecords < 0 && len(bodies) != 0:
				t.Fatalf("%d requests, want none", len(bodies))
			case tt.wantRecords >= 0 && (len(bodies) != 1 || len(bodies[0]) != tt.wantRecords):
				t.Fatalf("requests %v, want one of %d records", bodies, tt.wantRecords)
			}
			for _, rec := range slices.Concat(bodies...) {
				p := q.profiles[fmt.Sprint(rec["id"])]
				if p.ID == "" || tt.matchedOnly && p.MatchedAt == nil {
					t.Errorf("sent %v: erased or unmatched", rec)
				}
				if want, _ := profiles.OpenNumber(vault, p); rec["phone"] != want {
					t.Errorf("sent phone %v, want %s", rec["phone"], want)
				}
			}
			if tt.wantEvent != "finished" {
				if len(q.finished) != 0 {
					t.Errorf("recorded %+v", q.finished)
				}
				return
			}
			f := q.finished[0]
			if f.ev.Status != tt.wantStatus || f.ev.DeliveryID != d.ID || f.ev.Attempt != tt.attempt || f.ev.IntegrationID != it.ID {
				t.Errorf("sync event %+v, want %s of attempt %d", f.ev, tt.wantStatus, tt.attempt)
			}
			if tt.wantRecords >= 0 && (f.ev.HTTPStatus == nil || *f.ev.HTTPStatus != tt.answer || f.ev.RecordCount != tt.wantRecords) {
				t.Errorf("sync event status %v, %d records; want %d, %d", f.ev.HTTPStatus, f.ev.RecordCount, tt.answer, tt.wantRecords)
			}
			if (f.ev.Error != nil) != (tt.wantStatus != domain.SyncSucceeded) {
				t.Errorf("sync event error %v for %s", f.ev.Error, tt.wantStatus)
			}
			if (f.retryAt != nil) != tt.wantRetry || tt.wantRetry && !f.retryAt.After(time.Now()) {
				t.Errorf("retry at %v, want a retry: %v", f.retryAt, tt.wantRetry)
			}
		})
	}
}
