package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Redis keeps budgets in Redis with the GCRA of redis_rate: every replica that uses the same
// server and prefix spends the same budget, and Redis's clock is the only one that counts.
// It returns Redis's errors; Store wraps it so that they fall back to a Local.
type Redis struct {
	rl     *redis_rate.Limiter
	limit  redis_rate.Limit
	prefix string
	// full is how far from a full bucket one token is left: Peek compares ResetAfter with it.
	full time.Duration
}

// NewRedis keeps budgets of l (which must not be off) under prefix in rdb.
func NewRedis(rdb *redis.Client, prefix string, l Limit) *Redis {
	// GCRA needs only the emission interval (Period/Rate) and the burst, so any rate, whole
	// or not, is one event per interval.
	iv := l.interval()
	return &Redis{
		rl:     redis_rate.NewLimiter(rdb),
		limit:  redis_rate.Limit{Rate: 1, Period: iv, Burst: l.burst()},
		prefix: prefix,
		full:   time.Duration(l.burst()-1) * iv,
	}
}

// Allow implements Limiter.
func (r *Redis) Allow(ctx context.Context, key string) (bool, time.Duration, error) {
	res, err := r.rl.Allow(ctx, r.prefix+key, r.limit)
	if err != nil {
		return false, 0, fmt.Errorf("ratelimit: redis: %w", err)
	}
	if res.Allowed > 0 {
		return true, 0, nil
	}
	return false, res.RetryAfter, nil
}

// Peek implements Limiter. A request of no tokens spends nothing and reports ResetAfter, the
// time until the bucket is full again; the bucket holds at least one token while that is at
// most burst-1 intervals.
func (r *Redis) Peek(ctx context.Context, key string) (bool, time.Duration, error) {
	res, err := r.rl.AllowN(ctx, r.prefix+key, r.limit, 0)
	if err != nil {
		return false, 0, fmt.Errorf("ratelimit: redis: %w", err)
	}
	if res.ResetAfter <= r.full {
		return true, 0, nil
	}
	return false, res.ResetAfter - r.full, nil
}
