package pumping

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisCounters keeps the per-prefix counts in Redis, shared by every replica, in fixed windows:
// one hash per prefix and window (fields starts and verified), expiring two windows after the
// window's start, so a prefix's counts cost nothing once it goes quiet.
type RedisCounters struct {
	rdb    redis.UniversalClient
	prefix string
	window time.Duration
	now    func() time.Time
}

// DefaultWindow is the counts' window: an hour, long enough for the codes sent in it to be
// checked, short enough that a collapse is seen while the attack runs.
const DefaultWindow = time.Hour

// NewRedisCounters keeps counts under keyPrefix ("mnv:verification:pumping:") in windows of
// window (DefaultWindow when 0).
func NewRedisCounters(rdb redis.UniversalClient, keyPrefix string, window time.Duration) *RedisCounters {
	if window <= 0 {
		window = DefaultWindow
	}
	return &RedisCounters{rdb: rdb, prefix: keyPrefix, window: window, now: time.Now}
}

func (r *RedisCounters) key(prefix string) string {
	w := r.now().UnixNano() / int64(r.window)
	return r.prefix + "conv:" + prefix + ":" + strconv.FormatInt(w, 10)
}

// AddStart implements Counters: one round trip (HINCRBY, HGET, EXPIRE in a pipeline).
func (r *RedisCounters) AddStart(ctx context.Context, prefix string) (int64, int64, error) {
	k := r.key(prefix)
	pipe := r.rdb.TxPipeline()
	starts := pipe.HIncrBy(ctx, k, "starts", 1)
	verified := pipe.HGet(ctx, k, "verified")
	pipe.Expire(ctx, k, 2*r.window)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, fmt.Errorf("pumping: redis: %w", err)
	}
	v, err := verified.Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, fmt.Errorf("pumping: redis: %w", err)
	}
	return starts.Val(), v, nil
}

// AddVerified implements Counters.
func (r *RedisCounters) AddVerified(ctx context.Context, prefix string) error {
	k := r.key(prefix)
	pipe := r.rdb.TxPipeline()
	pipe.HIncrBy(ctx, k, "verified", 1)
	pipe.Expire(ctx, k, 2*r.window)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("pumping: redis: %w", err)
	}
	return nil
}

// LocalCounters keeps the per-prefix counts in this process, in the same fixed windows, for a
// deployment without Redis (one replica, `make run`): N replicas each judge a prefix by their
// share of its traffic, so a collapse is seen later, never wrongly. Only the current window is
// kept.
type LocalCounters struct {
	window time.Duration
	now    func() time.Time

	mu     sync.Mutex
	at     int64 // the current window's number
	counts map[string]*[2]int64
}

// NewLocalCounters keeps counts in windows of window (DefaultWindow when 0).
func NewLocalCounters(window time.Duration) *LocalCounters {
	if window <= 0 {
		window = DefaultWindow
	}
	return &LocalCounters{window: window, now: time.Now, counts: map[string]*[2]int64{}}
}

func (l *LocalCounters) get(prefix string) *[2]int64 {
	if w := l.now().UnixNano() / int64(l.window); w != l.at {
		l.at, l.counts = w, map[string]*[2]int64{}
	}
	c, ok := l.counts[prefix]
	if !ok {
		c = &[2]int64{}
		l.counts[prefix] = c
	}
	return c
}

// AddStart implements Counters.
func (l *LocalCounters) AddStart(_ context.Context, prefix string) (int64, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.get(prefix)
	c[0]++
	return c[0], c[1], nil
}

// AddVerified implements Counters.
func (l *LocalCounters) AddVerified(_ context.Context, prefix string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.get(prefix)[1]++
	return nil
}
