package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/riverqueue/river"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/outbox"
	"github.com/mnvhq/mnv/services/platform/outbox/outboxtest"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
)

// recorder is a publisher that fails its first failures calls, then records.
type recorder struct {
	mu       sync.Mutex
	failures int
	got      []events.Event
	calls    int
	done     chan struct{}
}

func (r *recorder) Publish(_ context.Context, evs []events.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.calls <= r.failures {
		return errors.New("connect is away")
	}
	r.got = append(r.got, evs...)
	select {
	case r.done <- struct{}{}:
	default:
	}
	return nil
}

// newQueue is a fresh database with River's tables in schema svc, migrated migrations times,
// and a queue over it whose metrics are registered on reg.
func newQueue(t *testing.T, migrations int) (pool *pgxpool.Pool, q *jobs.Queue, reg *prometheus.Registry) {
	t.Helper()
	ctx := context.Background()
	pool, err := pg.Open(ctx, pgtest.NewDatabase(t), pg.PoolConfig{MaxConns: 8, ApplicationName: "outbox-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE SCHEMA svc`); err != nil {
		t.Fatal(err)
	}
	for range migrations {
		if err := jobs.Migrate(ctx, pool, "svc"); err != nil {
			t.Fatal(err)
		}
	}
	reg = prometheus.NewRegistry()
	q, err = jobs.New(pool, jobs.Options{Schema: "svc", Log: zaptest.NewLogger(t), Registerer: reg, FetchPoll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return pool, q, reg
}

// TestEmitFollowsTheTransaction: an event written in a transaction that rolls back is never
// forwarded; one that commits is, at least once, through a publisher that fails first.
func TestEmitFollowsTheTransaction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Migrated twice, as two replicas starting together would: the second finds nothing to do.
	pool, q, reg := newQueue(t, 2)
	rec := &recorder{failures: 1, done: make(chan struct{}, 1)}
	outbox.Register(q.Workers(), rec)
	q.AddQueue(outbox.Queue, 2)
	box := outbox.New(q)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- q.Run(runCtx, 5*time.Second) }()

	lost, err := events.New("client-1", events.BalanceLow, events.BalanceLowData{Balance: 5, Threshold: 10}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rolledBack := errors.New("the fact failed")
	err = pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		if err := box.Emit(ctx, tx, lost); err != nil {
			return err
		}
		return rolledBack
	})
	if !errors.Is(err, rolledBack) {
		t.Fatalf("InTx: %v", err)
	}
	kept, err := events.New("client-1", events.APIKeyCreated, events.APIKeyData{KeyID: "k1", Name: "ci", Role: "MEMBER", Hint: "ab12"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := pg.InTx(ctx, pool, func(tx pgx.Tx) error { return box.Emit(ctx, tx, kept) }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rec.done:
	case <-ctx.Done():
		t.Fatal("the committed event was never published")
	}
	// Give a wrongly enqueued rolled-back event the time to show up.
	time.Sleep(300 * time.Millisecond)
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) != 1 || rec.got[0].ID != kept.ID || rec.got[0].ClientID != "client-1" || string(rec.got[0].Data) != string(kept.Data) ||
		!rec.got[0].CreatedAt.Equal(kept.CreatedAt) {
		t.Fatalf("published %+v, want exactly %+v", rec.got, kept)
	}
	if rec.calls != 2 {
		t.Fatalf("publisher called %d times, want 2 (one failure, one success)", rec.calls)
	}
	if got := testutil.ToFloat64(counter(t, reg, outbox.Kind, jobs.OutcomeRetried)); got != 1 {
		t.Fatalf("retried attempts %v, want 1", got)
	}
	if got := testutil.ToFloat64(counter(t, reg, outbox.Kind, jobs.OutcomeCompleted)); got != 1 {
		t.Fatalf("completed attempts %v, want 1", got)
	}
}

func counter(t *testing.T, reg *prometheus.Registry, kind, outcome string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "mnv_job_attempts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == kind && labels["outcome"] == outcome {
				return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, func() float64 { return m.GetCounter().GetValue() })
			}
		}
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, func() float64 { return 0 })
}

// rejecter refuses, as connect does, any call holding a malformed event, and holds its first
// call a while so the other jobs' events queue behind it.
type rejecter struct {
	mu        sync.Mutex
	calls     [][]string // the ids of each call's events
	published map[string]bool
}

func (r *rejecter) Publish(_ context.Context, evs []events.Event) error {
	r.mu.Lock()
	first := len(r.calls) == 0
	var ids []string
	bad := false
	for _, e := range evs {
		ids = append(ids, e.ID)
		bad = bad || e.ClientID == "malformed"
	}
	r.calls = append(r.calls, ids)
	if !bad {
		for _, id := range ids {
			r.published[id] = true
		}
	}
	r.mu.Unlock()
	if first {
		time.Sleep(300 * time.Millisecond)
	}
	if bad {
		return outbox.ErrRejected
	}
	return nil
}

// TestMergedForwardsCancelOnlyTheMalformed: the jobs worked at once share a call; a call
// refused for one malformed event is made again job by job, and a job's events one by one, so
// every other event is published, and only the jobs of malformed events are cancelled.
func TestMergedForwardsCancelOnlyTheMalformed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, q, reg := newQueue(t, 1)
	rec := &rejecter{published: map[string]bool{}}
	outbox.Register(q.Workers(), rec)
	q.AddQueue(outbox.Queue, 16)
	// Twelve jobs of one event each, the eighth malformed, and one job of three events whose
	// second is malformed.
	event := func(client string) events.Event {
		ev, err := events.New(client, events.Ping, events.PingData{}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	var evs []events.Event
	malformed := map[string]bool{}
	for i := range 12 {
		client := "client-1"
		if i == 7 {
			client = "malformed"
		}
		evs = append(evs, event(client))
		if err := pg.InTx(ctx, pool, func(tx pgx.Tx) error { return outbox.New(q).Emit(ctx, tx, evs[i]) }); err != nil {
			t.Fatal(err)
		}
	}
	siblings := []events.Event{event("client-2"), event("malformed"), event("client-2")}
	if err := pg.InTx(ctx, pool, func(tx pgx.Tx) error { return outbox.New(q).Emit(ctx, tx, siblings...) }); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, siblings...)
	for _, ev := range evs {
		malformed[ev.ID] = ev.ClientID == "malformed"
	}
	const jobCount = 13
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- q.Run(runCtx, 5*time.Second) }()
	for {
		done := testutil.ToFloat64(counter(t, reg, outbox.Kind, jobs.OutcomeCompleted)) + testutil.ToFloat64(counter(t, reg, outbox.Kind, jobs.OutcomeCancelled))
		if done == jobCount {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%v of %d jobs finished", done, jobCount)
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i, ev := range evs {
		if rec.published[ev.ID] == malformed[ev.ID] {
			t.Errorf("event %d (of %s) published: %v", i, ev.ClientID, rec.published[ev.ID])
		}
	}
	if got := testutil.ToFloat64(counter(t, reg, outbox.Kind, jobs.OutcomeCancelled)); got != 2 {
		t.Errorf("cancelled jobs %v, want 2 (the malformed events')", got)
	}
	largest := 0
	for _, c := range rec.calls {
		largest = max(largest, len(c))
	}
	if largest < 2 {
		t.Errorf("calls %v: no call merged the events of several jobs", rec.calls)
	}
}

// TestArgsReadBothShapes: a job of this version carries its events as a list; a job of one
// event that an earlier version wrote (its fields at the top level) still reads as that event.
func TestArgsReadBothShapes(t *testing.T) {
	at := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	one := outbox.EventArgs{ID: "evt_1", Type: events.Ping, ClientID: "c1", CreatedAt: at, Data: `{"b":1,"a":2}`}
	two := outbox.EventArgs{ID: "evt_2", Type: events.Ping, ClientID: "c1", CreatedAt: at, Data: `{}`}
	for _, tc := range []struct {
		name string
		json string
		want []outbox.EventArgs
	}{
		{"list", `{"events":[{"id":"evt_1","type":"ping","client_id":"c1","created_at":"2026-11-24T08:00:00Z","data":"{\"b\":1,\"a\":2}"},` +
			`{"id":"evt_2","type":"ping","client_id":"c1","created_at":"2026-11-24T08:00:00Z","data":"{}"}]}`, []outbox.EventArgs{one, two}},
		{"one event, earlier shape", `{"id":"evt_1","type":"ping","client_id":"c1","created_at":"2026-11-24T08:00:00Z","data":"{\"b\":1,\"a\":2}"}`, []outbox.EventArgs{one}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a outbox.Args
			if err := json.Unmarshal([]byte(tc.json), &a); err != nil {
				t.Fatal(err)
			}
			if len(a.Events) != len(tc.want) {
				t.Fatalf("events %+v, want %+v", a.Events, tc.want)
			}
			for i := range a.Events {
				if got := a.Events[i]; got.ID != tc.want[i].ID || got.Data != tc.want[i].Data || !got.CreatedAt.Equal(at) || got.ClientID != "c1" {
					t.Errorf("event %d %+v, want %+v", i, got, tc.want[i])
				}
			}
		})
	}
}

// TestForwardJSON: events in a forward job's JSON, as another job kind carries them, are
// published whole and in order; one that does not read cancels the job rather than retrying
// it for days.
func TestForwardJSON(t *testing.T) {
	at := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	one, err := events.New("c1", events.Ping, map[string]int{"b": 1, "a": 2}, at)
	if err != nil {
		t.Fatal(err)
	}
	two, err := events.New("c2", events.Ping, map[string]int{}, at)
	if err != nil {
		t.Fatal(err)
	}
	raw := func(e events.Event) json.RawMessage {
		b, err := outbox.EventJSON(e)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name       string
		raw        []json.RawMessage
		wantCancel bool
		want       []events.Event
	}{
		{name: "two events", raw: []json.RawMessage{raw(one), raw(two)}, want: []events.Event{one, two}},
		{name: "one does not read", raw: []json.RawMessage{raw(one), json.RawMessage(`{"id": 7}`)}, wantCancel: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &outboxtest.Recorder{}
			err := outbox.ForwardJSON(context.Background(), rec, tt.raw)
			var cancel *river.JobCancelError
			if got := errors.As(err, &cancel); got != tt.wantCancel || !tt.wantCancel && err != nil {
				t.Fatalf("ForwardJSON = %v, want a cancel: %t", err, tt.wantCancel)
			}
			got := rec.Events()
			if len(got) != len(tt.want) {
				t.Fatalf("published %+v, want %+v", got, tt.want)
			}
			for i := range got {
				g, w := got[i], tt.want[i]
				if g.ID != w.ID || g.Type != w.Type || g.ClientID != w.ClientID || !g.CreatedAt.Equal(w.CreatedAt) || string(g.Data) != string(w.Data) {
					t.Errorf("event %d published %+v, want %+v", i, g, w)
				}
			}
		})
	}
}
