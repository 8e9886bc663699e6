package delivery_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/connect/internal/connecttest"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/eventhooks/delivery"
	"github.com/mnvhq/mnv/services/connect/internal/outbound"
	"github.com/mnvhq/mnv/services/connect/internal/store"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/metricstest"
	"github.com/mnvhq/mnv/services/platform/pg"
)

// env is a connect database with a running River queue that works the webhooks queue.
type env struct {
	pool    *pgxpool.Pool
	keyring *crypto.Keyring
	svc     *delivery.Service
	reg     *prometheus.Registry
}

type options struct {
	workers, perEndpoint int
	perClient            int // 0: no client limit
	cfg                  delivery.Config
	timeout              time.Duration
}

func start(t *testing.T, o options) *env {
	t.Helper()
	pool := connecttest.Pool(t, 12)
	_, keyring := connecttest.Keys(t)
	log := zaptest.NewLogger(t)
	queue, err := jobs.New(pool, jobs.Options{Schema: "connect", Log: log, FetchPoll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stores := pg.NewStores(pool, func(db pg.DB) delivery.Store { return store.New(db).WithJobs(queue) })
	timeout := o.timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	o.cfg.Timeout = timeout
	if o.cfg.Backoff == 0 {
		o.cfg.Backoff = 10 * time.Millisecond
	}
	client := outbound.NewClient(outbound.Policy{AllowHTTP: true, AllowPrivate: true}, timeout)
	svc := delivery.New(o.cfg, delivery.Deps{
		Store: stores.Pool(), Tx: stores, Keyring: keyring, Client: client,
		Limit: &jobs.KeyLimit{Max: max(o.perEndpoint, 1), Snooze: 20 * time.Millisecond}, Log: log,
	})
	if o.perClient > 0 {
		svc.ClientLimit = &jobs.KeyLimit{Max: o.perClient, Snooze: 20 * time.Millisecond}
	}
	reg := prometheus.NewRegistry()
	if svc.Metrics, err = delivery.NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	river.AddWorker(queue.Workers(), svc.Worker())
	queue.AddQueue(delivery.Queue, max(o.workers, 1))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- queue.Run(ctx, time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return &env{pool: pool, keyring: keyring, svc: svc, reg: reg}
}

// endpoint inserts an enabled endpoint of client at url with a current secret, and returns its
// id and HMAC key (as the keys a receiver verifies with). types nil: every type.
func (e *env) endpoint(t *testing.T, client, url string, types []string) (string, [][]byte) {
	t.Helper()
	id := uuid.NewString()
	e.exec(t, `INSERT INTO connect.webhook_endpoints (id, client_id, url, event_types) VALUES ($1, $2, $3, $4)`, id, client, url, types)
	return id, [][]byte{e.secret(t, id, nil)}
}

// secret adds a signing secret to an endpoint, expiring at expires (nil: the current one).
func (e *env) secret(t *testing.T, endpointID string, expires *time.Time) []byte {
	t.Helper()
	s := outbound.NewSecret()
	sid := uuid.NewString()
	e.exec(t, `INSERT INTO connect.webhook_secrets (id, client_id, endpoint_id, sealed, expires_at)
		SELECT $1, client_id, $2, $3, $4 FROM connect.webhook_endpoints WHERE id = $2`,
		sid, endpointID, e.keyring.Seal([]byte(s), domain.WebhookSecretAD(sid)), expires)
	key, err := outbound.ParseSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func (e *env) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := e.pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

func (e *env) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// eventually polls cond until it holds, failing the test after 20 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// request is one request a receiver got.
type request struct {
	id, timestamp, signature string
	body                     []byte
	status                   int
}

// receiver is a webhook endpoint that verifies every request with each of its keys (each one
// alone must verify) and answers with answer(n), n counting its requests from 1.
type receiver struct {
	t      *testing.T
	keys   [][]byte
	answer func(n int) int
	hold   chan struct{} // when set, every request waits for it to close

	mu   sync.Mutex
	got  []request
	errs []error
	srv  *httptest.Server
	// inFlight counts the requests being served; peak is its highest value.
	inFlight, peak int
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	r := &receiver{t: t, answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.inFlight++
	r.peak = max(r.peak, r.inFlight)
	r.mu.Unlock()
	defer func() { r.mu.Lock(); r.inFlight--; r.mu.Unlock() }()
	if r.hold != nil {
		select {
		case <-r.hold:
		case <-req.Context().Done():
			return
		}
	}
	r.mu.Lock()
	in := request{id: req.Header.Get(outbound.IDHeader), timestamp: req.Header.Get(outbound.TimestampHeader),
		signature: req.Header.Get(outbound.StandardSignatureHeader), body: body}
	for _, k := range r.keys {
		if err := outbound.VerifyStandard(k, in.id, in.timestamp, in.signature, body, time.Now(), 0); err != nil {
			r.errs = append(r.errs, err)
		}
	}
	in.status = http.StatusNoContent
	if r.answer != nil {
		in.status = r.answer(len(r.got) + 1)
	}
	r.got = append(r.got, in)
	r.mu.Unlock()
	w.WriteHeader(in.status)
}

func (r *receiver) requests() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) > 0 {
		r.t.Errorf("signatures that did not verify: %v", r.errs)
		r.errs = nil
	}
	return append([]request(nil), r.got...)
}

func newEvent(t *testing.T, client, typ string, data any) events.Event {
	t.Helper()
	ev, err := events.New(client, typ, data, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func keyCreated(t *testing.T, client string) events.Event {
	return newEvent(t, client, events.APIKeyCreated, events.APIKeyData{KeyID: uuid.NewString(), Name: "ci", Role: "ADMIN", Hint: "x1y2"})
}

// TestDeliverOnce: an event goes, signed, to each enabled endpoint subscribed to it, with the
// body {id,type,createdAt,data} and the event id as webhook-id; publishing it again delivers
// nothing more; an endpoint subscribed to other types or disabled gets nothing.
func TestDeliverOnce(t *testing.T) {
	e := start(t, options{workers: 4, perEndpoint: 2})
	ctx := context.Background()
	client := uuid.NewString()
	all, byType, other, off := newReceiver(t, nil), newReceiver(t, nil), newReceiver(t, nil), newReceiver(t, nil)
	var allID string
	allID, all.keys = e.endpoint(t, client, all.srv.URL, nil)
	_, byType.keys = e.endpoint(t, client, byType.srv.URL, []string{events.APIKeyCreated, events.ImportFailed})
	_, other.keys = e.endpoint(t, client, other.srv.URL, []string{events.ImportFailed})
	offID, _ := e.endpoint(t, client, off.srv.URL, nil)
	e.exec(t, `UPDATE connect.webhook_endpoints SET enabled = false, disabled_reason = 'CLIENT' WHERE id = $1`, offID)
	// Another client's endpoint never hears of this client's events.
	stranger := newReceiver(t, nil)
	e.endpoint(t, uuid.NewString(), stranger.srv.URL, nil)

	ev := keyCreated(t, client)
	for i, want := range []int{1, 0} {
		n, err := e.svc.PublishCount(ctx, []events.Event{ev})
		if err != nil || n != want {
			t.Fatalf("publish #%d = %d, %v; want %d new", i+1, n, err, want)
		}
	}
	eventually(t, "both deliveries", func() bool {
		return e.count(t, `SELECT count(*) FROM connect.webhook_deliveries WHERE status = 'SUCCEEDED'`) == 2
	})
	// Every job is done: nothing more can arrive.
	eventually(t, "jobs done", func() bool {
		return e.count(t, `SELECT count(*) FROM connect.river_job WHERE kind = $1 AND state <> 'completed'`, delivery.Kind) == 0
	})
	wantBody, err := ev.Body()
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*receiver{"all types": all, "by type": byType} {
		got := r.requests()
		if len(got) != 1 {
			t.Fatalf("%s endpoint got %d requests, want 1", name, len(got))
		}
		if got[0].id != ev.ID || !bytes.Equal(got[0].body, wantBody) {
			t.Errorf("%s endpoint got id %q body %s; want %q %s", name, got[0].id, got[0].body, ev.ID, wantBody)
		}
	}
	for name, r := range map[string]*receiver{"other types": other, "disabled": off, "another client's": stranger} {
		if got := r.requests(); len(got) != 0 {
			t.Errorf("%s endpoint got %d requests", name, len(got))
		}
	}
	if n := e.count(t, `SELECT count(*) FROM connect.river_job WHERE kind = $1`, delivery.Kind); n != 2 {
		t.Errorf("%d delivery jobs, want 2", n)
	}
	if n := e.count(t, `SELECT count(*) FROM connect.webhook_attempts a JOIN connect.webhook_deliveries d ON d.id = a.delivery_id
		WHERE d.endpoint_id = $1 AND a.http_status = 204 AND a.attempt = 1`, allID); n != 1 {
		t.Errorf("attempt log of the endpoint: %d rows, want 1", n)
	}
	m := metricstest.Gather(t, e.reg)
	if v := metricstest.Sum(m, "mnv_webhook_attempts_total", "outcome=succeeded"); v != 2 {
		t.Errorf("succeeded attempts counted %v, want 2", v)
	}
	if v := metricstest.Sum(m, "mnv_webhook_delivery_lag_seconds"); v != 2 {
		t.Errorf("lag observations %v, want 2", v)
	}

	// Redeliver: the same webhook-id again; another client's delivery id, or a malformed one, is
	// not found.
	var deliveryID string
	if err := e.pool.QueryRow(ctx, `SELECT id FROM connect.webhook_deliveries WHERE endpoint_id = $1`, allID).Scan(&deliveryID); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ client, id string }{{uuid.NewString(), deliveryID}, {client, uuid.NewString()}, {client, "nope"}} {
		if err := e.svc.Redeliver(ctx, bad.client, bad.id); !errors.Is(err, fault.ErrNotFound) {
			t.Errorf("redeliver %v = %v, want not found", bad, err)
		}
	}
	if err := e.svc.Redeliver(ctx, client, deliveryID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the redelivery", func() bool { return len(all.requests()) == 2 })
	if got := all.requests(); got[1].id != ev.ID || !bytes.Equal(got[1].body, wantBody) {
		t.Errorf("redelivery id %q body %s; want %q", got[1].id, got[1].body, ev.ID)
	}
	eventually(t, "the redelivery's record", func() bool {
		return e.count(t, `SELECT count(*) FROM connect.webhook_deliveries WHERE id = $1 AND status = 'SUCCEEDED' AND attempts = 2`, deliveryID) == 1
	})
}

// TestAtLeastOnce: a receiver that fails twice then succeeds gets the same webhook-id, signed,
// three times, and the delivery log shows the three attempts.
func TestAtLeastOnce(t *testing.T) {
	e := start(t, options{workers: 2, perEndpoint: 1})
	client := uuid.NewString()
	r := newReceiver(t, func(n int) int {
		if n <= 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	var id string
	id, r.keys = e.endpoint(t, client, r.srv.URL, nil)
	ev := keyCreated(t, client)
	if err := e.svc.Publish(context.Background(), []events.Event{ev}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the delivery", func() bool {
		return e.count(t, `SELECT count(*) FROM connect.webhook_deliveries WHERE status = 'SUCCEEDED'`) == 1
	})
	got := r.requests()
	if len(got) != 3 {
		t.Fatalf("%d requests, want 3", len(got))
	}
	for i, g := range got {
		if g.id != ev.ID {
			t.Errorf("attempt %d webhook-id %q, want %q", i+1, g.id, ev.ID)
		}
	}
	rows, err := e.pool.Query(context.Background(), `SELECT a.attempt, a.http_status, a.error IS NOT NULL FROM connect.webhook_attempts a
		JOIN connect.webhook_deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = $1 ORDER BY a.attempt`, id)
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	for rows.Next() {
		var (
			n, status int
			failed    bool
		)
		if err := rows.Scan(&n, &status, &failed); err != nil {
			t.Fatal(err)
		}
		log = append(log, strings.Join([]string{itoa(n), itoa(status), map[bool]string{true: "error", false: "ok"}[failed]}, " "))
	}
	if want := []string{"1 503 error", "2 503 error", "3 200 ok"}; strings.Join(log, "|") != strings.Join(want, "|") {
		t.Errorf("attempt log %q, want %q", log, want)
	}
	if n := e.count(t, `SELECT count(*) FROM connect.webhook_endpoints WHERE id = $1 AND failing_since IS NULL AND enabled`, id); n != 1 {
		t.Error("a success did not clear the endpoint's failing_since")
	}
	m := metricstest.Gather(t, e.reg)
	if v := metricstest.Sum(m, "mnv_webhook_attempts_total", "outcome=retrying"); v != 2 {
		t.Errorf("retrying attempts counted %v, want 2", v)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestSlowEndpointDoesNotDelayOthers: while client A's endpoint holds every request it gets,
// client B's events are delivered; A's endpoint never holds more than its share of workers.
func TestSlowEndpointDoesNotDelayOthers(t *testing.T) {
	const workers, perEndpoint = 4, 1
	e := start(t, options{workers: workers, perEndpoint: perEndpoint, timeout: 30 * time.Second})
	ctx := context.Background()
	clientA, clientB := uuid.NewString(), uuid.NewString()
	slow, fast := newReceiver(t, nil), newReceiver(t, nil)
	slow.hold = make(chan struct{})
	released := false
	release := func() {
		if !released {
			released = true
			close(slow.hold)
		}
	}
	t.Cleanup(release)
	_, slow.keys = e.endpoint(t, clientA, slow.srv.URL, nil)
	_, fast.keys = e.endpoint(t, clientB, fast.srv.URL, nil)
	var aEvents, bEvents []events.Event
	for range 3 * workers { // more than enough to hold every worker without the limit
		aEvents = append(aEvents, keyCreated(t, clientA))
	}
	for range 5 {
		bEvents = append(bEvents, keyCreated(t, clientB))
	}
	if err := e.svc.Publish(ctx, aEvents); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Publish(ctx, bEvents); err != nil {
		t.Fatal(err)
	}
	eventually(t, "client B's events while A's endpoint holds its requests", func() bool {
		return e.count(t, `SELECT count(*) FROM connect.webhook_deliveries WHERE client_id = $1 AND status = 'SUCCEEDED'`, clientB) == len(bEvents)
	})
	if got := len(slow.requests()); got != 0 {
		t.Fatalf("the held endpoint answered %d requests before its release", got)
	}
	slow.mu.Lock()
	held := slow.inFlight
	slow.mu.Unlock()
	if held != perEndpoint {
		t.Errorf("the slow endpoint holds %d requests, want its limit %d", held, perEndpoint)
	}
	release()
	eventually(t, "client A's events once released", func() bool {
		return e.count(t, `SELECT count(*) FROM connect.webhook_deliveries WHERE client_id = $1 AND status = 'SUCCEEDED'`, clientA) == len(aEvents)
	})
	if slow.peak > perEndpoint {
		t.Errorf("the slow endpoint had %d requests at once, limit %d", slow.peak, perEndpoint)
	}
	if got := len(fast.requests()); got != len(bEvents) {
		t.Errorf("client B's endpoint got %d requests, want %d", got, len(bEvents))
	}
}

// TestSlowClientDoesNotDelayOthers: a client whose every endpoint hangs holds at most its
// client limit of workers, however many endpoints it has, so another client's events go out.
func TestSlowClientDoesNotDelayOthers(t *testing.T) {
	const workers, perEndpoint, perClient, endpoints = 4, 1, 2, 4
	e := start(t, options{workers: workers, perEndpoint: perEndpoint, perClient: perClient, timeout: 30 * time.Second})
	ctx := context.Background()
	clientA, clientB := uuid.NewString(), uuid.NewString()
	hold := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	var slows []*receiver
	for range endpoints {
		r := newReceiver(t, nil)
		r.hold = hold
		_, r.keys = e.endpoint(t, clientA, r.srv.URL, nil)
		slows = append(slows, r)
	}
	fast := newReceiver(t, nil)
	_, fast.keys = e.endpoint(t, clientB, fast.srv.URL, nil)
	var aEvents, bEvents []events.Event
	for range workers {
		aEvents = append(aEvents, keyCreated(t, clientA)) // one delivery per endpoint each
	}
	for range 3 {
		bEvents = append(bEvents, keyCreated(t, clientB))
	}
	if err := e.svc.Publish(ctx, aEvents); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Publish(ctx, bEvents); err != nil {
		t.Fatal(err)
	}
	eventually(t, "client B's events while all of A's endpoints hang", func() bool {
		return e.count(t, `SELECT count(*) FROM connect.webhook_deliveries WHERE client_id = $1 AND status = 'SUCCEEDED'`, clientB) == len(bEvents)
	})
	inFlight := 0
	for _, r := range slows {
		r.mu.Lock()
		inFlight += r.inFlight
		r.mu.Unlock()
	}
	if inFlight > perClient {
		t.Errorf("client A holds %d requests at once, its limit is %d", inFlight, perClient)
	}
	release()
	eventually(t, "client A's events once released", func() bool {
		return e.count(t, `SELECT count(*) FROM connect.webhook_deliveries WHERE client_id = $1 AND status = 'SUCCEEDED'`, clientA) == len(aEvents)*endpoints
	})
}

// TestRotationOverlap: during a rotation's overlap a delivery carries one signature per active
// secret, each of which verifies alone; an expired secret signs nothing.
func TestRotationOverlap(t *testing.T) {
	e := start(t, options{workers: 2, perEndpoint: 1})
	client := uuid.NewString()
	r := newReceiver(t, nil)
	id, current := e.endpoint(t, client, r.srv.URL, nil)
	soon, past := time.Now().Add(time.Hour), time.Now().Add(-time.Minute)
	previous := e.secret(t, id, &soon)
	expired := e.secret(t, id, &past)
	r.keys = [][]byte{current[0], previous}
	if err := e.svc.Publish(context.Background(), []events.Event{keyCreated(t, client)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the delivery", func() bool { return len(r.requests()) == 1 })
	got := r.requests()[0]
	if n := len(strings.Fields(got.signature)); n != 2 {
		t.Errorf("%d signatures, want 2 (current and previous)", n)
	}
	if err := outbound.VerifyStandard(expired, got.id, got.timestamp, got.signature, got.body, time.Now(), 0); !errors.Is(err, outbound.ErrSignatureMismatch) {
		t.Errorf("the expired secret's verification = %v, want a mismatch", err)
	}
}

// TestAutoDisable: an endpoint failing for longer than DisableAfter is disabled (FAILING), its
// deliveries CANCELLED, the client's other endpoints get webhook_endpoint.disabled, and the
// metric counts it.
func TestAutoDisable(t *testing.T) {
	e := start(t, options{workers: 2, perEndpoint: 1, cfg: delivery.Config{MaxAttempts: 25, DisableAfter: 300 * time.Millisecond}})
	ctx := context.Background()
	client := uuid.NewString()
	broken := newReceiver(t, func(int) int { return http.StatusInternalServerError })
	healthy := newReceiver(t, nil)
	var brokenID string
	brokenID, broken.keys = e.endpoint(t, client, broken.srv.URL, []string{events.APIKeyCreated})
	_, healthy.keys = e.endpoint(t, client, healthy.srv.URL, []string{events.WebhookEndpointDisabled})
	if err := e.svc.Publish(ctx, []events.Event{keyCreated(t, client)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the endpoint disabled", func() bool {
		return e.count(t, `SELECT count(*) FROM connect.webhook_endpoints WHERE id = $1 AND NOT enabled AND disabled_reason = 'FAILING' AND disabled_at IS NOT NULL`, brokenID) == 1
	})
	if n := e.count(t, `SELECT count(*) FROM connect.webhook_deliveries WHERE endpoint_id = $1 AND status = 'CANCELLED'`, brokenID); n != 1 {
		t.Errorf("%d cancelled deliveries of the disabled endpoint, want 1", n)
	}
	eventually(t, "webhook_endpoint.disabled at the other endpoint", func() bool { return len(healthy.requests()) == 1 })
	var body struct {
		Type string `json:"type"`
		Data struct {
			EndpointID   string `json:"endpointId"`
			FailingSince string `json:"failingSince"`
		} `json:"data"`
	}
	if err := json.Unmarshal(healthy.requests()[0].body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Type != events.WebhookEndpointDisabled || body.Data.EndpointID != brokenID || body.Data.FailingSince == "" {
		t.Errorf("event %+v, want webhook_endpoint.disabled of %s", body, brokenID)
	}
	if v := metricstest.Sum(metricstest.Gather(t, e.reg), "mnv_webhook_endpoints_disabled_total"); v != 1 {
		t.Errorf("disabled endpoints counted %v, want 1", v)
	}
	attempts := len(broken.requests())
	if attempts < 2 {
		t.Errorf("the endpoint was disabled after %d attempts; it must have failed for a while", attempts)
	}
}

// TestDisabledEndpointCancelled: a delivery to an endpoint disabled before its attempt is
// CANCELLED and never sent.
func TestDisabledEndpointCancelled(t *testing.T) {
	e := start(t, options{workers: 2, perEndpoint: 1})
	ctx := context.Background()
	client := uuid.NewString()
	r := newReceiver(t, nil)
	id, _ := e.endpoint(t, client, r.srv.URL, nil)
	e.exec(t, `UPDATE connect.webhook_endpoints SET enabled = false, disabled_reason = 'OPERATOR', disabled_at = now() WHERE id = $1`, id)
	// A ping goes to its endpoint whatever its state; the worker finds it disabled.
	evID, err := e.svc.Ping(ctx, domain.WebhookEndpoint{ID: id, ClientID: client})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the delivery cancelled", func() bool {
		return e.count(t, `SELECT count(*) FROM connect.webhook_deliveries WHERE event_id = $1 AND status = 'CANCELLED' AND attempts = 0`, evID) == 1
	})
	eventually(t, "its job cancelled", func() bool {
		return e.count(t, `SELECT count(*) FROM connect.river_job WHERE kind = $1 AND state = 'cancelled'`, delivery.Kind) == 1
	})
	if got := len(r.requests()); got != 0 {
		t.Errorf("the disabled endpoint got %d requests", got)
	}
}

// TestPingOnlyItsEndpoint: a ping goes to the endpoint tested alone, even when another endpoint
// takes every type.
func TestPingOnlyItsEndpoint(t *testing.T) {
	e := start(t, options{workers: 2, perEndpoint: 1})
	client := uuid.NewString()
	tested, bystander := newReceiver(t, nil), newReceiver(t, nil)
	var id string
	id, tested.keys = e.endpoint(t, client, tested.srv.URL, []string{events.ImportFailed})
	e.endpoint(t, client, bystander.srv.URL, nil)
	evID, err := e.svc.Ping(context.Background(), domain.WebhookEndpoint{ID: id, ClientID: client})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ping", func() bool { return len(tested.requests()) == 1 })
	if got := tested.requests()[0]; got.id != evID || !strings.Contains(string(got.body), `"type":"ping"`) || !strings.Contains(string(got.body), id) {
		t.Errorf("ping %q %s, want id %q naming the endpoint", got.id, got.body, evID)
	}
	if n := e.count(t, `SELECT count(*) FROM connect.webhook_deliveries WHERE event_id = $1`, evID); n != 1 {
		t.Errorf("%d deliveries of the ping, want 1", n)
	}
	if got := len(bystander.requests()); got != 0 {
		t.Errorf("another endpoint got the ping")
	}
}

// TestPublishRefusesOrRollsBack: a malformed event refuses the whole call before anything is
// written; a failure inside the transaction leaves no event, delivery or job behind.
func TestPublishRefusesOrRollsBack(t *testing.T) {
	e := start(t, options{workers: 1, perEndpoint: 1})
	ctx := context.Background()
	client := uuid.NewString()
	r := newReceiver(t, nil)
	e.endpoint(t, client, r.srv.URL, nil)
	good := keyCreated(t, client)
	bad := func(f func(*events.Event)) events.Event { ev := keyCreated(t, client); f(&ev); return ev }
	tests := []struct {
		name string
		ev   events.Event
	}{
		{"id without evt_", bad(func(e *events.Event) { e.ID = strings.TrimPrefix(e.ID, "evt_") })},
		{"id in upper case", bad(func(e *events.Event) { e.ID = strings.ToUpper(e.ID) })},
		{"unknown type", bad(func(e *events.Event) { e.Type = "balance.stolen" })},
		{"ping from outside", bad(func(e *events.Event) { e.Type = events.Ping })},
		{"client not a uuid", bad(func(e *events.Event) { e.ClientID = "acme" })},
		{"no client", bad(func(e *events.Event) { e.ClientID = "" })},
		{"data an array", bad(func(e *events.Event) { e.Data = []byte(`[1]`) })},
		{"data not JSON", bad(func(e *events.Event) { e.Data = []byte(`{"a":`) })},
		{"no data", bad(func(e *events.Event) { e.Data = nil })},
		{"no time", bad(func(e *events.Event) { e.CreatedAt = time.Unix(0, 0) })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.svc.Publish(ctx, []events.Event{good, tt.ev})
			if fault.Find(err, fault.InvalidArgument) == nil {
				t.Fatalf("publish = %v, want INVALID_ARGUMENT", err)
			}
		})
	}
	if n := e.count(t, `SELECT count(*) FROM connect.events`); n != 0 {
		t.Fatalf("%d events written by refused calls", n)
	}
	// A ping to an endpoint that does not exist fails at its delivery's insert, after the event's.
	if _, err := e.svc.Ping(ctx, domain.WebhookEndpoint{ID: uuid.NewString(), ClientID: client}); err == nil {
		t.Fatal("a ping to no endpoint succeeded")
	}
	for what, sql := range map[string]string{
		"events": `SELECT count(*) FROM connect.events`, "deliveries": `SELECT count(*) FROM connect.webhook_deliveries`,
		"jobs": `SELECT count(*) FROM connect.river_job`,
	} {
		if n := e.count(t, sql); n != 0 {
			t.Errorf("%d %s left by a rolled back publish", n, what)
		}
	}
	if got := len(r.requests()); got != 0 {
		t.Errorf("%d requests after refused publishes", got)
	}
}

// TestEventWithoutEndpointIsDropped: an event no endpoint takes leaves nothing behind, and an
// endpoint created afterwards does not take it when it is forwarded again.
func TestEventWithoutEndpointIsDropped(t *testing.T) {
	e := start(t, options{workers: 1})
	ctx := context.Background()
	client := uuid.NewString()
	ev := keyCreated(t, client)
	n, err := e.svc.PublishCount(ctx, []events.Event{ev})
	if err != nil || n != 0 {
		t.Fatalf("PublishCount = %d, %v; want 0 stored", n, err)
	}
	if got := e.count(t, `SELECT count(*) FROM connect.events WHERE client_id = $1`, client); got != 0 {
		t.Fatalf("%d events stored for a client without endpoints", got)
	}
	r := newReceiver(t, nil)
	_, r.keys = e.endpoint(t, client, r.srv.URL, nil)
	if n, err := e.svc.PublishCount(ctx, []events.Event{ev}); err != nil || n != 0 {
		t.Fatalf("the event forwarded again after an endpoint was created: %d stored, %v", n, err)
	}
	if got := e.count(t, `SELECT count(*) FROM connect.webhook_deliveries WHERE client_id = $1`, client); got != 0 {
		t.Fatalf("an endpoint created after the event got %d deliveries of it", got)
	}
}

// TestPublishManyFindsEachEventsEndpoints: events of several clients and types published in
// one call (the merged forwards of a busy producer) each reach their own client's endpoints
// subscribed to their type, and only those.
func TestPublishManyFindsEachEventsEndpoints(t *testing.T) {
	e := start(t, options{workers: 1, perEndpoint: 1})
	ctx := context.Background()
	a, b := uuid.NewString(), uuid.NewString()
	rcv := newReceiver(t, nil)
	aAll, _ := e.endpoint(t, a, rcv.srv.URL, nil)
	aImports, _ := e.endpoint(t, a, rcv.srv.URL, []string{events.ImportFailed})
	bKeys, _ := e.endpoint(t, b, rcv.srv.URL, []string{events.APIKeyCreated})
	evs := []events.Event{
		keyCreated(t, a),
		keyCreated(t, b),
		newEvent(t, a, events.ImportFailed, events.ImportData{ImportID: uuid.NewString()}),
		newEvent(t, b, events.ImportFailed, events.ImportData{ImportID: uuid.NewString()}), // b takes keys only
		keyCreated(t, uuid.NewString()), // a client without endpoints
	}
	want := [][]string{{aAll}, {bKeys}, {aAll, aImports}, nil, nil}
	n, err := e.svc.PublishCount(ctx, evs)
	if err != nil || n != 3 {
		t.Fatalf("publish = %d, %v; want 3 new", n, err)
	}
	for i, ev := range evs {
		rows, err := e.pool.Query(ctx, `SELECT d.endpoint_id::text FROM connect.webhook_deliveries d
			JOIN connect.webhook_endpoints w ON w.id = d.endpoint_id WHERE d.event_id = $1 ORDER BY w.created_at, w.id`, ev.ID)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want[i]) {
			t.Errorf("event %d (%s of %s) went to %v, want %v", i, ev.Type, ev.ClientID, got, want[i])
		}
	}
}
