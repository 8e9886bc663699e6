package ratelimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/ratelimit"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func TestLocal(t *testing.T) {
	l := ratelimit.NewLocal(ratelimit.Limit{Rate: 2, Burst: 3}) // 2/s, bursts of 3
	for i := range 3 {
		if ok, _ := l.AllowAt("a", t0); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	ok, wait := l.AllowAt("a", t0)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("4th request: ok %v wait %v, want refused for 500ms", ok, wait)
	}
	if ok, _ := l.AllowAt("b", t0); !ok {
		t.Fatal("another key shares the bucket")
	}
	if ok, _ := l.AllowAt("a", t0.Add(500*time.Millisecond)); !ok {
		t.Fatal("the bucket did not refill")
	}
}

func TestLocalPeek(t *testing.T) {
	l := ratelimit.NewLocal(ratelimit.Limit{Rate: 0.5, Burst: 2}) // a token every 2s
	if ok, _ := l.PeekAt("a", t0); !ok {
		t.Fatal("an unknown key has no token")
	}
	if n := ratelimit.Buckets(l); n != 0 {
		t.Fatalf("Peek made %d buckets", n)
	}
	l.AllowAt("a", t0)
	if ok, _ := l.PeekAt("a", t0); !ok {
		t.Fatal("one token left, Peek says none")
	}
	if ok, _ := l.PeekAt("a", t0); !ok {
		t.Fatal("Peek spent the token")
	}
	l.AllowAt("a", t0)
	ok, wait := l.PeekAt("a", t0.Add(500*time.Millisecond))
	if ok || wait != 1500*time.Millisecond {
		t.Fatalf("empty bucket: ok %v wait %v, want refused for 1.5s", ok, wait)
	}
	if ok, _ := l.PeekAt("a", t0.Add(2*time.Second)); !ok {
		t.Fatal("the bucket did not refill")
	}
}

func TestLocalOff(t *testing.T) {
	for _, lim := range []ratelimit.Limit{{Rate: 0, Burst: 0}, {Rate: -1, Burst: 5}} {
		l := ratelimit.NewLocal(lim)
		for i := range 10000 {
			if ok, _, _ := l.Allow(context.Background(), "a"); !ok {
				t.Fatalf("%+v: request %d refused with the limit off", lim, i)
			}
		}
	}
}

// TestLocalForgetsIdleKeys: many distinct keys do not grow the buckets forever.
func TestLocalForgetsIdleKeys(t *testing.T) {
	l := ratelimit.NewLocal(ratelimit.Limit{Rate: 100, Burst: 5})
	for i := range 10000 {
		// Each key used once, long enough ago to have refilled by the next one.
		l.AllowAt(fmt.Sprint("client-", i), t0.Add(time.Duration(i)*time.Second))
	}
	if n := ratelimit.Buckets(l); n > 2048 {
		t.Fatalf("%d buckets kept for 10000 idle keys", n)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	tests := []struct {
		wait time.Duration
		want int
	}{
		{0, 1},
		{time.Millisecond, 1},
		{500 * time.Millisecond, 1},
		{time.Second, 1},
		{2100 * time.Millisecond, 3},
		{time.Hour, 3600},
	}
	for _, tt := range tests {
		if got := ratelimit.RetryAfterSeconds(tt.wait); got != tt.want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", tt.wait, got, tt.want)
		}
	}
}
