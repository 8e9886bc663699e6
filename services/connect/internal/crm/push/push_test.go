package push_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/connect/internal/connecttest"
	"github.com/mnvhq/mnv/services/connect/internal/crm/integrations"
	"github.com/mnvhq/mnv/services/connect/internal/crm/push"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/outbound"
	"github.com/mnvhq/mnv/services/connect/internal/profiles"
	"github.com/mnvhq/mnv/services/connect/internal/store"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/outbox"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/phone"
)

// fixture is a migrated database with what deliveries need: numbers to seal profiles, the
// River queue that stores insert deliveries' jobs into, and an integrations service whose
// policy lets endpoints be local test servers.
type fixture struct {
	pool    *pgxpool.Pool
	vault   *phone.Vault
	keyring *crypto.Keyring
	queue   *jobs.Queue
	its     *integrations.Service
	policy  outbound.Policy
	stores  pg.Stores[push.Store]
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool := connecttest.Pool(t, 16)
	vault, keyring := connecttest.Keys(t)
	q, box := connecttest.Queue(t, pool)
	policy := outbound.Policy{AllowHTTP: true, AllowedNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	open := func(db pg.DB) *store.Store { return store.New(db).WithJobs(q).WithOutbox(box) }
	itStores := pg.NewStores(pool, func(db pg.DB) integrations.Store { return open(db) })
	return &fixture{
		pool: pool, vault: vault, keyring: keyring, queue: q, policy: policy,
		its:    integrations.New(itStores.Pool(), itStores, keyring, policy),
		stores: pg.NewStores(pool, func(db pg.DB) push.Store { return open(db) }),
	}
}

// client makes a client with one profile and one MANUAL integration sending to url.
func (f *fixture) client(t *testing.T, url string) integrations.Created {
	t.Helper()
	ctx := context.Background()
	clientID := uuid.NewString()
	id := uuid.NewString()
	e164 := fmt.Sprintf("+97150%07d", time.Now().UnixNano()%10_000_000)
	if _, err := store.New(f.pool).InsertProfile(ctx, domain.Profile{
		ID: id, ClientID: clientID, NumberSealed: profiles.SealNumber(f.vault, e164, id), NumberHash: f.vault.Hash(e164),
		NumberMasked: phone.Mask(e164), CountryCode: "AE", Source: domain.SourceAPI,
	}); err != nil {
		t.Fatal(err)
	}
	c, err := f.its.Create(ctx, clientID, integrations.CreateRequest{
		DisplayName: "CRM", Type: domain.TypeWebhook, EndpointURL: url, HTTPMethod: "POST", TriggerEvent: domain.TriggerManual,
		FieldMappings: map[string]string{"mobileNumber": "phone"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sync queues n manual syncs of the integration: n batches, each with its job.
func (f *fixture) sync(t *testing.T, it domain.Integration, n int) {
	t.Helper()
	for range n {
		if _, err := f.its.Sync(context.Background(), it.ClientID, it.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// run works the deliveries queue with workers, at most perIntegration of one integration at
// once, until the test ends.
func (f *fixture) run(t *testing.T, workers, perIntegration int, backoff time.Duration) {
	t.Helper()
	w := push.New(push.Config{
		BackoffBase: backoff, BackoffMax: 4 * backoff, Timeout: time.Minute, PausedRecheck: time.Second,
	}, push.Deps{
		Store: f.stores.Pool(), Tx: f.stores, Vault: f.vault, Keyring: f.keyring, Client: outbound.NewClient(f.policy, 10*time.Second),
		Limit: &jobs.KeyLimit{Max: perIntegration, Snooze: 50 * time.Millisecond}, Log: zaptest.NewLogger(t),
	})
	river.AddWorker(f.queue.Workers(), w)
	f.queue.AddQueue(push.Queue, workers)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.queue.Run(ctx, 5*time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// count runs a count query.
func (f *fixture) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// eventually waits up to 30 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 30s", what)
		}
	}
}

// endpoint is a CRM receiver that answers status (204 when 0) after delay, counting requests,
// the most it had in flight at once, and the webhook-ids it saw.
type endpoint struct {
	delay                     time.Duration
	status                    int
	inFlight, maxIn, received atomic.Int32
	first                     chan struct{}
	once                      sync.Once
	mu                        sync.Mutex
	ids                       []string
}

func newEndpoint(delay time.Duration, status int) *endpoint {
	return &endpoint{delay: delay, status: status, first: make(chan struct{})}
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := e.inFlight.Add(1)
	defer e.inFlight.Add(-1)
	for m := e.maxIn.Load(); n > m && !e.maxIn.CompareAndSwap(m, n); m = e.maxIn.Load() {
	}
	select {
	case <-time.After(e.delay):
	case <-r.Context().Done():
		return
	}
	e.mu.Lock()
	e.ids = append(e.ids, r.Header.Get(outbound.IDHeader))
	e.mu.Unlock()
	e.received.Add(1)
	e.once.Do(func() { close(e.first) })
	w.WriteHeader(max(e.status, http.StatusNoContent))
}

// TestSlowEndpointDoesNotDelayOthers: client A's endpoint is slow and A has a backlog; client
// B's one batch, queued after all of A's, is delivered at once, and A never holds more than
// its share of the workers (jobs.KeyLimit snoozes the rest).
func TestSlowEndpointDoesNotDelayOthers(t *testing.T) {
	f := newFixture(t)
	slow, fast := newEndpoint(2*time.Second, 0), newEndpoint(0, 0)
	slowSrv, fastSrv := httptest.NewServer(slow), httptest.NewServer(fast)
	defer slowSrv.Close()
	defer fastSrv.Close()

	a, b := f.client(t, slowSrv.URL).Integration, f.client(t, fastSrv.URL).Integration
	f.sync(t, a, 20)
	f.sync(t, b, 1)

	const perIntegration = 2
	f.run(t, 4, perIntegration, time.Second)
	start := time.Now()
	select {
	case <-fast.first:
	case <-time.After(1500 * time.Millisecond):
		t.Fatalf("B's batch not delivered after %v while A's backlog was in flight", time.Since(start).Round(time.Millisecond))
	}
	if got := slow.received.Load(); got >= 20 {
		t.Fatalf("A's %d batches were all delivered before B's one", got)
	}
	time.Sleep(2500 * time.Millisecond) // a round of A's deliveries ends and the next begins
	if m := slow.maxIn.Load(); m > perIntegration {
		t.Fatalf("A's endpoint had %d deliveries in flight at once, want at most %d", m, perIntegration)
	}
}

// TestRolledBackBatchIsNeverSent: batches queued in a transaction that rolls back leave
// neither a row nor a job, so nothing is sent; the same queued in one that commits is.
func TestRolledBackBatchIsNeverSent(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	gone, kept := newEndpoint(0, 0), newEndpoint(0, 0)
	goneSrv, keptSrv := httptest.NewServer(gone), httptest.NewServer(kept)
	defer goneSrv.Close()
	defer keptSrv.Close()
	a, b := f.client(t, goneSrv.URL).Integration, f.client(t, keptSrv.URL).Integration

	stores := pg.NewStores(f.pool, func(db pg.DB) integrations.Store { return store.New(db).WithJobs(f.queue) })
	errRollback := errors.New("the request failed after queueing")
	err := stores.InTx(ctx, func(ctx context.Context, st integrations.Store) error {
		if n, err := st.EnqueueAll(ctx, a, domain.TriggerManual, nil); err != nil || n != 1 {
			t.Fatalf("EnqueueAll = %d, %v", n, err)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	f.sync(t, b, 1)
	if n := f.count(t, `SELECT count(*) FROM connect.river_job WHERE kind = $1`, push.Kind); n != 1 {
		t.Fatalf("%d delivery jobs, want the committed one", n)
	}
	f.run(t, 2, 2, time.Second)
	select {
	case <-kept.first:
	case <-time.After(10 * time.Second):
		t.Fatal("the committed batch was not delivered")
	}
	eventually(t, "the committed job completed", func() bool {
		return f.count(t, `SELECT count(*) FROM connect.river_job WHERE kind = $1 AND state = 'completed'`, push.Kind) == 1
	})
	if n := gone.received.Load(); n != 0 {
		t.Fatalf("the rolled-back batch was sent %d times", n)
	}
	if n := f.count(t, `SELECT count(*) FROM connect.deliveries WHERE integration_id = $1`, a.ID); n != 0 {
		t.Fatalf("%d rows of the rolled-back batch", n)
	}
}

// TestFailingEndpointGivesUpOnce: an endpoint that always answers 503 gets every attempt of
// the batch under the same webhook-id, each recorded as a sync event; after the last the batch
// is FAILED and exactly one integration.delivery_failed forward job is written with it.
func TestFailingEndpointGivesUpOnce(t *testing.T) {
	f := newFixture(t)
	down := newEndpoint(0, http.StatusServiceUnavailable)
	srv := httptest.NewServer(down)
	defer srv.Close()
	it := f.client(t, srv.URL).Integration
	f.sync(t, it, 1)
	f.run(t, 2, 2, 5*time.Millisecond)

	eventually(t, "the batch FAILED", func() bool {
		return f.count(t, `SELECT count(*) FROM connect.deliveries WHERE integration_id = $1 AND status = 'FAILED'`, it.ID) == 1
	})
	eventually(t, "its job finished", func() bool {
		return f.count(t, `SELECT count(*) FROM connect.river_job WHERE kind = $1 AND finalized_at IS NOT NULL`, push.Kind) == 1
	})
	if n := down.received.Load(); n != outbound.MaxAttempts {
		t.Fatalf("%d attempts, want %d", n, outbound.MaxAttempts)
	}
	var deliveryID string
	if err := f.pool.QueryRow(context.Background(), `SELECT id::text FROM connect.deliveries WHERE integration_id = $1`, it.ID).Scan(&deliveryID); err != nil {
		t.Fatal(err)
	}
	down.mu.Lock()
	for _, id := range down.ids {
		if id != deliveryID {
			t.Errorf("webhook-id %q, want the delivery's %s on every attempt", id, deliveryID)
		}
	}
	down.mu.Unlock()
	if n := f.count(t, `SELECT count(*) FROM connect.sync_events WHERE delivery_id = $1 AND status = 'RETRYING'`, deliveryID); n != outbound.MaxAttempts-1 {
		t.Errorf("%d RETRYING sync events, want %d", n, outbound.MaxAttempts-1)
	}
	if n := f.count(t, `SELECT count(*) FROM connect.sync_events WHERE delivery_id = $1 AND status = 'FAILED' AND attempt = $2`, deliveryID, outbound.MaxAttempts); n != 1 {
		t.Errorf("%d FAILED sync events of the last attempt, want 1", n)
	}
	rows, err := f.pool.Query(context.Background(), `SELECT args FROM connect.river_job WHERE kind = $1`, outbox.Kind)
	if err != nil {
		t.Fatal(err)
	}
	var forwards []outbox.EventArgs
	for rows.Next() {
		var a outbox.Args
		if err := rows.Scan(&a); err != nil {
			t.Fatal(err)
		}
		forwards = append(forwards, a.Events...)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(forwards) != 1 || forwards[0].Type != events.IntegrationDeliveryFailed || forwards[0].ClientID != it.ClientID {
		t.Fatalf("events forwarded %+v, want one %s of the client", forwards, events.IntegrationDeliveryFailed)
	}
	var data events.IntegrationDeliveryFailedData
	if err := json.Unmarshal([]byte(forwards[0].Data), &data); err != nil {
		t.Fatal(err)
	}
	if data.DeliveryID != deliveryID || data.IntegrationID != it.ID || data.Attempts != outbound.MaxAttempts || data.Records != 1 ||
		data.LastStatus == nil || *data.LastStatus != http.StatusServiceUnavailable {
		t.Errorf("event data %+v", data)
	}
}

// TestAdoptsBatchesOfTheLeasingVersion: a batch the version before River left PENDING (with
// attempts made, a lease run out) becomes one job on start, keeping its attempts, and is
// delivered; adopting again queues nothing twice.
func TestAdoptsBatchesOfTheLeasingVersion(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ep := newEndpoint(0, 0)
	srv := httptest.NewServer(ep)
	defer srv.Close()
	it := f.client(t, srv.URL).Integration
	old := uuid.NewString()
	if _, err := f.pool.Exec(ctx, `INSERT INTO connect.deliveries (id, integration_id, client_id, trigger, profile_ids, status, attempts, lease_until)
		SELECT $1, $2, $3, 'MANUAL', array_agg(id), 'PENDING', 3, now() - interval '1 minute' FROM connect.profiles WHERE client_id = $3`,
		old, it.ID, it.ClientID); err != nil {
		t.Fatal(err)
	}
	w := push.New(push.Config{}, push.Deps{
		Store: f.stores.Pool(), Tx: f.stores, Vault: f.vault, Keyring: f.keyring, Limit: &jobs.KeyLimit{Max: 1}, Log: zaptest.NewLogger(t),
	})
	for i, want := range []int{1, 0} {
		if n, err := w.Adopt(ctx); err != nil || n != want {
			t.Fatalf("Adopt #%d = %d, %v; want %d", i+1, n, err, want)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM connect.river_job WHERE kind = $1 AND args->>'delivery_id' = $2
		AND (args->>'prior')::int = 3 AND max_attempts = $3`, push.Kind, old, outbound.MaxAttempts-3); n != 1 {
		t.Fatalf("%d jobs of the adopted batch with its attempts, want 1", n)
	}
	f.run(t, 1, 1, time.Second)
	eventually(t, "the adopted batch SUCCEEDED", func() bool {
		return f.count(t, `SELECT count(*) FROM connect.deliveries WHERE id = $1 AND status = 'SUCCEEDED' AND attempts = 4`, old) == 1
	})
	if n := ep.received.Load(); n != 1 {
		t.Fatalf("sent %d times, want once", n)
	}
}
