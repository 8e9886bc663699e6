package relay_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/platform/metricstest"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/relay"
	"github.com/mnvhq/mnv/services/verification/internal/store"
	"github.com/mnvhq/mnv/services/verification/migrations"
)

// connect stands in for Connect's receiver; down makes it refuse.
type connect struct {
	down     atomic.Bool
	received atomic.Int64
}

func (c *connect) RecordVerifiedNumbers(_ context.Context, facts []domain.OutboxFact) error {
	if c.down.Load() {
		return errors.New("connect is away")
	}
	c.received.Add(int64(len(facts)))
	return nil
}

// newRelay is a relay over pool's real store.
func newRelay(t *testing.T, pool *pgxpool.Pool, conn relay.Connect) *relay.Relay {
	stores := pg.NewStores(pool, func(db pg.DB) relay.Store { return store.New(db) })
	return relay.New(stores.Pool(), stores, conn, zaptest.NewLogger(t))
}

func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool, err := pg.Open(ctx, pgtest.NewDatabase(t), pg.PoolConfig{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pg.Migrate(ctx, pool, "verification", migrations.FS); err != nil {
		t.Fatal(err)
	}
	return pool
}

// addFacts writes n outbox rows created age ago.
func addFacts(t *testing.T, pool *pgxpool.Pool, n int, age time.Duration) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `INSERT INTO verification.outbox (client_id, verification_id, number_hash, verified_at, created_at)
		SELECT gen_random_uuid(), gen_random_uuid(), '\x00', now(), now() - $2::interval FROM generate_series(1, $1)`, n, age.String())
	if err != nil {
		t.Fatal(err)
	}
}

// TestMetrics runs the relay over a real outbox while Connect comes and goes, and checks what it
// reports: the backlog's age and size, rows relayed, failed rounds.
func TestMetrics(t *testing.T) {
	pool := newPool(t)
	conn := &connect{}
	reg := prometheus.NewRegistry()
	m, err := relay.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	r := newRelay(t, pool, conn)
	r.Metrics, r.MeasureEvery = m, 0

	// An empty outbox: nothing to relay, no backlog. Asked directly, since every metric of this
	// state equals the zero a fresh counter already holds.
	t.Run("empty outbox", func(t *testing.T) {
		ctx := context.Background()
		if n, err := r.RunOnce(ctx); n != 0 || err != nil {
			t.Errorf("RunOnce = (%d, %v), want (0, nil)", n, err)
		}
		if lag, pending, err := r.Backlog(ctx); lag != 0 || pending != 0 || err != nil {
			t.Errorf("Backlog = (%v, %d, %v), want (0, 0, nil)", lag, pending, err)
		}
	})

	tests := []struct {
		name        string
		prepare     func()
		wantLag     [2]float64 // bounds, seconds
		wantPending float64
		wantRelayed float64 // in total
		wantFailed  float64 // in total
	}{
		{"connect away: the backlog ages", func() { conn.down.Store(true); addFacts(t, pool, 3, time.Minute) }, [2]float64{59, 120}, 3, 0, 1},
		{"connect back: relayed, no backlog", func() { conn.down.Store(false) }, [2]float64{0, 0}, 0, 3, 1},
		{"a fresh fact", func() { conn.down.Store(true); addFacts(t, pool, 1, 0) }, [2]float64{0, 30}, 1, 3, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.prepare()
			// One round of Run: relay, then measure.
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { r.Run(ctx, time.Hour); close(done) }()
			deadline := time.Now().Add(10 * time.Second)
			var got map[string]float64
			for {
				got = metricstest.Gather(t, reg)
				if got["mnv_verification_outbox_pending{}"] == tt.wantPending && got["mnv_verification_outbox_relayed_total{}"] == tt.wantRelayed &&
					got["mnv_verification_outbox_relay_failures_total{}"] == tt.wantFailed || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			cancel()
			<-done
			if lag := got["mnv_verification_outbox_lag_seconds{}"]; lag < tt.wantLag[0] || lag > tt.wantLag[1] {
				t.Errorf("lag %v s, want %v", lag, tt.wantLag)
			}
			for k, want := range map[string]float64{
				"mnv_verification_outbox_pending{}": tt.wantPending, "mnv_verification_outbox_relayed_total{}": tt.wantRelayed,
				"mnv_verification_outbox_relay_failures_total{}": tt.wantFailed,
			} {
				if got[k] != want {
					t.Errorf("%s = %v, want %v", k, got[k], want)
				}
			}
		})
	}
	if conn.received.Load() != 3 {
		t.Errorf("connect received %d facts, want 3", conn.received.Load())
	}
}

// TestBacklogCap checks that the pending count stops at MaxCounted.
func TestBacklogCap(t *testing.T) {
	pool := newPool(t)
	addFacts(t, pool, relay.MaxCounted+5, time.Second)
	_, pending, err := newRelay(t, pool, &connect{}).Backlog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if pending != relay.MaxCounted {
		t.Errorf("pending %d, want the cap %d", pending, relay.MaxCounted)
	}
}
