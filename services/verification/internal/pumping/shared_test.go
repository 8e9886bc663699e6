package pumping_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mnvhq/mnv/services/platform/metricstest"
	"github.com/mnvhq/mnv/services/platform/ratelimit"
	"github.com/mnvhq/mnv/services/platform/redistest"
	"github.com/mnvhq/mnv/services/verification/internal/pumping"
	"github.com/mnvhq/mnv/services/verification/internal/store"
	"github.com/mnvhq/mnv/services/verification/internal/verificationtest"
)

// countingSpend is a Spend that counts its questions.
type countingSpend struct{ asked atomic.Int64 }

func (s *countingSpend) SpentToday(context.Context, string) (int64, error) {
	s.asked.Add(1)
	return 0, nil
}

// replica is one process's guard: its own rate-limit store and registry, the shared Redis and
// blocks store.
type replica struct {
	g   *pumping.Guard
	reg *prometheus.Registry
}

func newReplica(t *testing.T, cfg pumping.Config, redisURL, prefix string, blocks pumping.Blocks, spend pumping.Spend, log *zap.Logger) replica {
	t.Helper()
	rl, err := ratelimit.Open(ratelimit.Options{RedisURL: redisURL, Service: "verification", Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rl.Close() })
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	reg := prometheus.NewRegistry()
	g, err := pumping.New(cfg, pumping.Ports{
		Blocks: blocks, Spend: spend, Counters: pumping.NewRedisCounters(rdb, prefix+"verification:pumping:", 0),
		PrefixLimiter: rl.Limiter("pumping-prefix", ratelimit.Limit(cfg.PrefixLimit)), NumberLimiter: rl.Limiter("pumping-number", ratelimit.Limit(cfg.NumberLimit)),
	}, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	return replica{g: g, reg: reg}
}

// The velocity budgets and the conversion counts are shared by the replicas through Redis.
func TestVelocityOnRedis(t *testing.T) {
	ctx := context.Background()
	url, prefix := redistest.URL(t), redistest.Prefix(t)
	blocks, _ := newMem()
	cfg := testConfig()
	cfg.BlockMinStarts, cfg.BlockMinConversion = 8, 0.5
	a := newReplica(t, cfg, url, prefix, blocks, memSpend{}, nil)
	b := newReplica(t, cfg, url, prefix, blocks, memSpend{}, nil)
	// The number's burst of 2, spent on two replicas.
	if err := a.g.Allow(ctx, gb, "+447400123456", ""); err != nil {
		t.Fatal(err)
	}
	if err := b.g.Allow(ctx, gb, "+447400123456", ""); err != nil {
		t.Fatal(err)
	}
	if err := a.g.Allow(ctx, gb, "+447400123456", ""); pumping.ReasonOf(err) != pumping.NumberVelocity {
		t.Fatalf("third send = %v, want NUMBER_VELOCITY", err)
	}
	// The prefix's burst of 5: two spent (the refused send spent none), three left.
	for i, want := range []pumping.Reason{"", "", "", pumping.PrefixVelocity} {
		r := []replica{a, b}[i%2]
		if err := r.g.Allow(ctx, gb, fmt.Sprintf("+4474001235%02d", i), ""); pumping.ReasonOf(err) != want {
			t.Fatalf("prefix send %d: %v, want %q", i, err, want)
		}
	}
	// The eighth start on +4474001, counted across both, none checked: the conversion collapsed.
	if err := b.g.Allow(ctx, gb, "+447400123599", ""); pumping.ReasonOf(err) != pumping.PrefixBlocked {
		t.Fatalf("eighth start = %v, want PREFIX_BLOCKED", err)
	}
	if _, ok := blocks.rows["+4474001"]; !ok || blocks.rows["+4474001"].Starts != 8 {
		t.Fatalf("blocks = %+v", blocks.rows)
	}
}

// A burst of 10,000 starts on a premium prefix, across two replicas with real Redis and
// PostgreSQL: every one refused, no spend asked, the prefix blocked with one row, one alert.
func TestPremiumBurst(t *testing.T) {
	ctx := context.Background()
	pool := verificationtest.Database(t, 8)
	st := store.New(pool)
	url, prefix := redistest.URL(t), redistest.Prefix(t)
	core, logs := observer.New(zapcore.WarnLevel)
	log := zap.New(core)
	spend := &countingSpend{}
	cfg := pumping.DefaultConfig()
	cfg.DailyCap = 1000
	replicas := []replica{
		newReplica(t, cfg, url, prefix, st, spend, log),
		newReplica(t, cfg, url, prefix, st, spend, log),
	}
	client := pumping.Client{ID: "c-attacked", Sandbox: true} // the allow-list aside: the premium rule alone
	var wg sync.WaitGroup
	var allowed, other atomic.Int64
	work := make(chan int)
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := replicas[w%2]
			for i := range work {
				err := r.g.Allow(ctx, client, fmt.Sprintf("+88161234%04d", i), "")
				switch pumping.ReasonOf(err) {
				case pumping.PremiumPrefix:
				case "":
					if err == nil {
						allowed.Add(1)
					} else {
						other.Add(1)
						t.Error(err)
					}
				default:
					other.Add(1)
				}
			}
		}()
	}
	for i := range 10000 {
		work <- i
	}
	close(work)
	wg.Wait()
	if allowed.Load() != 0 || other.Load() != 0 {
		t.Fatalf("%d allowed, %d refused for another reason; want all PREMIUM_PREFIX", allowed.Load(), other.Load())
	}
	if n := spend.asked.Load(); n != 0 {
		t.Errorf("the spend was asked %d times", n)
	}
	var rows int
	var starts int64
	if err := pool.QueryRow(ctx, `SELECT count(*), max(starts) FROM verification.blocked_prefixes WHERE prefix = '+8816123'`).Scan(&rows, &starts); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || starts < cfg.BlockMinStarts {
		t.Fatalf("%d block rows, starts %d", rows, starts)
	}
	var alerts float64
	for _, r := range replicas {
		alerts += metricstest.Sum(metricstest.Gather(t, r.reg), "mnv_pumping_prefixes_blocked_total")
	}
	if alerts != 1 {
		t.Errorf("prefixes_blocked_total = %v across the replicas, want 1", alerts)
	}
	if n := logs.FilterField(zap.String("event", pumping.EventPrefixBlocked)).Len(); n != 1 {
		t.Errorf("%d alert lines, want 1", n)
	}
	// The block holds for the prefix's other numbers once the deny list no longer names it.
	cfg.DenyPrefixes = nil
	fresh := newReplica(t, cfg, url, prefix, st, spend, nil)
	if err := fresh.g.Allow(ctx, client, "+881612349999", ""); pumping.ReasonOf(err) != pumping.PrefixBlocked {
		t.Fatalf("after the deny list: %v, want PREFIX_BLOCKED", err)
	}
}
