package outbound

import (
	"math/rand/v2"
	"time"
)

// MaxAttempts is the number of attempts for one batch: the first try and eleven retries. With
// the default base of 2 s doubling up to MaxBackoff, the waits add up to between 32 and 64
// minutes, enough to ride out a CRM's deploy or an outage of half an hour before the batch is
// FAILED (a manual sync sends it again).
const MaxAttempts = 12

// MaxBackoff caps one wait between attempts.
const MaxBackoff = 30 * time.Minute

// Backoff returns how long to wait before attempt+1, after attempt failed (attempt starts at
// 1; smaller values count as 1). The ceiling is base·2^(attempt-1), capped at max, without
// overflow for any attempt; the result is never negative and never above max.
//
// It uses "equal jitter": a uniformly random duration in [ceiling/2, ceiling]. Jitter spreads
// the retries of many batches that failed together (an endpoint outage) so they do not return
// in lock-step; keeping half of the ceiling (rather than full jitter's [0, ceiling]) guarantees
// a recovering endpoint a real pause, and makes waits grow with attempt until the cap: the
// ranges of consecutive attempts, [c/2, c] and [c, 2c], meet only at their end point.
//
// rnd supplies the randomness (seed it in tests); it is not safe for concurrent use, so share
// one only under a lock. When nil, the concurrency-safe global source is used. A base or max
// that is not positive yields 0.
func Backoff(attempt int, base, max time.Duration, rnd *rand.Rand) time.Duration {
	if base <= 0 || max <= 0 {
		return 0
	}
	if base > max {
		base = max
	}
	if attempt < 1 {
		attempt = 1
	}
	ceiling := max
	if shift := attempt - 1; shift < 62 && base <= max>>shift {
		ceiling = base << shift
	}
	half := ceiling / 2
	span := int64(ceiling-half) + 1 // [half, ceiling] inclusive
	var r int64
	if rnd != nil {
		r = rnd.Int64N(span)
	} else {
		r = rand.Int64N(span) //nolint:gosec // G404: jitter, not a secret
	}
	return half + time.Duration(r)
}
