package limits_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/verification/internal/limits"
)

func TestClientRate(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	l := limits.NewClientRate(2, 3) // 2/s, bursts of 3
	for i := range 3 {
		if ok, _ := l.Allow("a", now); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	ok, wait := l.Allow("a", now)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("4th request: ok %v wait %v, want refused for 500ms", ok, wait)
	}
	if ok, _ := l.Allow("b", now); !ok {
		t.Fatal("another client shares the bucket")
	}
	if ok, _ := l.Allow("a", now.Add(500*time.Millisecond)); !ok {
		t.Fatal("the bucket did not refill")
	}
	if got := limits.RetryAfterSeconds(500 * time.Millisecond); got != 1 {
		t.Fatalf("Retry-After %d", got)
	}
	if got := limits.RetryAfterSeconds(2100 * time.Millisecond); got != 3 {
		t.Fatalf("Retry-After %d", got)
	}
}

func TestClientRateDisabled(t *testing.T) {
	l := limits.NewClientRate(0, 0)
	for i := range 10000 {
		if ok, _ := l.Allow("a", time.Now()); !ok {
			t.Fatalf("request %d refused with the limit off", i)
		}
	}
}

// TestClientRateForgetsIdleClients: many distinct clients do not grow the buckets forever.
func TestClientRateForgetsIdleClients(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	l := limits.NewClientRate(100, 5)
	for i := range 10000 {
		// Each client used once, long ago enough to have refilled by the next one.
		l.Allow(fmt.Sprint("client-", i), now.Add(time.Duration(i)*time.Second))
	}
	if n := limits.Buckets(l); n > 2048 {
		t.Fatalf("%d buckets kept for 10000 idle clients", n)
	}
}
