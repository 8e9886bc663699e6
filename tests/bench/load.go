package main

import (
	"context"
	"errors"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Op is one request of a load. A nil error is a success (HTTP 200, gRPC OK); ErrExhausted
// means the op has nothing left to send; anything else counts as an error.
type Op func(ctx context.Context) error

// ErrExhausted is what an op that consumes prepared input (a pool of sealed blobs) returns when
// none is left. It is no request and no error: the worker stops and the run is marked
// Exhausted, so a short pool shows in the report instead of as a slower run.
var ErrExhausted = errors.New("input exhausted")

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
	// Exhausted is set when the op ran out of input (ErrExhausted) before the deadline; the
	// run then measured less than it was meant to.
	Exhausted bool
	// Sent, Late and MaxLate (Paced only): requests sent, those that left more than lateAfter
	// after their scheduled time, and the latest. Many late sends mean the generator could not
	// keep the schedule, and the latencies include its own delay.
	Sent, Late int
	MaxLate    time.Duration
}

// lateAfter is how far behind its schedule a paced send counts as late.
const lateAfter = time.Millisecond

// Throughput is successes per second of wall time.
func (r Result) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK) / r.Elapsed.Seconds()
}

// Busy is the share of the machine's CPUs that were busy over the run, by every process.
func (r Result) Busy() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return r.CPU.Machine.Seconds() / (r.Elapsed.Seconds() * float64(runtime.NumCPU()))
}

// Load runs a closed loop: workers goroutines each call op again as soon as the previous call
// returned, until d has passed or ctx ends. Every call is bounded by timeout. In-flight calls
// are not cancelled at the deadline (that would turn them into errors); each worker just starts
// no new call after it.
func Load(ctx context.Context, workers int, d, timeout time.Duration, op Op) Result {
	type part struct {
		lat       []time.Duration
		errs      int
		firstErr  error
		exhausted bool
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
				if errors.Is(err, ErrExhausted) {
					p.exhausted = true
					return
				}
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
		r.Exhausted = r.Exhausted || p.exhausted
		if r.FirstErr == nil {
			r.FirstErr = p.firstErr
		}
	}
	slices.Sort(r.Latencies)
	return r
}

// Paced runs an open loop: request i is scheduled at start + i/rate for d, and each is sent in
// its own goroutine whatever the earlier ones take, so the offered load does not drop when the
// service slows down. At most maxInFlight requests are outstanding; a send that has to wait for
// a slot is late, not dropped. Latency counts from the scheduled send time, not from when the
// request left, so a stall shows in the percentiles instead of silently thinning the load
// (coordinated omission). Elapsed runs from the start until the last answer.
func Paced(ctx context.Context, rate float64, d time.Duration, maxInFlight int, timeout time.Duration, op Op) Result {
	var (
		mu        sync.Mutex
		r         Result
		exhausted atomic.Bool
		wg        sync.WaitGroup
	)
	slots := make(chan struct{}, maxInFlight)
	n := int(rate * d.Seconds())
	cpu0 := sampleCPU()
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
send:
	for i := 0; i < n && !exhausted.Load(); i++ {
		at := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if wait := time.Until(at); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				break send
			}
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			break send
		}
		r.Sent++
		if late := time.Since(at); late > lateAfter { // only this goroutine writes Sent and Late
			r.Late++
			r.MaxLate = max(r.MaxLate, late)
		}
		wg.Go(func() {
			defer func() { <-slots }()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			err := op(cctx)
			cancel()
			lat := time.Since(at)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, ErrExhausted):
				exhausted.Store(true)
			case err != nil:
				r.Errors++
				if r.FirstErr == nil {
					r.FirstErr = err
				}
			default:
				r.OK++
				r.Latencies = append(r.Latencies, lat)
			}
		})
	}
	wg.Wait()
	r.Elapsed, r.CPU, r.Exhausted = time.Since(start), sampleCPU().sub(cpu0), exhausted.Load()
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
