package outbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/outbox"
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

// TestEmitFollowsTheTransaction: an event written in a transaction that rolls back is never
// forwarded; one that commits is, at least once, through a publisher that fails first.
func TestEmitFollowsTheTransaction(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pg.Open(ctx, pgtest.NewDatabase(t), pg.PoolConfig{MaxConns: 8, ApplicationName: "outbox-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE SCHEMA svc`); err != nil {
		t.Fatal(err)
	}
	// Twice, as two replicas starting together would: the second finds nothing to do.
	for range 2 {
		if err := jobs.Migrate(ctx, pool, "svc"); err != nil {
			t.Fatal(err)
		}
	}
	rec := &recorder{failures: 1, done: make(chan struct{}, 1)}
	reg := prometheus.NewRegistry()
	q, err := jobs.New(pool, jobs.Options{Schema: "svc", Log: zaptest.NewLogger(t), Registerer: reg, FetchPoll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
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
