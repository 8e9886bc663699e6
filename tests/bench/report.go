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
}

func (r Ratio) value() float64 {
	if r.Den == 0 {
		return 0
	}
	return r.Num / r.Den
}

// Report is everything one run prints.
type Report struct {
	Header   []string
	Rows     []Measured
	Ratios   []Ratio
	Checks   []Check
	PG       *PGLimit
	Spread   float64 // our spread debits/s, beside PG.Spread
	Hot      float64 // our hot debits/s, beside PG.Hot
	Failures []string
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func us(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond)) }

// String renders the report as aligned text.
func (r Report) String() string {
	var b strings.Builder
	for _, h := range r.Header {
		b.WriteString(h + "\n")
	}
	if len(r.Rows) > 0 {
		nameW := len("benchmark")
		for _, m := range r.Rows {
			nameW = max(nameW, len(m.Name))
		}
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
				rounds = append(rounds, fmt.Sprintf("%.1f", x.Throughput()))
			}
			row(m.Name, fmt.Sprintf("%.1f", m.Throughput()), ms(m.Percentile(50)), ms(m.Percentile(99)),
				fmt.Sprint(m.OK()), fmt.Sprint(m.Errors()), strings.Join(rounds, " "))
		}
		b.WriteString("\nCPU time per request (gen: this load generator; other: PostgreSQL and the rest of the machine)\n")
		cpuRow := func(cols ...string) {
			fmt.Fprintf(&b, "%-*s  %9s  %9s  %9s  %9s  %9s\n", nameW, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5])
		}
		cpuRow("benchmark", "gen", "gateway", "accounts", "other", "total")
		for _, m := range r.Rows {
			c := m.CPUPerRequest()
			cpuRow(m.Name, us(c.Gen), us(c.Gateway), us(c.Accounts), us(c.Other()), us(c.Machine))
		}
	}
	if len(r.Ratios) > 0 {
		b.WriteString("\n")
		for _, q := range r.Ratios {
			verdict := "met"
			if q.value() < q.Goal {
				verdict = "NOT met"
			}
			fmt.Fprintf(&b, "ratio %-12s %5.2f   goal >= %.2f   %-7s   (%.1f / %.1f req/s)\n", q.Name, q.value(), q.Goal, verdict, q.Num, q.Den)
		}
	}
	if len(r.Checks) > 0 {
		b.WriteString("\n")
		for _, c := range r.Checks {
			verdict := "OK"
			if !c.OK {
				verdict = "FAIL"
			}
			fmt.Fprintf(&b, "check %-28s %-4s  %s\n", c.Name, verdict, c.Text)
		}
	}
	if pg := r.PG; pg != nil {
		b.WriteString("\n")
		if pg.Skipped != "" {
			fmt.Fprintf(&b, "postgres limit: skipped: %s\n", pg.Skipped)
		} else {
			fmt.Fprintf(&b, "postgres limit (pgbench, %d clients, %ds; one tps = debit+ledger tx AND session+verification tx): spread_tps=%.1f hot_tps=%.1f\n",
				pg.Clients, pg.Seconds, pg.Spread, pg.Hot)
			fmt.Fprintf(&b, "  mnv spread debits/s / spread_tps = %.1f / %.1f = %.2f\n", r.Spread, pg.Spread, r.Spread/pg.Spread)
			fmt.Fprintf(&b, "  mnv hot debits/s    / hot_tps    = %.1f / %.1f = %.2f\n", r.Hot, pg.Hot, r.Hot/pg.Hot)
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
