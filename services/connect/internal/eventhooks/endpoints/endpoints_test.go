package endpoints_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mnvhq/mnv/services/connect/internal/connecttest"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/eventhooks/endpoints"
	"github.com/mnvhq/mnv/services/connect/internal/outbound"
	"github.com/mnvhq/mnv/services/connect/internal/store"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/pg"
)

type fixture struct {
	svc     *endpoints.Service
	st      *store.Store
	pool    *pgxpool.Pool
	keyring *crypto.Keyring
	now     time.Time
}

// newFixture is the Service over a fresh database, with the production SSRF policy but for
// the one loopback network tests may name, and a clock the test moves.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool := connecttest.Pool(t, 4)
	_, keyring := connecttest.Keys(t)
	stores := pg.NewStores(pool, func(db pg.DB) endpoints.Store { return store.New(db) })
	f := &fixture{st: store.New(pool), pool: pool, keyring: keyring, now: time.Now().UTC().Truncate(time.Millisecond)}
	f.svc = endpoints.New(stores.Pool(), stores, keyring, outbound.Policy{}, endpoints.Config{Overlap: time.Hour}, nil)
	f.svc.Now = func() time.Time { return f.now }
	return f
}

func (f *fixture) create(t *testing.T, clientID string) endpoints.WithSecret {
	t.Helper()
	c, err := f.svc.Create(context.Background(), clientID, endpoints.CreateRequest{URL: "https://hooks.example.com/mnv"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func reason(err error) fault.Reason {
	var f *fault.Error
	if errors.As(err, &f) {
		return f.Reason
	}
	return ""
}

func TestCreateValidates(t *testing.T) {
	f := newFixture(t)
	client := uuid.NewString()
	long := strings.Repeat("é", 501)
	tests := []struct {
		name string
		req  endpoints.CreateRequest
		want string // a fault.Invalid message prefix; "" for a success
	}{
		{"defaults", endpoints.CreateRequest{URL: "https://hooks.example.com/a"}, ""},
		{"every type spelt out", endpoints.CreateRequest{URL: "https://hooks.example.com/a", Events: []string{"*"}}, ""},
		{"known types", endpoints.CreateRequest{URL: "https://hooks.example.com/a", Events: []string{"balance.low", "verification.completed"}}, ""},
		{"500 characters of description", endpoints.CreateRequest{URL: "https://hooks.example.com/a", Description: long[:len(long)-2]}, ""},
		{"no url", endpoints.CreateRequest{}, "url: "},
		{"plain http", endpoints.CreateRequest{URL: "http://hooks.example.com/a"}, "url: "},
		{"a private address", endpoints.CreateRequest{URL: "https://10.0.0.1/a"}, "url: "},
		{"loopback", endpoints.CreateRequest{URL: "https://127.0.0.1/a"}, "url: "},
		{"metadata service", endpoints.CreateRequest{URL: "https://169.254.169.254/latest"}, "url: "},
		{"an unknown type", endpoints.CreateRequest{URL: "https://hooks.example.com/a", Events: []string{"balance.stolen"}}, "events: unknown event type"},
		{"ping is not subscribable", endpoints.CreateRequest{URL: "https://hooks.example.com/a", Events: []string{"ping"}}, "events: unknown event type"},
		{"* beside a type", endpoints.CreateRequest{URL: "https://hooks.example.com/a", Events: []string{"*", "balance.low"}}, `events: "*"`},
		{"501 characters of description", endpoints.CreateRequest{URL: "https://hooks.example.com/a", Description: long}, "description: must be at most 500"},
		{"a control character", endpoints.CreateRequest{URL: "https://hooks.example.com/a", Description: "a\x00b"}, "description: must not contain control"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := f.svc.Create(context.Background(), client, tc.req)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(c.Secret, "whsec_") {
					t.Errorf("secret %q", c.Secret)
				}
				return
			}
			if reason(err) != fault.InvalidArgument || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("got %v, want INVALID_ARGUMENT %q…", err, tc.want)
			}
		})
	}
}

func TestEventsDefaultToAll(t *testing.T) {
	f := newFixture(t)
	ctx, client := context.Background(), uuid.NewString()
	for _, tc := range []struct {
		in, want []string
	}{
		{nil, []string{"*"}},
		{[]string{"*"}, []string{"*"}},
		{[]string{"balance.low", "balance.low", "import.failed"}, []string{"balance.low", "import.failed"}},
	} {
		c, err := f.svc.Create(ctx, client, endpoints.CreateRequest{URL: "https://hooks.example.com/a", Events: tc.in})
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.svc.Get(ctx, client, c.Endpoint.ID)
		if err != nil {
			t.Fatal(err)
		}
		if g := endpoints.EventsOf(got); strings.Join(g, ",") != strings.Join(tc.want, ",") {
			t.Errorf("events %v: stored as %v, want %v", tc.in, g, tc.want)
		}
	}
}

// The secret is stored only sealed, bound to its row: the plain secret is nowhere in the
// table, and the sealed bytes do not open as another row's.
func TestSecretSealedToItsRow(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c := f.create(t, uuid.NewString())
	var id string
	var sealed []byte
	if err := f.pool.QueryRow(ctx, `SELECT id::text, sealed FROM connect.webhook_secrets WHERE endpoint_id = $1`, c.Endpoint.ID).Scan(&id, &sealed); err != nil {
		t.Fatal(err)
	}
	key, _ := outbound.ParseSecret(c.Secret)
	if bytes.Contains(sealed, []byte(c.Secret)) || bytes.Contains(sealed, key) {
		t.Fatal("the secret is stored in the clear")
	}
	if _, err := endpoints.OpenSecret(f.keyring, domain.WebhookSecret{ID: uuid.NewString(), Sealed: sealed}); err == nil {
		t.Fatal("a sealed secret opened as another row's")
	}
	got, err := endpoints.OpenSecret(f.keyring, domain.WebhookSecret{ID: id, Sealed: sealed})
	if err != nil || got != c.Secret {
		t.Fatalf("opened %q, %v", got, err)
	}
}

func TestForeignAndUnknownIDsAreNotFound(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	owner, other := uuid.NewString(), uuid.NewString()
	id := f.create(t, owner).Endpoint.ID
	enabled := false
	d := time.Minute
	for _, target := range []struct{ name, client, id string }{
		{"another client's", other, id}, {"unknown", owner, uuid.NewString()}, {"not an id", owner, "../" + id},
	} {
		calls := map[string]func() error{
			"get": func() error { _, err := f.svc.Get(ctx, target.client, target.id); return err },
			"update": func() error {
				_, err := f.svc.Update(ctx, target.client, target.id, endpoints.Patch{Enabled: &enabled})
				return err
			},
			"rotate":     func() error { _, err := f.svc.RotateSecret(ctx, target.client, target.id, &d); return err },
			"test":       func() error { _, err := f.svc.Test(ctx, target.client, target.id); return err },
			"deliveries": func() error { _, err := f.svc.Deliveries(ctx, target.client, target.id, nil, 10, 0); return err },
			"delete":     func() error { return f.svc.Delete(ctx, target.client, target.id) },
			"redeliver":  func() error { return f.svc.Redeliver(ctx, target.client, target.id) },
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, fault.ErrNotFound) {
				t.Errorf("%s endpoint, %s: %v, want not found", target.name, name, err)
			}
		}
	}
	// Nothing of the above changed the owner's endpoint.
	e, err := f.svc.Get(ctx, owner, id)
	if err != nil || !e.Enabled {
		t.Fatalf("owner's endpoint: %+v, %v", e, err)
	}
	if keys, err := endpoints.SigningKeys(ctx, f.st, f.keyring, owner, id, f.now); err != nil || len(keys) != 1 {
		t.Fatalf("owner's keys: %d, %v", len(keys), err)
	}
}

func TestEndpointsPerClientBounded(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	client := uuid.NewString()
	for range endpoints.MaxEndpoints {
		f.create(t, client)
	}
	if _, err := f.svc.Create(ctx, client, endpoints.CreateRequest{URL: "https://hooks.example.com/one-more"}); !errors.Is(err, endpoints.ErrTooMany) {
		t.Fatalf("endpoint %d: %v, want ErrTooMany", endpoints.MaxEndpoints+1, err)
	}
	// Another client is not counted against it.
	f.create(t, uuid.NewString())
}

func TestRotation(t *testing.T) {
	ctx := context.Background()
	key := func(t *testing.T, secret string) string {
		k, err := outbound.ParseSecret(secret)
		if err != nil {
			t.Fatal(err)
		}
		return string(k)
	}
	keysAt := func(t *testing.T, f *fixture, client, id string, at time.Time) []string {
		t.Helper()
		ks, err := endpoints.SigningKeys(ctx, f.st, f.keyring, client, id, at)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, len(ks))
		for i, k := range ks {
			out[i] = string(k)
		}
		return out
	}
	tests := []struct {
		name    string
		overlap *time.Duration
		want    time.Duration // how long the old key signs beside the new
	}{
		{"the configured overlap", nil, time.Hour},
		{"a requested overlap", ptr(10 * time.Minute), 10 * time.Minute},
		{"no overlap", ptr(time.Duration(0)), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			client := uuid.NewString()
			c := f.create(t, client)
			id := c.Endpoint.ID
			r, err := f.svc.RotateSecret(ctx, client, id, tc.overlap)
			if err != nil {
				t.Fatal(err)
			}
			if r.Secret == c.Secret || r.PreviousExpiresAt == nil || !r.PreviousExpiresAt.Equal(f.now.Add(tc.want)) {
				t.Fatalf("rotation answer: new secret differs %v, previous expires %v", r.Secret != c.Secret, r.PreviousExpiresAt)
			}
			oldKey, newKey := key(t, c.Secret), key(t, r.Secret)
			if tc.want > 0 {
				if got := keysAt(t, f, client, id, f.now.Add(tc.want-time.Second)); len(got) != 2 || got[0] != newKey || got[1] != oldKey {
					t.Fatalf("during the overlap: %d keys, want the new then the old", len(got))
				}
			}
			if got := keysAt(t, f, client, id, f.now.Add(tc.want)); len(got) != 1 || got[0] != newKey {
				t.Fatalf("after the overlap: %d keys, want the new one alone", len(got))
			}
			// The next rotation, after the overlap, deletes the expired secret.
			f.now = f.now.Add(tc.want + time.Second)
			r2, err := f.svc.RotateSecret(ctx, client, id, ptr(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			var n int
			if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM connect.webhook_secrets WHERE endpoint_id = $1`, id).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 2 {
				t.Errorf("%d secrets stored after the second rotation, want 2 (the first one's is gone)", n)
			}
			if got := keysAt(t, f, client, id, f.now); len(got) != 2 || got[0] != key(t, r2.Secret) || got[1] != newKey {
				t.Errorf("after the second rotation: %d keys", len(got))
			}
		})
	}
}

func TestRotationOverlapBounds(t *testing.T) {
	f := newFixture(t)
	client := uuid.NewString()
	id := f.create(t, client).Endpoint.ID
	for _, d := range []time.Duration{-time.Second, endpoints.MaxOverlap + time.Second} {
		if _, err := f.svc.RotateSecret(context.Background(), client, id, &d); reason(err) != fault.InvalidArgument {
			t.Errorf("overlap %v: %v, want INVALID_ARGUMENT", d, err)
		}
	}
	if _, err := f.svc.RotateSecret(context.Background(), client, id, ptr(endpoints.MaxOverlap)); err != nil {
		t.Errorf("the longest overlap: %v", err)
	}
}

func TestEnableDisable(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	client := uuid.NewString()
	id := f.create(t, client).Endpoint.ID
	off, on := false, true
	e, err := f.svc.Update(ctx, client, id, endpoints.Patch{Enabled: &off})
	if err != nil || e.Enabled || e.DisabledReason != domain.WebhookDisabledByClient || e.DisabledAt == nil {
		t.Fatalf("disabled by the client: %+v, %v", e, err)
	}
	// A failure record goes when the client enables it again.
	if _, err := f.pool.Exec(ctx, `UPDATE connect.webhook_endpoints SET failing_since = now() WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	e, err = f.svc.Update(ctx, client, id, endpoints.Patch{Enabled: &on})
	if err != nil || !e.Enabled || e.DisabledReason != "" || e.FailingSince != nil {
		t.Fatalf("enabled again: %+v, %v", e, err)
	}
	if _, err := f.svc.Test(ctx, client, id); !errors.Is(err, endpoints.ErrNoDispatcher) {
		t.Fatalf("ping without a dispatcher: %v", err)
	}
	e, err = f.svc.DisableByOperator(ctx, client, id)
	if err != nil || e.Enabled || e.DisabledReason != domain.WebhookDisabledByOperator {
		t.Fatalf("disabled by the operator: %+v, %v", e, err)
	}
	if _, err := f.svc.Update(ctx, client, id, endpoints.Patch{Enabled: &on}); !errors.Is(err, endpoints.ErrOperatorDisabled) {
		t.Fatalf("the client enabling what the operator disabled: %v", err)
	}
	if _, err := f.svc.Update(ctx, client, id, endpoints.Patch{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	if e, _ := f.svc.Get(ctx, client, id); e.DisabledReason != domain.WebhookDisabledByOperator {
		t.Fatalf("disabled again by the client, the reason became %q", e.DisabledReason)
	}
	if _, err := f.svc.Test(ctx, client, id); !errors.Is(err, endpoints.ErrDisabled) {
		t.Fatalf("ping to a disabled endpoint: %v", err)
	}
	if _, err := f.svc.DisableByOperator(ctx, uuid.NewString(), id); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("the operator naming the wrong client: %v", err)
	}
	// The operator's enable is the way back.
	if _, err := f.svc.EnableByOperator(ctx, uuid.NewString(), id); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("the operator enabling with the wrong client: %v", err)
	}
	e, err = f.svc.EnableByOperator(ctx, client, id)
	if err != nil || !e.Enabled || e.DisabledReason != "" || e.DisabledAt != nil || e.FailingSince != nil {
		t.Fatalf("enabled by the operator: %+v, %v", e, err)
	}
}

func TestUpdateValidates(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	client := uuid.NewString()
	id := f.create(t, client).Endpoint.ID
	bad := []endpoints.Patch{
		{URL: ptr("http://hooks.example.com/")},
		{URL: ptr("https://192.168.1.1/")},
		{Events: []string{"nope"}},
		{Description: ptr(strings.Repeat("x", 501))},
	}
	for _, p := range bad {
		if _, err := f.svc.Update(ctx, client, id, p); reason(err) != fault.InvalidArgument {
			t.Errorf("%+v: %v, want INVALID_ARGUMENT", p, err)
		}
	}
	e, err := f.svc.Update(ctx, client, id, endpoints.Patch{URL: ptr("https://other.example.com/x"), Events: []string{"balance.low"}, Description: ptr("ops")})
	if err != nil || e.URL != "https://other.example.com/x" || strings.Join(e.EventTypes, ",") != "balance.low" || e.Description != "ops" {
		t.Fatalf("%+v, %v", e, err)
	}
	// An empty events list leaves the subscription; ["*"] widens it to every type.
	e, _ = f.svc.Update(ctx, client, id, endpoints.Patch{Description: ptr("")})
	if strings.Join(e.EventTypes, ",") != "balance.low" || e.Description != "" {
		t.Fatalf("%+v", e)
	}
	e, _ = f.svc.Update(ctx, client, id, endpoints.Patch{Events: []string{"*"}})
	if e.EventTypes != nil {
		t.Fatalf("every type: %v", e.EventTypes)
	}
}

// The delivery log reads what the delivery engine writes: rows inserted here as it would.
func TestDeliveryLog(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	client := uuid.NewString()
	id := f.create(t, client).Endpoint.ID
	other := f.create(t, client).Endpoint.ID
	insert := func(endpoint string, status domain.DeliveryStatus, attempts ...string) string {
		t.Helper()
		evt := "evt_" + strings.ReplaceAll(uuid.NewString(), "-", "")
		d := uuid.NewString()
		if _, err := f.pool.Exec(ctx, `INSERT INTO connect.events (id, client_id, type, data, body, created_at) VALUES ($1, $2, 'balance.low', '{}', '{}', now())`, evt, client); err != nil {
			t.Fatal(err)
		}
		if _, err := f.pool.Exec(ctx, `INSERT INTO connect.webhook_deliveries (id, client_id, endpoint_id, event_id, status, attempts, last_status, last_error)
			VALUES ($1, $2, $3, $4, $5, $6, 500, 'HTTP 500')`, d, client, endpoint, evt, status, len(attempts)); err != nil {
			t.Fatal(err)
		}
		for i, a := range attempts {
			if _, err := f.pool.Exec(ctx, `INSERT INTO connect.webhook_attempts (client_id, delivery_id, attempt, http_status, duration_ms, error, started_at)
				VALUES ($5, $1, $2, nullif($3, 0), 12, nullif($4, ''), now())`, d, i+1, map[string]int{"500": 500, "timeout": 0, "200": 200}[a], map[string]string{"timeout": "timeout"}[a], client); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	failed := insert(id, domain.DeliveryFailed, "timeout", "500")
	insert(id, domain.DeliverySucceeded, "500", "200")
	insert(id, domain.DeliveryPending)
	insert(other, domain.DeliveryFailed, "500")

	all, err := f.svc.Deliveries(ctx, client, id, nil, 10, 0)
	if err != nil || all.Total != 3 || len(all.Items) != 3 {
		t.Fatalf("all: %d of %d, %v", len(all.Items), all.Total, err)
	}
	st := domain.DeliveryFailed
	page, err := f.svc.Deliveries(ctx, client, id, &st, 10, 0)
	if err != nil || page.Total != 1 || len(page.Items) != 1 || page.Items[0].ID != failed {
		t.Fatalf("failed: %+v, %v", page, err)
	}
	d := page.Items[0]
	if d.EventType != "balance.low" || len(d.AttemptLog) != 2 {
		t.Fatalf("delivery %+v", d)
	}
	if a := d.AttemptLog[0]; a.Attempt != 1 || a.HTTPStatus != nil || a.Error == nil || *a.Error != "timeout" || a.Duration != 12*time.Millisecond {
		t.Errorf("attempt 1: %+v", a)
	}
	if a := d.AttemptLog[1]; a.Attempt != 2 || a.HTTPStatus == nil || *a.HTTPStatus != 500 || a.Error != nil {
		t.Errorf("attempt 2: %+v", a)
	}
	if _, err := f.svc.Deliveries(ctx, client, id, ptr(domain.DeliveryStatus("LOST")), 10, 0); reason(err) != fault.InvalidArgument {
		t.Errorf("unknown status: %v", err)
	}
	if _, err := f.svc.Deliveries(ctx, uuid.NewString(), id, nil, 10, 0); !errors.Is(err, fault.ErrNotFound) {
		t.Errorf("another client's log: %v", err)
	}
	// Redelivery needs the engine: without one it is UNAVAILABLE, never a silent success; a
	// foreign delivery is not found before that.
	if err := f.svc.Redeliver(ctx, client, failed); !errors.Is(err, endpoints.ErrNoDispatcher) {
		t.Errorf("redeliver without a dispatcher: %v", err)
	}
	if err := f.svc.Redeliver(ctx, uuid.NewString(), failed); !errors.Is(err, fault.ErrNotFound) {
		t.Errorf("redeliver another client's delivery: %v", err)
	}
	// Deleting the endpoint takes its log and secrets with it.
	if err := f.svc.Delete(ctx, client, id); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := f.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM connect.webhook_deliveries WHERE endpoint_id = $1) + (SELECT count(*) FROM connect.webhook_secrets WHERE endpoint_id = $1)`, id).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows left, %v", n, err)
	}
}

func ptr[T any](v T) *T { return &v }
