package main

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"
)

// Op is one request of a load. A nil error is a success (HTTP 200, gRPC OK); anything else
// counts as an error.
type Op func(ctx context.Context) error

// Result is one run of a load.
type Result struct {
	OK, Errors int
	// Elapsed is the wall time from the start until the last worker returned, so it includes
	// the requests that were in flight at the deadline.
	Elapsed time.Duration
	// Latencies of the successful requests, sorted.
	Latencies []time.Duration
	// FirstErr is an example of what failed, for the report.
	FirstErr error
	// CPU is what the generator, the services and the whole machine spent during the run.
	CPU CPU
}

// Throughput is successes per second of wall time.
func (r Result) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK) / r.Elapsed.Seconds()
}

// Load runs a closed loop: workers goroutines each call op again as soon as the previous call
// returned, until d has passed or ctx ends. Every call is bounded by timeout. In-flight calls
// are not cancelled at the deadline (that would turn them into errors); each worker just starts
// no new call after it.
func Load(ctx context.Context, workers int, d, timeout time.Duration, op Op) Result {
	type part struct {
		lat      []time.Duration
		errs     int
		firstErr error
	}
	parts := make([]part, workers)
	cpu0 := sampleCPU()
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for i := range parts {
		p := &parts[i]
		p.lat = make([]time.Duration, 0, 1024)
		wg.Go(func() {
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(deadline) {
					return
				}
				cctx, cancel := context.WithTimeout(ctx, timeout)
				err := op(cctx)
				cancel()
				if err != nil {
					p.errs++
					if p.firstErr == nil {
						p.firstErr = err
					}
					continue
				}
				p.lat = append(p.lat, time.Since(t0))
			}
		})
	}
	wg.Wait()
	r := Result{Elapsed: time.Since(start), CPU: sampleCPU().sub(cpu0)}
	for _, p := range parts {
		r.OK += len(p.lat)
		r.Errors += p.errs
		r.Latencies = append(r.Latencies, p.lat...)
		if r.FirstErr == nil {
			r.FirstErr = p.firstErr
		}
	}
	slices.Sort(r.Latencies)
	return r
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// percentileUnsorted is percentile over durations in any order (it sorts them in place).
func percentileUnsorted(ds []time.Duration, p float64) time.Duration {
	slices.Sort(ds)
	return percentile(ds, p)
}

// median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
