package push_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/connect/internal/connecttest"
	"github.com/mnvhq/mnv/services/connect/internal/crm/integrations"
	"github.com/mnvhq/mnv/services/connect/internal/crm/push"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/outbound"
	"github.com/mnvhq/mnv/services/connect/internal/profiles"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/jobs"
)

// fakeQueue is an in-memory push.Store and push.Tx holding one batch. Events emitted
// count once their transaction commits.
type fakeQueue struct {
	mu        sync.Mutex
	inTx      bool
	batches   map[string]domain.Delivery
	its       map[string]domain.Integration
	profiles  map[string]domain.Profile
	finished  []finished
	emitted   []events.Event
	pending   []events.Event
	failedTxs int
	// down makes reading a batch fail, as with the database away.
	down bool
}

type finished struct {
	ev   domain.SyncEvent
	done bool
}

func (q *fakeQueue) InTx(ctx context.Context, fn func(ctx context.Context, st push.Store) error) error {
	q.mu.Lock()
	q.inTx, q.pending = true, nil
	q.mu.Unlock()
	err := fn(ctx, q)
	q.mu.Lock()
	defer q.mu.Unlock()
	if err == nil {
		q.emitted = append(q.emitted, q.pending...)
	} else {
		q.failedTxs++
	}
	q.inTx, q.pending = false, nil
	return err
}

func (q *fakeQueue) GetDelivery(_ context.Context, clientID, id string) (domain.Delivery, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.down {
		return domain.Delivery{}, errors.New("connection refused")
	}
	d, ok := q.batches[id]
	if !ok || d.ClientID != clientID {
		return domain.Delivery{}, fault.ErrNotFound
	}
	return d, nil
}

func (q *fakeQueue) GetIntegration(_ context.Context, clientID, id string) (domain.Integration, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	it, ok := q.its[id]
	if !ok || it.ClientID != clientID {
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

func (q *fakeQueue) FinishDelivery(_ context.Context, ev domain.SyncEvent, done bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.inTx {
		return errors.New("finish outside a transaction")
	}
	q.finished = append(q.finished, finished{ev, done})
	return nil
}

func (q *fakeQueue) Emit(_ context.Context, evs ...events.Event) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.inTx {
		return errors.New("emit outside a transaction")
	}
	q.pending = append(q.pending, evs...)
	return nil
}

func (q *fakeQueue) AdoptDeliveries(context.Context) (int, error) { return 0, nil }

// captured is an integrations.Store that keeps the one integration created.
type captured struct {
	integrations.Store
	it domain.Integration
}

func (c *captured) InsertIntegration(_ context.Context, it domain.Integration) (domain.Integration, error) {
	c.it = it
	return it, nil
}

// request is what the endpoint received.
type request struct {
	records []map[string]any
	header  http.Header
	body    []byte
}

// TestWorkerDelivers: one job is one request with every record still there (matched ones only
// for a matchedOnly integration), signed so that the integration's webhook secret verifies it
// with the delivery id; the outcome is recorded as a sync event and told to River: done, a
// retry (429, 5xx) until the last attempt, or given up (a cancel) with one
// integration.delivery_failed event in the transaction of the FAILED status. A paused
// integration's batch is snoozed unsent; a deleted or finished batch is done, unsent.
func TestWorkerDelivers(t *testing.T) {
	const maxAttempts = 3
	tests := []struct {
		name        string
		matchedOnly bool
		matched     []bool // one profile each, matched or not
		erased      int    // the first profiles erased since the batch was queued
		answer      int    // the endpoint's status
		attempt     int    // River's attempt of the job
		prior       int    // attempts made before the batch became a job
		paused      bool
		deleted     bool // the integration, with its batches
		finished    bool // the batch was finished by an earlier run
		down        bool // the database fails
		wantRecords int  // in the one request; -1: no request
		wantStatus  domain.SyncStatus
		wantRiver   string // "done", "retry", "cancel", "snooze"
	}{
		{name: "a batch is one request", matched: []bool{false, false, true}, answer: 204, attempt: 1,
			wantRecords: 3, wantStatus: domain.SyncSucceeded, wantRiver: "done"},
		{name: "matchedOnly sends the matched", matchedOnly: true, matched: []bool{false, true, false}, answer: 200, attempt: 1,
			wantRecords: 1, wantStatus: domain.SyncSucceeded, wantRiver: "done"},
		{name: "matchedOnly, none matched: nothing to send", matchedOnly: true, matched: []bool{false, false}, answer: 200, attempt: 1,
			wantRecords: -1, wantStatus: domain.SyncSucceeded, wantRiver: "done"},
		{name: "erased profiles are not sent", matched: []bool{true, true, true}, erased: 2, answer: 200, attempt: 1,
			wantRecords: 1, wantStatus: domain.SyncSucceeded, wantRiver: "done"},
		{name: "a refusal fails at once", matched: []bool{true}, answer: 400, attempt: 1,
			wantRecords: 1, wantStatus: domain.SyncFailed, wantRiver: "cancel"},
		{name: "a server error is retried", matched: []bool{true}, answer: 503, attempt: 1,
			wantRecords: 1, wantStatus: domain.SyncRetrying, wantRiver: "retry"},
		{name: "too many requests is retried", matched: []bool{true}, answer: 429, attempt: 2,
			wantRecords: 1, wantStatus: domain.SyncRetrying, wantRiver: "retry"},
		{name: "the last attempt fails", matched: []bool{true}, answer: 503, attempt: maxAttempts,
			wantRecords: 1, wantStatus: domain.SyncFailed, wantRiver: "cancel"},
		{name: "an adopted batch counts its earlier attempts", matched: []bool{true}, answer: 503, attempt: 1, prior: 5,
			wantRecords: 1, wantStatus: domain.SyncRetrying, wantRiver: "retry"},
		{name: "paused: snoozed unsent", matched: []bool{true}, answer: 200, attempt: 1, paused: true,
			wantRecords: -1, wantRiver: "snooze"},
		{name: "deleted: dropped", matched: []bool{true}, answer: 200, attempt: 1, deleted: true,
			wantRecords: -1, wantRiver: "done"},
		{name: "finished before: not sent again", matched: []bool{true}, answer: 200, attempt: 2, finished: true,
			wantRecords: -1, wantRiver: "done"},
		{name: "database away: retried", matched: []bool{true}, answer: 200, attempt: 1, down: true,
			wantRecords: -1, wantRiver: "retry"},
		{name: "database away on the last attempt: kept, not discarded", matched: []bool{true}, answer: 200, attempt: maxAttempts, down: true,
			wantRecords: -1, wantRiver: "snooze"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var reqs []request
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				var recs []map[string]any
				if err := json.Unmarshal(b, &recs); err != nil {
					t.Errorf("body %s: %v", b, err)
				}
				mu.Lock()
				reqs = append(reqs, request{recs, r.Header.Clone(), b})
				mu.Unlock()
				w.WriteHeader(tt.answer)
			}))
			defer srv.Close()

			vault, keyring := connecttest.Keys(t)
			policy := outbound.Policy{AllowHTTP: true, AllowedNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
			client := uuid.NewString()
			its := &captured{}
			created, err := integrations.New(its, nil, keyring, policy).Create(context.Background(), client, integrations.CreateRequest{
				DisplayName: "CRM", Type: domain.TypeWebhook, EndpointURL: srv.URL, HTTPMethod: "POST", TriggerEvent: domain.TriggerManual,
				FieldMappings: map[string]string{"mobileNumber": "phone", "id": "id"}, MatchedOnly: &tt.matchedOnly,
			})
			if err != nil {
				t.Fatal(err)
			}
			it := its.it
			if tt.paused {
				it.Status = domain.IntegrationPaused
			}
			q := &fakeQueue{batches: map[string]domain.Delivery{}, its: map[string]domain.Integration{}, profiles: map[string]domain.Profile{}, down: tt.down}
			if !tt.deleted {
				q.its[it.ID] = it
			}
			d := domain.Delivery{ID: uuid.NewString(), IntegrationID: it.ID, ClientID: client, Trigger: domain.TriggerManual, Status: domain.DeliveryPending}
			if tt.finished {
				d.Status = domain.DeliverySucceeded
			}
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
			if !tt.deleted {
				q.batches[d.ID] = d
			}

			w := push.New(push.Config{
				BackoffBase: time.Second, BackoffMax: time.Minute, Timeout: time.Minute, PausedRecheck: time.Minute,
			}, push.Deps{
				Store: q, Tx: q, Vault: vault, Keyring: keyring, Client: outbound.NewClient(policy, 5*time.Second),
				Limit: &jobs.KeyLimit{Max: 2}, Log: zaptest.NewLogger(t),
			})
			args := push.Args{DeliveryID: d.ID, IntegrationID: it.ID, ClientID: client, Prior: tt.prior}
			job := &river.Job[push.Args]{JobRow: &rivertype.JobRow{Attempt: tt.attempt, MaxAttempts: maxAttempts}, Args: args}
			werr := w.Work(context.Background(), job)

			var snooze *rivertype.JobSnoozeError
			var cancel *rivertype.JobCancelError
			gotRiver := "retry"
			switch {
			case werr == nil:
				gotRiver = "done"
			case errors.As(werr, &snooze):
				gotRiver = "snooze"
			case errors.As(werr, &cancel):
				gotRiver = "cancel"
			}
			if gotRiver != tt.wantRiver {
				t.Fatalf("Work = %v (%s), want %s", werr, gotRiver, tt.wantRiver)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case tt.wantRecords < 0 && len(reqs) != 0:
				t.Fatalf("%d requests, want none", len(reqs))
			case tt.wantRecords >= 0 && (len(reqs) != 1 || len(reqs[0].records) != tt.wantRecords):
				t.Fatalf("requests %v, want one of %d records", reqs, tt.wantRecords)
			}
			for _, r := range reqs {
				for _, rec := range r.records {
					p := q.profiles[fmt.Sprint(rec["id"])]
					if p.ID == "" || tt.matchedOnly && p.MatchedAt == nil {
						t.Errorf("sent %v: erased or unmatched", rec)
					}
					if want, _ := profiles.OpenNumber(vault, p); rec["phone"] != want {
						t.Errorf("sent phone %v, want %s", rec["phone"], want)
					}
				}
				verifyStandard(t, created.WebhookSecret, d.ID, r)
			}
			if tt.wantStatus == "" {
				if len(q.finished) != 0 || len(q.emitted) != 0 {
					t.Errorf("recorded %+v, emitted %v", q.finished, q.emitted)
				}
				return
			}
			if len(q.finished) != 1 {
				t.Fatalf("recorded %+v, want one attempt", q.finished)
			}
			f := q.finished[0]
			if f.ev.Status != tt.wantStatus || f.ev.DeliveryID != d.ID || f.ev.Attempt != tt.attempt+tt.prior || f.ev.IntegrationID != it.ID {
				t.Errorf("sync event %+v, want %s of attempt %d", f.ev, tt.wantStatus, tt.attempt+tt.prior)
			}
			if f.done != (tt.wantStatus != domain.SyncRetrying) {
				t.Errorf("batch done: %v after %s", f.done, tt.wantStatus)
			}
			if tt.wantRecords >= 0 && (f.ev.HTTPStatus == nil || *f.ev.HTTPStatus != tt.answer || f.ev.RecordCount != tt.wantRecords) {
				t.Errorf("sync event status %v, %d records; want %d, %d", f.ev.HTTPStatus, f.ev.RecordCount, tt.answer, tt.wantRecords)
			}
			if (f.ev.Error != nil) != (tt.wantStatus != domain.SyncSucceeded) {
				t.Errorf("sync event error %v for %s", f.ev.Error, tt.wantStatus)
			}
			if tt.wantStatus != domain.SyncFailed {
				if len(q.emitted) != 0 {
					t.Errorf("emitted %v for %s", q.emitted, tt.wantStatus)
				}
				return
			}
			if len(q.emitted) != 1 || q.emitted[0].Type != events.IntegrationDeliveryFailed || q.emitted[0].ClientID != client {
				t.Fatalf("emitted %v, want one %s of the client", q.emitted, events.IntegrationDeliveryFailed)
			}
			var data events.IntegrationDeliveryFailedData
			if err := json.Unmarshal(q.emitted[0].Data, &data); err != nil {
				t.Fatal(err)
			}
			if data.IntegrationID != it.ID || data.DeliveryID != d.ID || data.Attempts != tt.attempt+tt.prior || data.Records != tt.wantRecords ||
				data.LastStatus == nil || *data.LastStatus != tt.answer || data.LastError == nil {
				t.Errorf("event data %+v", data)
			}
		})
	}
}

// verifyStandard checks a request's Standard Webhooks headers with the integration's webhook
// secret, as a receiver's library does: the message id is the delivery id, and signed.
func verifyStandard(t *testing.T, secret, deliveryID string, r request) {
	t.Helper()
	key, err := outbound.ParseSecret(secret)
	if err != nil {
		t.Fatalf("webhook secret %q: %v", secret, err)
	}
	id, ts, sig := r.header.Get("webhook-id"), r.header.Get("webhook-timestamp"), r.header.Get("webhook-signature")
	if id != deliveryID {
		t.Errorf("webhook-id %q, want the delivery id %s", id, deliveryID)
	}
	if err := outbound.VerifyStandard(key, id, ts, sig, r.body, time.Now(), 0); err != nil {
		t.Errorf("webhook-signature does not verify with the webhook secret: %v", err)
	}
	if err := outbound.VerifyStandard(key, uuid.NewString(), ts, sig, r.body, time.Now(), 0); err == nil {
		t.Error("webhook-signature verifies under a fresh id")
	}
	if r.header.Get("X-Mnv-Signature") == "" || r.header.Get("X-Mnv-Delivery-Id") != deliveryID {
		t.Errorf("the deprecated headers are gone before their window: %v", r.header)
	}
}
