package ratelimit

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// Options configure a Store.
type Options struct {
	// RedisURL is the shared server (redis:// or rediss://, MNV_REDIS_URL); empty keeps every
	// budget in this process.
	RedisURL string
	// Service names the process's component ("accounts", "gateway"): in Redis its budgets are
	// its own, as they are in-process, so a credential's budget at accounts and at
	// verification never meet.
	Service string
	// Prefix is put before every key in Redis; default "mnv:". Tests give each their own.
	Prefix string
	// Log receives the start and end of a Redis outage.
	Log *zap.Logger
	// Registerer receives the metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Redis timeouts: a limiter sits on every request's path, so a slow Redis must cost little
// before the decision falls back to this process.
const (
	redisDialTimeout = time.Second
	redisIOTimeout   = 250 * time.Millisecond
	// redisRetryAfter is how long decisions stay in-process after a Redis error before Redis is
	// tried again, so that an unreachable server does not add its timeout to every request.
	redisRetryAfter = time.Second
)

// Store makes the limiters of one process. With Redis, a failed call (unreachable, slow,
// refusing) never refuses a request nor fails it: the decision is made by the limiter's
// in-process buckets instead (fail open to the per-replica limits, not to no limit), the
// outage is logged once when it starts and once when it ends, and counted in
// mnv_ratelimit_redis_errors_total. A limiter outage must not take the API down.
type Store struct {
	rdb    *redis.Client
	prefix string
	log    *zap.Logger

	refused     *prometheus.CounterVec
	redisErrors prometheus.Counter

	// down is set from a Redis error until Redis answers again; meanwhile Redis is tried
	// again only from retryAt (unix nanoseconds).
	down    atomic.Bool
	retryAt atomic.Int64
}

// Open makes a Store. It does not contact Redis: a process starts, and limits, while Redis is
// away.
func Open(o Options) (*Store, error) {
	s := &Store{prefix: o.Prefix, log: o.Log}
	if s.prefix == "" {
		s.prefix = "mnv:"
	}
	if o.Service != "" {
		s.prefix += o.Service + ":"
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	s.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "mnv", Subsystem: "ratelimit", Name: "refused_total",
		Help: "Requests that found their rate-limit budget empty (answered 429), by limit.",
	}, []string{"limit"})
	s.redisErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "mnv", Subsystem: "ratelimit", Name: "redis_errors_total",
		Help: "Failed calls to the shared rate-limit Redis; each one's decision was made in-process.",
	})
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{s.refused, s.redisErrors} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	if o.RedisURL == "" {
		return s, nil
	}
	opts, err := redis.ParseURL(o.RedisURL)
	if err != nil {
		// The parser's error may quote the URL, password and all.
		return nil, errors.New("MNV_REDIS_URL: not a valid redis:// or rediss:// URL")
	}
	opts.DialTimeout = redisDialTimeout
	opts.ReadTimeout, opts.WriteTimeout, opts.PoolTimeout = redisIOTimeout, redisIOTimeout, redisIOTimeout
	opts.ContextTimeoutEnabled = true
	opts.MaxRetries = -1 // the fallback is the retry
	s.rdb = redis.NewClient(opts)
	return s, nil
}

// Shared reports whether budgets are kept in Redis.
func (s *Store) Shared() bool { return s.rdb != nil }

// Close closes the Redis connections, if any.
func (s *Store) Close() error {
	if s.rdb == nil {
		return nil
	}
	return s.rdb.Close()
}

// Limiter returns the limiter of the budgets called name ("credential", "address"): Redis keys
// <prefix><service>:<name>:<key>, refusals counted under the label name.
func (s *Store) Limiter(name string, l Limit) Limiter {
	refused := s.refused.WithLabelValues(name)
	if l.Off() {
		return unlimited{}
	}
	local := NewLocal(l)
	if s.rdb == nil {
		return &counted{Limiter: local, refused: refused}
	}
	return &counted{Limiter: &failOpen{store: s, shared: NewRedis(s.rdb, s.prefix+name+":", l), local: local}, refused: refused}
}

// counted counts the decisions that found a budget empty: the requests answered 429, whether
// the budget is spent by the request (Allow) or checked before it (Peek, failed
// authentications).
type counted struct {
	Limiter
	refused prometheus.Counter
}

func (c *counted) Allow(ctx context.Context, key string) (bool, time.Duration, error) {
	return c.count(c.Limiter.Allow(ctx, key))
}

func (c *counted) Peek(ctx context.Context, key string) (bool, time.Duration, error) {
	return c.count(c.Limiter.Peek(ctx, key))
}

func (c *counted) count(ok bool, wait time.Duration, err error) (bool, time.Duration, error) {
	if err == nil && !ok {
		c.refused.Inc()
	}
	return ok, wait, err
}

// failOpen asks Redis, and its in-process buckets when Redis fails.
type failOpen struct {
	store  *Store
	shared *Redis
	local  *Local
}

func (f *failOpen) Allow(ctx context.Context, key string) (bool, time.Duration, error) {
	return f.decide(ctx, key, f.shared.Allow, f.local.Allow)
}

func (f *failOpen) Peek(ctx context.Context, key string) (bool, time.Duration, error) {
	return f.decide(ctx, key, f.shared.Peek, f.local.Peek)
}

type decision func(context.Context, string) (bool, time.Duration, error)

func (f *failOpen) decide(ctx context.Context, key string, shared, local decision) (bool, time.Duration, error) {
	if !f.store.redisUsable(time.Now()) {
		return local(ctx, key)
	}
	ok, wait, err := shared(ctx, key)
	if err == nil {
		f.store.redisAnswered()
		return ok, wait, nil
	}
	if ctx.Err() == nil { // a caller that went away says nothing about Redis
		f.store.redisFailed(err)
	}
	return local(ctx, key)
}

func (s *Store) redisUsable(now time.Time) bool {
	return !s.down.Load() || now.UnixNano() >= s.retryAt.Load()
}

func (s *Store) redisFailed(err error) {
	s.redisErrors.Inc()
	s.retryAt.Store(time.Now().Add(redisRetryAfter).UnixNano())
	if s.down.CompareAndSwap(false, true) {
		s.log.Warn("rate limits are kept in this process until Redis answers again: each replica now allows the full rate", zap.Error(err))
	}
}

func (s *Store) redisAnswered() {
	if s.down.Load() && s.down.CompareAndSwap(true, false) {
		s.log.Info("rate limits are shared through Redis again")
	}
}
