package main

import (
	"fmt"
	"strings"
	"time"
)

// Ratio compares two throughputs against a goal.
type Ratio struct {
	Name     string
	Num, Den float64
	Goal     float64
	Unit     string // of Num and Den; "" is req/s
}

func (r Ratio) value() float64 {
	if r.Den == 0 {
		return 0
	}
	return r.Num / r.Den
}

// Bulk is one bulk run of benchmark D: N rows or records moved in Elapsed.
type Bulk struct {
	Name    string
	Unit    string // what N counts: "rows", "records"
	N       int64
	Elapsed time.Duration
	Errors  int64
	CPU     CPU    // what the generator, the services and the machine spent during the run
	Detail  string // how the run went, beyond its rate
}

// Rate is N per second of Elapsed.
func (b Bulk) Rate() float64 {
	if b.Elapsed <= 0 {
		return 0
	}
	return float64(b.N) / b.Elapsed.Seconds()
}

// Goal is one measured value against a bound: at least Bound, or with Below under it.
type Goal struct {
	Name   string
	Value  float64
	Unit   string
	Bound  float64
	Below  bool
	Detail string
}

func (g Goal) met() bool {
	if g.Below {
		return g.Value < g.Bound
	}
	return g.Value >= g.Bound
}

// LatencyGoal is a latency percentile at an offered load, against a goal.
type LatencyGoal struct {
	Name              string
	Offered, Achieved float64 // req/s
	// P99Below is the goal (0: none, a point of the curve only).
	P50, P99, P99Below time.Duration
	Sent, Late         int           // sends, and those that left late (see Result)
	MaxLate            time.Duration // the latest send
	// Busy is the share of the machine's CPUs busy over the run (every process): queueing, and
	// so the tail, grows with it whatever a request costs.
	Busy float64
}

// Report is everything one run prints.
type Report struct {
	Header   []string
	Rows     []Measured
	Bulk     []Bulk
	Ratios   []Ratio
	Goals    []Goal
	Latency  []LatencyGoal
	Flows    []FlowResult   // benchmark F
	Added    []AddedLatency // benchmark F: NETWORK_API over header enrichment
	Checks   []Check
	PG       *PGLimit
	Spread   float64 // our spread debits/s, beside PG.Spread
	Hot      float64 // our hot debits/s, beside PG.Hot
	Verify   float64 // our verifies/s over many clients, beside PG.Spread (0: not measured)
	Notes    []string
	Failures []string
}

// verifySpreadGoal is the goal of verifies/s over many clients against the raw PostgreSQL
// limit of one verification (spread_tps).
const verifySpreadGoal = 0.50

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "NOT met"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func us(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond)) }

// String renders the report as aligned text.
func (r Report) String() string {
	var b strings.Builder
	for _, h := range r.Header {
		b.WriteString(h + "\n")
	}
	nameW := len("benchmark")
	for _, m := range r.Rows {
		nameW = max(nameW, len(m.Name))
	}
	for _, x := range r.Bulk {
		nameW = max(nameW, len(x.Name))
	}
	for _, f := range r.Flows {
		nameW = max(nameW, len(f.Name))
	}
	if len(r.Rows) > 0 {
		row := func(cols ...string) {
			fmt.Fprintf(&b, "%-*s  %10s  %9s  %9s  %9s  %7s  %s\n", nameW, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6])
		}
		b.WriteString("\n")
		row("benchmark", "req/s", "p50", "p99", "ok", "errors", "req/s by round")
		row(strings.Repeat("-", nameW), strings.Repeat("-", 10), strings.Repeat("-", 9), strings.Repeat("-", 9),
			strings.Repeat("-", 9), strings.Repeat("-", 7), strings.Repeat("-", 14))
		for _, m := range r.Rows {
			var rounds []string
			for _, x := range m.Rounds {
				dry := ""
				if x.Exhausted {
					dry = "(dry)"
				}
				rounds = append(rounds, fmt.Sprintf("%.1f%s", x.Throughput(), dry))
			}
			row(m.Name, fmt.Sprintf("%.1f", m.Throughput()), ms(m.Percentile(50)), ms(m.Percentile(99)),
				fmt.Sprint(m.OK()), fmt.Sprint(m.Errors()), strings.Join(rounds, " "))
		}
	}
	if len(r.Bulk) > 0 {
		row := func(cols ...string) {
			fmt.Fprintf(&b, "%-*s  %10s  %-9s  %9s  %9s  %7s\n", nameW, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5])
		}
		b.WriteString("\n")
		row("benchmark", "rate", "", "elapsed", "count", "errors")
		row(strings.Repeat("-", nameW), strings.Repeat("-", 10), strings.Repeat("-", 9), strings.Repeat("-", 9),
			strings.Repeat("-", 9), strings.Repeat("-", 7))
		for _, x := range r.Bulk {
			row(x.Name, fmt.Sprintf("%.1f", x.Rate()), x.Unit+"/s", fmt.Sprintf("%.2fs", x.Elapsed.Seconds()),
				fmt.Sprint(x.N), fmt.Sprint(x.Errors))
			if x.Detail != "" {
				fmt.Fprintf(&b, "  %s\n", x.Detail)
			}
		}
	}
	if len(r.Flows) > 0 {
		row := func(cols ...string) {
			fmt.Fprintf(&b, "%-*s  %10s  %10s  %10s  %10s  %10s  %6s  %7s\n", nameW, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], cols[7])
		}
		b.WriteString("\nF: one verification end to end; verify = the verify call alone, flow = from the session (facade: the authorization) to the verify's answer\n")
		b.WriteString("H: one workflow end to end; verify = from the start to its SMS at the SMSC, flow = from the start to the VERIFIED answer of its code\n")
		row("benchmark", "flows/s", "verify p50", "verify p99", "flow p50", "flow p99", "ok", "errors")
		row(strings.Repeat("-", nameW), strings.Repeat("-", 10), strings.Repeat("-", 10), strings.Repeat("-", 10),
			strings.Repeat("-", 10), strings.Repeat("-", 10), strings.Repeat("-", 6), strings.Repeat("-", 7))
		for _, f := range r.Flows {
			rate := "-" // interleaved with other flows: no rate of its own
			if f.Alone {
				rate = fmt.Sprintf("%.1f", f.Throughput())
			}
			row(f.Name, rate, ms(percentile(f.Verify, 50)), ms(percentile(f.Verify, 99)),
				ms(percentile(f.Flow, 50)), ms(percentile(f.Flow, 99)), fmt.Sprint(f.OK()), fmt.Sprint(f.Errors))
		}
		for _, a := range r.Added {
			fmt.Fprintf(&b, "added latency of %s: verify p50 %s, p99 %s; flow p50 %s, p99 %s\n",
				a.Name, signedMS(a.VerifyP50), signedMS(a.VerifyP99), signedMS(a.FlowP50), signedMS(a.FlowP99))
		}
	}
	if len(r.Rows) > 0 || len(r.Bulk) > 0 || len(r.Flows) > 0 {
		b.WriteString("\nCPU time per request, or per row or record for D, or per flow for F (gen: this load generator; other: PostgreSQL and the rest of the machine);\n" +
			"then, over the whole machine, TCP segments sent (loopback included) and context switches per request\n")
		cpuRow := func(cols ...string) {
			fmt.Fprintf(&b, "%-*s  %9s  %9s  %9s  %12s  %9s  %9s  %9s  %9s  %9s\n", nameW, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], cols[7], cols[8], cols[9])
		}
		cpuRow("benchmark", "gen", "gateway", "accounts", "verification", "connect", "other", "total", "segments", "switches")
		cpuLine := func(name string, c CPU) {
			cpuRow(name, us(c.Gen), us(c.Gateway), us(c.Accounts), us(c.Verification), us(c.Connect), us(c.Other()), us(c.Machine),
				fmt.Sprintf("%.1f", c.Segments), fmt.Sprintf("%.1f", c.Switches))
		}
		for _, m := range r.Rows {
			cpuLine(m.Name, m.CPUPerRequest())
		}
		for _, x := range r.Bulk {
			cpuLine(x.Name, x.CPU.per(int(x.N)))
		}
		for _, f := range r.Flows {
			if f.Alone { // an interleaved run's CPU is of every flow in it
				cpuLine(f.Name, f.CPU.per(f.OK()+f.Errors))
			}
		}
	}
	if len(r.Ratios) > 0 {
		b.WriteString("\n")
		for _, q := range r.Ratios {
			unit := q.Unit
			if unit == "" {
				unit = "req/s"
			}
			fmt.Fprintf(&b, "ratio %-16s %5.2f   goal >= %.2f   %-7s   (%.1f / %.1f %s)\n",
				q.Name, q.value(), q.Goal, verdict(q.value() >= q.Goal), q.Num, q.Den, unit)
		}
	}
	if len(r.Goals) > 0 {
		b.WriteString("\n")
		for _, g := range r.Goals {
			op := ">="
			if g.Below {
				op = "<"
			}
			detail := ""
			if g.Detail != "" {
				detail = "   (" + g.Detail + ")"
			}
			fmt.Fprintf(&b, "goal %-*s  %10.1f %-9s   goal %s %.0f %s   %s%s\n",
				nameW, g.Name, g.Value, g.Unit, op, g.Bound, g.Unit, verdict(g.met()), detail)
		}
	}
	if len(r.Latency) > 0 {
		b.WriteString("\n")
		for _, l := range r.Latency {
			goal := "no goal at this load"
			if l.P99Below > 0 {
				goal = fmt.Sprintf("goal p99 < %s   %s", ms(l.P99Below), verdict(l.P99 > 0 && l.P99 < l.P99Below))
			}
			fmt.Fprintf(&b, "latency %s: offered %.1f req/s, achieved %.1f req/s, p50 %s, p99 %s   %s\n",
				l.Name, l.Offered, l.Achieved, ms(l.P50), ms(l.P99), goal)
			fmt.Fprintf(&b, "  generator: %d of %d sends left more than %s after their scheduled time (latest %s); machine %.0f%% busy\n",
				l.Late, l.Sent, ms(lateAfter), ms(l.MaxLate), 100*l.Busy)
		}
	}
	if len(r.Checks) > 0 {
		b.WriteString("\n")
		checkW := 33
		for _, c := range r.Checks {
			checkW = max(checkW, len(c.Name))
		}
		for _, c := range r.Checks {
			ok := "OK"
			if !c.OK {
				ok = "FAIL"
			}
			fmt.Fprintf(&b, "check %-*s %-4s  %s\n", checkW, c.Name, ok, c.Text)
		}
	}
	if pg := r.PG; pg != nil {
		b.WriteString("\n")
		if pg.Skipped != "" {
			fmt.Fprintf(&b, "postgres limit: skipped: %s\n", pg.Skipped)
		} else {
			fmt.Fprintf(&b, "postgres limit (pgbench, %d clients, %ds; one tps = debit+ledger tx AND session+verification tx): spread_tps=%.1f hot_tps=%.1f\n",
				pg.Clients, pg.Seconds, pg.Spread, pg.Hot)
			if r.Spread > 0 {
				fmt.Fprintf(&b, "  mnv spread debits/s / spread_tps = %.1f / %.1f = %.2f\n", r.Spread, pg.Spread, r.Spread/pg.Spread)
			}
			if r.Hot > 0 {
				fmt.Fprintf(&b, "  mnv hot debits/s    / hot_tps    = %.1f / %.1f = %.2f\n", r.Hot, pg.Hot, r.Hot/pg.Hot)
			}
			if r.Verify > 0 {
				v := r.Verify / pg.Spread
				fmt.Fprintf(&b, "  mnv verify many/s   / spread_tps = %.1f / %.1f = %.2f   goal >= %.2f   %s\n",
					r.Verify, pg.Spread, v, verifySpreadGoal, verdict(v >= verifySpreadGoal))
			}
		}
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "NOTE: %s\n", n)
		}
	}
	if len(r.Failures) > 0 {
		b.WriteString("\n")
		for _, f := range r.Failures {
			fmt.Fprintf(&b, "FAIL: %s\n", f)
		}
	}
	return b.String()
}
