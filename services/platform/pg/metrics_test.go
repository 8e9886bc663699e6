package pg_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mnvhq/mnv/services/platform/metricstest"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/services/platform/tracing"
)

// TestPoolCollector reads a real pool's statistics through a registry while a connection is
// held.
func TestPoolCollector(t *testing.T) {
	ctx := testCtx(t)
	pool, err := pg.Open(ctx, pgtest.NewDatabase(t), pg.PoolConfig{MaxConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	reg := prometheus.NewRegistry()
	if err := pg.RegisterPool(reg, "test", pool); err != nil {
		t.Fatal(err)
	}
	if err := pg.RegisterPool(nil, "test", pool); err != nil {
		t.Fatalf("RegisterPool(nil) = %v, want nil", err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()

	got := map[string]float64{}
	for series, v := range metricstest.Gather(t, reg) {
		name, labels, _ := strings.Cut(series, "{")
		if labels != "pool=test}" {
			t.Errorf("%s has labels {%s, want pool=test", name, labels)
		}
		got[name] = v
	}
	tests := []struct {
		metric string
		check  func(float64) bool
		want   string
	}{
		{"mnv_db_pool_max_connections", func(v float64) bool { return v == 3 }, "3"},
		{"mnv_db_pool_acquired_connections", func(v float64) bool { return v == 1 }, "1 (the held one)"},
		{"mnv_db_pool_connections", func(v float64) bool { return v >= 1 && v <= 3 }, "1 to 3"},
		{"mnv_db_pool_idle_connections", func(v float64) bool { return v >= 0 }, "present"},
		{"mnv_db_pool_constructing_connections", func(v float64) bool { return v >= 0 }, "present"},
		{"mnv_db_pool_acquires_total", func(v float64) bool { return v >= 1 }, "at least 1"},
		{"mnv_db_pool_empty_acquires_total", func(v float64) bool { return v >= 0 }, "present"},
		{"mnv_db_pool_canceled_acquires_total", func(v float64) bool { return v >= 0 }, "present"},
		{"mnv_db_pool_empty_acquire_wait_seconds_total", func(v float64) bool { return v >= 0 }, "present"},
	}
	for _, tt := range tests {
		v, ok := got[tt.metric]
		if !ok || !tt.check(v) {
			t.Errorf("%s = %v (present %v), want %s", tt.metric, v, ok, tt.want)
		}
	}
}

// TestOpenTracer checks that a pool gets the query tracer only when tracing is on.
func TestOpenTracer(t *testing.T) {
	url := pgtest.NewDatabase(t)
	tests := []struct {
		name string
		on   bool
	}{{"off", false}, {"on", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.on {
				t.Cleanup(tracing.Install(sdktrace.NewTracerProvider()))
			}
			pool, err := pg.Open(testCtx(t), url, pg.PoolConfig{MaxConns: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			if has := pool.Config().ConnConfig.Tracer != nil; has != tt.on {
				t.Errorf("pool has a tracer = %v, want %v", has, tt.on)
			}
		})
	}
}
