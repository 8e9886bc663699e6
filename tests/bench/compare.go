package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Config is the load shape every benchmark shares.
type Config struct {
	Workers  int
	Duration time.Duration
	Warmup   time.Duration
	Rounds   int
	Timeout  time.Duration
	// Profile, when set, starts with the measured part of each variant's first round, given
	// the variant's name and the round's length, and the function it returns is called once
	// that round ends (to wait for the profiles).
	Profile func(ctx context.Context, variant string, d time.Duration) (wait func())
}

// Variant is one side of a comparison: a name and the request it repeats.
type Variant struct {
	Name string
	Op   Op
	// Prepare, when set, readies the op's input for a load of span (0: the single first call),
	// given what has been measured so far of every variant (in Compare's order). It runs
	// before the first call and before every warm-up, and its time is not measured.
	Prepare func(ctx context.Context, span time.Duration, done []Measured) error
}

func (v Variant) prepare(ctx context.Context, span time.Duration, done []Measured) error {
	if v.Prepare == nil {
		return nil
	}
	if err := v.Prepare(ctx, span, done); err != nil {
		return fmt.Errorf("prepare %s: %w", v.Name, err)
	}
	return nil
}

// Measured is what the rounds of one variant add up to.
type Measured struct {
	Name   string
	Rounds []Result
}

// Throughput is the median of the rounds' throughputs.
func (m Measured) Throughput() float64 {
	xs := make([]float64, len(m.Rounds))
	for i, r := range m.Rounds {
		xs[i] = r.Throughput()
	}
	return median(xs)
}

// Percentile is taken over every successful request of every round.
func (m Measured) Percentile(p float64) time.Duration {
	var all []time.Duration
	for _, r := range m.Rounds {
		all = append(all, r.Latencies...)
	}
	return percentileUnsorted(all, p)
}

// CPUPerRequest is the CPU time per request (successes and errors) over every round.
func (m Measured) CPUPerRequest() CPU {
	var cpu CPU
	for _, r := range m.Rounds {
		cpu = cpu.add(r.CPU)
	}
	return cpu.per(m.OK() + m.Errors())
}

// OK is the number of successes over all rounds.
func (m Measured) OK() int {
	n := 0
	for _, r := range m.Rounds {
		n += r.OK
	}
	return n
}

// Errors is the number of errors over all rounds.
func (m Measured) Errors() int {
	n := 0
	for _, r := range m.Rounds {
		n += r.Errors
	}
	return n
}

// ErrorRate is errors over all requests of all rounds.
func (m Measured) ErrorRate() float64 {
	total := m.OK() + m.Errors()
	if total == 0 {
		return 1 // nothing succeeded: as bad as it gets
	}
	return float64(m.Errors()) / float64(total)
}

// Exhausted is the number of rounds that ran out of input before their deadline.
func (m Measured) Exhausted() int {
	n := 0
	for _, r := range m.Rounds {
		if r.Exhausted {
			n++
		}
	}
	return n
}

// FirstErr is an example error, or nil.
func (m Measured) FirstErr() error {
	for _, r := range m.Rounds {
		if r.FirstErr != nil {
			return r.FirstErr
		}
	}
	return nil
}

// Compare measures the variants in interleaved rounds (a, b, a, b, ...) so that drift of a
// noisy machine (other load, CPU frequency, a growing table) hits every variant alike. Each
// variant is first called once, to fail fast on a broken setup, and every measured run is
// preceded by an uncounted warm-up of the same variant, which opens its connections and fills
// the pools and caches the other variant may have left cold. A variant's Prepare runs before
// its first call and before each of its warm-ups, outside every measurement.
func Compare(ctx context.Context, cfg Config, progress io.Writer, variants ...Variant) ([]Measured, error) {
	out := make([]Measured, len(variants))
	for i, v := range variants {
		out[i].Name = v.Name
		if err := v.prepare(ctx, 0, out); err != nil {
			return nil, err
		}
		cctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		err := v.Op(cctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("first request of %s: %w", v.Name, err)
		}
	}
	for round := 1; round <= cfg.Rounds; round++ {
		for i, v := range variants {
			if err := v.prepare(ctx, cfg.Warmup+cfg.Duration, out); err != nil {
				return nil, err
			}
			if cfg.Warmup > 0 {
				Load(ctx, cfg.Workers, cfg.Warmup, cfg.Timeout, v.Op)
			}
			wait := func() {}
			if round == 1 && cfg.Profile != nil {
				wait = cfg.Profile(ctx, v.Name, cfg.Duration)
			}
			r := Load(ctx, cfg.Workers, cfg.Duration, cfg.Timeout, v.Op)
			wait()
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			out[i].Rounds = append(out[i].Rounds, r)
			dry := ""
			if r.Exhausted {
				dry = fmt.Sprintf("  POOL RAN DRY after %s", r.Elapsed.Round(time.Millisecond))
			}
			fmt.Fprintf(progress, "  round %d/%d %-34s %9.1f req/s  p50 %s  p99 %s  errors %d%s\n",
				round, cfg.Rounds, v.Name, r.Throughput(), ms(percentile(r.Latencies, 50)),
				ms(percentile(r.Latencies, 99)), r.Errors, dry)
		}
	}
	return out, nil
}
