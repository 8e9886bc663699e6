package ratelimit

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Local keeps a token bucket per key in this process. With N replicas behind a balancer a key
// gets up to N times the rate, which the configuration must take into account; Redis shares
// one budget instead.
type Local struct {
	limit rate.Limit
	burst int
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	sweepAt int
}

// NewLocal keeps budgets of l in this process. A limit that is off allows everything.
func NewLocal(l Limit) *Local {
	r := rate.Limit(l.Rate)
	if l.Off() {
		r = rate.Inf
	}
	return &Local{limit: r, burst: l.burst(), now: time.Now, buckets: map[string]*rate.Limiter{}, sweepAt: 1024}
}

// Allow implements Limiter; it never fails.
func (c *Local) Allow(_ context.Context, key string) (bool, time.Duration, error) {
	ok, wait := c.allowAt(key, c.now())
	return ok, wait, nil
}

// Peek implements Limiter; it never fails.
func (c *Local) Peek(_ context.Context, key string) (bool, time.Duration, error) {
	ok, wait := c.peekAt(key, c.now())
	return ok, wait, nil
}

func (c *Local) allowAt(key string, now time.Time) (bool, time.Duration) {
	if c.limit == rate.Inf {
		return true, 0
	}
	c.mu.Lock()
	b, ok := c.buckets[key]
	if !ok {
		c.sweep(now)
		b = rate.NewLimiter(c.limit, c.burst)
		c.buckets[key] = b
	}
	c.mu.Unlock()
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

func (c *Local) peekAt(key string, now time.Time) (bool, time.Duration) {
	if c.limit == rate.Inf {
		return true, 0
	}
	c.mu.Lock()
	b, ok := c.buckets[key]
	c.mu.Unlock()
	if !ok {
		return true, 0 // a key never seen has a full bucket
	}
	tokens := b.TokensAt(now)
	if tokens >= 1 {
		return true, 0
	}
	return false, time.Duration((1 - tokens) / float64(c.limit) * float64(time.Second))
}

// sweep drops full buckets (keys idle long enough to have refilled) once the map has grown, so
// a stream of distinct keys cannot grow it without bound. Called with mu held.
func (c *Local) sweep(now time.Time) {
	if len(c.buckets) < c.sweepAt {
		return
	}
	for k, b := range c.buckets {
		if b.TokensAt(now) >= float64(c.burst) {
			delete(c.buckets, k)
		}
	}
	c.sweepAt = max(1024, 2*len(c.buckets))
}
