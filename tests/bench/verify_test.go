package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseShares(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []float64
		err  bool
	}{
		{in: "0.5,0.25", want: []float64{0.5, 0.25}},
		{in: " 0.5 , 1 ", want: []float64{0.5, 1}},
		{in: "", want: nil},
		{in: "0", err: true},
		{in: "1.5", err: true},
		{in: "-0.5", err: true},
		{in: "0.5,,0.25", err: true},
		{in: "half", err: true},
		{in: "NaN", err: true},
	} {
		got, err := parseShares(tc.in)
		if tc.err {
			if err == nil {
				t.Errorf("parseShares(%q) = %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseShares(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestShareName(t *testing.T) {
	for share, want := range map[float64]string{
		0.5:  "1/2 peak",
		0.25: "1/4 peak",
		0.3:  "0.3 of peak",
		0.75: "0.75 of peak",
		1:    "1 of peak",
	} {
		if got := shareName(share); got != want {
			t.Errorf("shareName(%g) = %q, want %q", share, got, want)
		}
	}
}

// Only the load at goalShare carries the p99 goal; a point of the curve says it has none, and
// is not reported as missing it.
func TestLatencyGoalOnlyAtItsShare(t *testing.T) {
	r := Report{Latency: []LatencyGoal{
		{Name: "at 1/2 peak", P99: 20 * time.Millisecond, P99Below: 15 * time.Millisecond},
		{Name: "at 1/4 peak", P99: 20 * time.Millisecond},
	}}
	out := r.String()
	for _, want := range []string{
		"latency at 1/2 peak: offered 0.0 req/s, achieved 0.0 req/s, p50 0.00ms, p99 20.00ms   goal p99 < 15.00ms   NOT met",
		"latency at 1/4 peak: offered 0.0 req/s, achieved 0.0 req/s, p50 0.00ms, p99 20.00ms   no goal at this load",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
