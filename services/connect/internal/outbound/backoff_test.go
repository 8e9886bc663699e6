package outbound

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestBackoffBounds(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name      string
		base, max time.Duration
	}{
		{"seconds to minutes", 2 * time.Second, 5 * time.Minute},
		{"milliseconds", 10 * time.Millisecond, time.Second},
		{"odd values", 3*time.Second + 7, 47*time.Second + 3},
		{"base equals max", time.Minute, time.Minute},
		{"max below base", time.Minute, 10 * time.Second},
		{"huge max", time.Second, time.Duration(1<<63 - 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prevHigh := time.Duration(0)
			for attempt := 1; attempt <= 80; attempt++ {
				ceiling := min(tt.base, tt.max)
				for i := 1; i < attempt && ceiling < tt.max; i++ {
					if ceiling > tt.max/2 {
						ceiling = tt.max
					} else {
						ceiling *= 2
					}
				}
				low, high := time.Duration(1<<63-1), time.Duration(0)
				for range 500 {
					d := Backoff(attempt, tt.base, tt.max, rnd)
					if d < 0 || d > tt.max {
						t.Fatalf("attempt %d: %v outside [0, max %v]", attempt, d, tt.max)
					}
					if d < ceiling/2 || d > ceiling {
						t.Fatalf("attempt %d: %v outside [%v, %v]", attempt, d, ceiling/2, ceiling)
					}
					low, high = min(low, d), max(high, d)
				}
				// Grows: below the cap, an attempt never waits less than the previous one could.
				if ceiling < tt.max && low < prevHigh {
					t.Fatalf("attempt %d: min %v below the previous attempt's max %v", attempt, low, prevHigh)
				}
				// Jittered: 500 samples over a non-trivial range are not all equal.
				if ceiling >= 1000 && low == high {
					t.Fatalf("attempt %d: no jitter (%v)", attempt, low)
				}
				prevHigh = high
			}
		})
	}
}

func TestBackoffEdges(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	base, limit := time.Second, time.Hour
	for _, attempt := range []int{0, -1, -1 << 62} {
		if d := Backoff(attempt, base, limit, rnd); d < base/2 || d > base {
			t.Errorf("attempt %d: %v, want it treated as attempt 1", attempt, d)
		}
	}
	for _, attempt := range []int{62, 63, 64, 1000, 1 << 62} {
		if d := Backoff(attempt, base, limit, rnd); d < limit/2 || d > limit {
			t.Errorf("attempt %d: %v, want within [max/2, max]", attempt, d)
		}
	}
	if d := Backoff(3, 0, limit, rnd); d != 0 {
		t.Errorf("zero base: %v", d)
	}
	if d := Backoff(3, -time.Second, limit, rnd); d != 0 {
		t.Errorf("negative base: %v", d)
	}
	if d := Backoff(3, base, 0, rnd); d != 0 {
		t.Errorf("zero max: %v", d)
	}
	if d := Backoff(1, 1, 1, rnd); d < 0 || d > 1 {
		t.Errorf("1ns: %v", d)
	}
	if d := Backoff(6, base, limit, nil); d < 16*time.Second || d > 32*time.Second {
		t.Errorf("nil rand, attempt 6: %v", d)
	}

	// Reproducible with the same seed.
	a, b := rand.New(rand.NewPCG(9, 9)), rand.New(rand.NewPCG(9, 9))
	for attempt := 1; attempt <= 20; attempt++ {
		if x, y := Backoff(attempt, base, limit, a), Backoff(attempt, base, limit, b); x != y {
			t.Fatalf("attempt %d: %v != %v with the same seed", attempt, x, y)
		}
	}
}

// TestScheduleRidesOutHalfAnHour: with the default first delay (MNV_DELIVERY_BACKOFF, 2s), the
// waits between MaxAttempts attempts add up to at least 30 minutes even with the shortest
// jitter (half of each ceiling), and to at most about an hour, as MaxAttempts promises.
func TestScheduleRidesOutHalfAnHour(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var least, most time.Duration
	for attempt := 1; attempt < MaxAttempts; attempt++ {
		ceiling := min(2*time.Second<<(attempt-1), MaxBackoff)
		if d := Backoff(attempt, 2*time.Second, MaxBackoff, rnd); d < ceiling/2 || d > ceiling {
			t.Fatalf("attempt %d waits %v, outside [%v, %v]", attempt, d, ceiling/2, ceiling)
		}
		least += ceiling / 2
		most += ceiling
	}
	if least < 30*time.Minute || most > 65*time.Minute {
		t.Errorf("%d attempts span %v to %v; want at least 30m and at most about an hour", MaxAttempts, least, most)
	}
}
