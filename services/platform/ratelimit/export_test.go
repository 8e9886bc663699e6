package ratelimit

import "time"

// AllowAt and PeekAt decide at a given time, for tests.
func (c *Local) AllowAt(key string, now time.Time) (bool, time.Duration) { return c.allowAt(key, now) }
func (c *Local) PeekAt(key string, now time.Time) (bool, time.Duration)  { return c.peekAt(key, now) }

// Buckets is the number of buckets kept, for tests.
func Buckets(c *Local) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.buckets)
}

// RedisRetryAfter is how long a Store keeps deciding in-process after a Redis error.
const RedisRetryAfter = redisRetryAfter
