// Package limits holds the abuse limits of the verification service: a request rate per client
// (a token bucket per client, in this process) and a number of verification attempts per mobile
// number per hour (counted in the database, so across replicas).
package limits

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"

	"github.com/mnvhq/mnv/services/platform/auth"
)

// ClientRate limits the requests of each client to a steady rate with a burst. Each replica
// keeps its own buckets: with N replicas behind a balancer a client gets up to N times the rate,
// which the configuration should take into account.
type ClientRate struct {
	limit rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	sweepAt int
}

// NewClientRate allows perSecond requests per client with bursts of burst. perSecond <= 0
// disables the limit.
func NewClientRate(perSecond float64, burst int) *ClientRate {
	if burst < 1 {
		burst = 1
	}
	l := rate.Limit(perSecond)
	if perSecond <= 0 {
		l = rate.Inf
	}
	return &ClientRate{limit: l, burst: burst, buckets: map[string]*rate.Limiter{}, sweepAt: 1024}
}

// Allow takes a token of client's bucket, or says how long until one is free.
func (c *ClientRate) Allow(client string, now time.Time) (bool, time.Duration) {
	if c.limit == rate.Inf {
		return true, 0
	}
	c.mu.Lock()
	b, ok := c.buckets[client]
	if !ok {
		c.sweep(now)
		b = rate.NewLimiter(c.limit, c.burst)
		c.buckets[client] = b
	}
	c.mu.Unlock()
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// sweep drops full buckets (clients idle long enough to have refilled) once the map has grown,
// so a stream of distinct clients cannot grow it without bound. Called with mu held.
func (c *ClientRate) sweep(now time.Time) {
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

// RetryAfterSeconds is a Retry-After value: whole seconds, at least 1.
func RetryAfterSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// UnaryInterceptor applies the client rate to every call made by an authenticated client. It
// runs after authentication; the refusal carries a Retry-After header.
func (c *ClientRate) UnaryInterceptor(refuse func(ctx context.Context, retryAfter time.Duration) error) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if p, ok := auth.FromContext(ctx); ok {
			if allowed, wait := c.Allow(p.ClientID, time.Now()); !allowed {
				return nil, refuse(ctx, wait)
			}
		}
		return handler(ctx, req)
	}
}
