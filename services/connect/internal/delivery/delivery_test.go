package delivery_test

import (
	"context"
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
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/connect/internal/connecttest"
	"github.com/mnvhq/mnv/services/connect/internal/delivery"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/integrations"
	"github.com/mnvhq/mnv/services/connect/internal/profiles"
	"github.com/mnvhq/mnv/services/connect/internal/store"
	"github.com/mnvhq/mnv/services/connect/internal/webhook"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/phone"
)

// fixture is a migrated database with what deliveries need: numbers to seal profiles and an
// integrations service whose policy lets endpoints be local test servers.
type fixture struct {
	pool    *pgxpool.Pool
	vault   *phone.Vault
	keyring *crypto.Keyring
	its     *integrations.Service
	policy  webhook.Policy
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool := connecttest.Pool(t, 16)
	vault, keyring := connecttest.Keys(t)
	policy := webhook.Policy{AllowHTTP: true, AllowedNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	return &fixture{pool: pool, vault: vault, keyring: keyring, its: integrations.New(store.New(pool), keyring, policy), policy: policy}
}

// client makes a client with one profile and one MANUAL integration sending to url.
func (f *fixture) client(t *testing.T, url string) domain.Integration {
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
	return c.Integration
}

// queue adds n batches of the integration's profiles.
func (f *fixture) queue(t *testing.T, it domain.Integration, n int) {
	t.Helper()
	for range n {
		if _, err := store.New(f.pool).EnqueueAll(context.Background(), it, domain.TriggerManual, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// endpoint is a CRM receiver that answers after delay, counting requests and the most it had
// in flight at once.
type endpoint struct {
	delay                     time.Duration
	inFlight, maxIn, received atomic.Int32
	first                     chan struct{}
	once                      sync.Once
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
	e.received.Add(1)
	e.once.Do(func() { close(e.first) })
	w.WriteHeader(http.StatusNoContent)
}

// TestSlowEndpointDoesNotDelayOthers: client A's endpoint is slow and A has a backlog; client
// B's one batch, queued after all of A's, is delivered at once, and A never holds more than
// its share of the workers. (Claims were one FIFO: B waited for A's whole backlog.)
func TestSlowEndpointDoesNotDelayOthers(t *testing.T) {
	f := newFixture(t)
	slow := &endpoint{delay: 2 * time.Second, first: make(chan struct{})}
	fast := &endpoint{first: make(chan struct{})}
	slowSrv, fastSrv := httptest.NewServer(slow), httptest.NewServer(fast)
	defer slowSrv.Close()
	defer fastSrv.Close()

	a, b := f.client(t, slowSrv.URL), f.client(t, fastSrv.URL)
	f.queue(t, a, 20)
	f.queue(t, b, 1)

	const perIntegration = 2
	stores := pg.NewStores(f.pool, func(db pg.DB) delivery.Store { return store.New(db) })
	w := delivery.New(stores.Pool(), stores, f.vault, f.keyring, webhook.NewClient(f.policy, 10*time.Second), delivery.Config{
		Workers: 4, PerIntegration: perIntegration, Poll: 20 * time.Millisecond, Lease: time.Minute,
		BackoffBase: time.Second, BackoffMax: time.Minute, MaxAttempts: 3,
	}, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()

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
