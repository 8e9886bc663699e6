// Package ratelimit holds the request budgets of mnv: token buckets keyed by a credential or a
// client address, and the gRPC interceptors that spend them per credential.
//
// A budget lives in this process (Local, golang.org/x/time/rate) or in Redis, shared by every
// replica (go-redis/redis_rate, GCRA). In-process, each replica keeps its own buckets, so N
// replicas behind a balancer allow N times the rate; through Redis the rate holds for all of
// them together. A Redis that fails does not take the API down: the decision falls back to the
// in-process buckets until Redis answers again (see Store).
package ratelimit

import (
	"context"
	"time"
)

// Limit is a steady rate with bursts.
type Limit struct {
	// Rate is the sustained rate in events per second (fractions allowed); 0 or less turns the
	// limit off.
	Rate float64
	// Burst is how many events may come at once, at least 1.
	Burst int
}

// Off reports whether the limit lets everything through.
func (l Limit) Off() bool { return l.Rate <= 0 }

// interval is the time one token takes to come back.
func (l Limit) interval() time.Duration { return time.Duration(float64(time.Second) / l.Rate) }

func (l Limit) burst() int { return max(l.Burst, 1) }

// Limiter decides whether the holder of a key may go on.
type Limiter interface {
	// Allow spends one token of key's budget, or says how long until one is free.
	Allow(ctx context.Context, key string) (allowed bool, retryAfter time.Duration, err error)
	// Peek says whether key's budget holds a token now, without spending it: for budgets that
	// are spent after the fact (failed authentications), checked before.
	Peek(ctx context.Context, key string) (allowed bool, retryAfter time.Duration, err error)
}

// RetryAfterSeconds is a Retry-After value: whole seconds, at least 1.
func RetryAfterSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// unlimited is the Limiter of a limit that is off.
type unlimited struct{}

func (unlimited) Allow(context.Context, string) (bool, time.Duration, error) { return true, 0, nil }
func (unlimited) Peek(context.Context, string) (bool, time.Duration, error)  { return true, 0, nil }
