package ratelimit_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mnvhq/mnv/services/platform/metricstest"
	"github.com/mnvhq/mnv/services/platform/ratelimit"
	"github.com/mnvhq/mnv/services/platform/redistest"
)

// open makes a Store on the test Redis (redisURL "" keeps budgets in-process) with a key
// prefix of the test's own, closed when the test ends.
func open(t *testing.T, redisURL, prefix string, log *zap.Logger, reg prometheus.Registerer) *ratelimit.Store {
	t.Helper()
	s, err := ratelimit.Open(ratelimit.Options{RedisURL: redisURL, Prefix: prefix, Log: log, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// backend is one way of keeping budgets: url is Redis's, or empty for the in-process store.
type backend struct{ name, url string }

// backends are the two ways of keeping budgets; the tests that hold for both run on each.
func backends(t *testing.T) []backend {
	bs := []backend{{"in-process", ""}}
	if testing.Short() {
		// The in-process store still runs; redistest.URL would skip the whole test.
		t.Log("the Redis backend is not tested under -short")
		return bs
	}
	return append(bs, backend{"redis", redistest.URL(t)})
}

// TestLimiter: both backends spend, refuse with the wait until the next token, peek without
// spending and refill at the rate.
func TestLimiter(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			reg := prometheus.NewRegistry()
			l := open(t, b.url, redistest.Prefix(t), nil, reg).Limiter("credential", ratelimit.Limit{Rate: 1, Burst: 3})
			if ok, _, err := l.Peek(ctx, "a"); err != nil || !ok {
				t.Fatalf("peek at an unused key: %v %v", ok, err)
			}
			for i := range 3 {
				if ok, _, err := l.Allow(ctx, "a"); err != nil || !ok {
					t.Fatalf("request %d of the burst: %v %v", i+1, ok, err)
				}
			}
			ok, wait, err := l.Allow(ctx, "a")
			if err != nil || ok || wait <= 0 || wait > time.Second {
				t.Fatalf("4th request: allowed %v, wait %v, %v; want refused for at most 1s", ok, wait, err)
			}
			ok, peekWait, err := l.Peek(ctx, "a")
			if err != nil || ok || peekWait <= 0 || peekWait > time.Second {
				t.Fatalf("peek at an empty bucket: allowed %v, wait %v, %v", ok, peekWait, err)
			}
			if ok, _, _ := l.Allow(ctx, "b"); !ok {
				t.Fatal("another key shares the bucket")
			}
			time.Sleep(peekWait + 20*time.Millisecond)
			if ok, _, _ := l.Peek(ctx, "a"); !ok {
				t.Fatal("no token after the wait Peek gave")
			}
			if ok, _, _ := l.Peek(ctx, "a"); !ok {
				t.Fatal("Peek spent the token")
			}
			if ok, _, _ := l.Allow(ctx, "a"); !ok {
				t.Fatal("the bucket did not refill")
			}
			if ok, _, _ := l.Allow(ctx, "a"); ok {
				t.Fatal("the refill gave more than one token in a second")
			}
			// Two refused Allows and one refused Peek.
			if got := metricstest.Gather(t, reg)["mnv_ratelimit_refused_total{limit=credential}"]; got != 3 {
				t.Fatalf("mnv_ratelimit_refused_total = %v, want 3", got)
			}
		})
	}
}

// TestReplicaMath measures what docs/operations.md states: two replicas keeping budgets
// in-process allow twice the burst between them; through Redis they share one.
func TestReplicaMath(t *testing.T) {
	ctx := context.Background()
	lim := ratelimit.Limit{Rate: 0.01, Burst: 5} // no refill within the test
	want := map[string]int{"in-process": 2 * lim.Burst, "redis": lim.Burst}
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			prefix := redistest.Prefix(t) // the same deployment: the same keys
			replicas := []ratelimit.Limiter{
				open(t, b.url, prefix, nil, nil).Limiter("credential", lim),
				open(t, b.url, prefix, nil, nil).Limiter("credential", lim),
			}
			allowed := 0
			for i := range 40 { // a balancer's round robin
				ok, _, err := replicas[i%2].Allow(ctx, "key:k1")
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					allowed++
				}
			}
			if allowed != want[b.name] {
				t.Fatalf("two replicas allowed %d of 40 requests, want %d (burst %d)", allowed, want[b.name], lim.Burst)
			}
		})
	}
}

// TestServicesKeepTheirOwnBudgets: in Redis, as in-process, a credential's budget at one
// service is not spent by its calls to another.
func TestServicesKeepTheirOwnBudgets(t *testing.T) {
	ctx := context.Background()
	lim := ratelimit.Limit{Rate: 0.01, Burst: 2}
	prefix := redistest.Prefix(t)
	store := func(service string) *ratelimit.Store {
		s, err := ratelimit.Open(ratelimit.Options{Service: service, RedisURL: redistest.URL(t), Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	services := map[string][]ratelimit.Limiter{
		"accounts":     {store("accounts").Limiter("credential", lim), store("accounts").Limiter("credential", lim)},
		"verification": {store("verification").Limiter("credential", lim)},
	}
	for name, replicas := range services {
		allowed := 0
		for i := range 6 {
			if ok, _, err := replicas[i%len(replicas)].Allow(ctx, "key:k1"); err != nil {
				t.Fatal(err)
			} else if ok {
				allowed++
			}
		}
		if allowed != lim.Burst {
			t.Fatalf("%s: %d of 6 allowed, want its own burst %d", name, allowed, lim.Burst)
		}
	}
}

// proxy stands between a Store and the test Redis, so a test can take "Redis" away: it
// forwards, refuses connections, or accepts them and never answers.
type proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	mode  string // "up", "refuse", "hang"
	conns []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, mode: "up"}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.set("refuse") })
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		mode := p.mode
		if mode != "refuse" {
			p.conns = append(p.conns, c)
		}
		p.mu.Unlock()
		switch mode {
		case "refuse":
			c.Close()
		case "up":
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}
}

// set changes the mode and drops every open connection, as a Redis restart would.
func (p *proxy) set(mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = mode
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// through returns u with its host replaced by the proxy's.
func (p *proxy) through(t *testing.T, u string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	parsed.Host = p.ln.Addr().String()
	return parsed.String()
}

// TestRedisOutageFailsOpen: while Redis is away (refusing, or hanging), decisions fall back to
// the in-process buckets: requests are neither failed nor let through without limit, each
// decision stays fast, the outage is logged once and counted; when Redis is back, it decides
// again.
func TestRedisOutageFailsOpen(t *testing.T) {
	for _, outage := range []string{"refuse", "hang"} {
		t.Run(outage, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			target, err := url.Parse(redistest.URL(t))
			if err != nil {
				t.Fatal(err)
			}
			p := startProxy(t, target.Host)
			core, logs := observer.New(zapcore.InfoLevel)
			reg := prometheus.NewRegistry()
			lim := ratelimit.Limit{Rate: 0.01, Burst: 3}
			l := open(t, p.through(t, target.String()), redistest.Prefix(t), zap.New(core), reg).Limiter("credential", lim)

			// allowed spends the key's budget until refused and returns how many passed, and
			// the slowest decision.
			allowed := func() (n int, slowest time.Duration) {
				for range 10 {
					start := time.Now()
					ok, _, err := l.Allow(ctx, "key:k1")
					slowest = max(slowest, time.Since(start))
					if err != nil {
						t.Fatalf("Allow failed: %v", err)
					}
					if !ok {
						return n, slowest
					}
					n++
				}
				return n, slowest
			}

			p.set(outage)
			n, slowest := allowed()
			if n != lim.Burst {
				t.Fatalf("Redis %s: %d requests allowed, want the in-process burst %d", outage, n, lim.Burst)
			}
			if slowest > 2*time.Second {
				t.Fatalf("Redis %s: a decision took %v", outage, slowest)
			}
			errs := metricstest.Gather(t, reg)["mnv_ratelimit_redis_errors_total{}"]
			if errs < 1 {
				t.Fatalf("Redis %s: %v errors counted", outage, errs)
			}
			if got := logs.FilterMessageSnippet("kept in this process").Len(); got != 1 {
				t.Fatalf("outage logged %d times, want once", got)
			}

			p.set("up")
			time.Sleep(ratelimit.RedisRetryAfter + 50*time.Millisecond)
			// The in-process bucket is empty: every request allowed now is Redis's decision.
			if n, _ := allowed(); n != lim.Burst {
				t.Fatalf("Redis back: %d requests allowed, want Redis's burst %d", n, lim.Burst)
			}
			if got := logs.FilterMessageSnippet("shared through Redis again").Len(); got != 1 {
				t.Fatalf("recovery logged %d times, want once", got)
			}
		})
	}
}

func TestOpenHidesTheURL(t *testing.T) {
	_, err := ratelimit.Open(ratelimit.Options{RedisURL: "redis://user:s3cr3t-pass@host:bad-port/0"})
	if err == nil {
		t.Fatal("a bad URL was accepted")
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("the error shows the password: %v", err)
	}
}

func TestLimitOff(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends(t) {
		l := open(t, b.url, redistest.Prefix(t), nil, nil).Limiter("credential", ratelimit.Limit{})
		for range 1000 {
			if ok, _, err := l.Allow(ctx, "a"); err != nil || !ok {
				t.Fatalf("%s: refused with the limit off", b.name)
			}
		}
	}
}
