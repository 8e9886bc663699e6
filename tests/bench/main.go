// Command bench measures the throughput of a running mnv (the real accounts and gateway
// binaries, started by tests/harness against a fresh database) and puts it next to what
// PostgreSQL alone manages on the same machine. Run it with `make bench`.
//
// It measures, each as a closed loop of -c workers for -d, warm-up first, in interleaved
// rounds so that a noisy machine's drift hits both sides of a comparison alike:
//
//   - A, REST against gRPC: the same read of a client's own details, once as
//     GET /v1/api/clients through the gateway and once as AccountsService.GetClient straight
//     to accounts. REST/gRPC is what the gateway (HTTP/1.1 + JSON + one more hop) leaves of
//     the service's own throughput; the goal is at least 0.70.
//   - B, hot against spread debits: AccountsInternalService.Debit spread over 1000 clients
//     against every debit on ONE client. Debits of one client serialise on its balance row,
//     so hot/spread shows whether a single busy client is throttled by that lock; the goal is
//     at least 0.90. The balances are checked afterwards against the debits answered OK.
//   - The raw PostgreSQL limit (../shared/bench/pgbench-verify-limit.sh, when present), run
//     last so it does not compete: the same writes as plain SQL, so mnv's debits/s can be read
//     as a fraction of what the database allows.
//
// The load generator, the services and PostgreSQL share the machine, so absolute numbers are
// only comparable between runs on the same machine; the ratios are the point. To tell where a
// request's cost went, every run also splits the machine's CPU time per request between the
// generator, the gateway, accounts and the rest (PostgreSQL, other tenants). The report goes
// to stdout and out/bench.txt. The exit code is 1 when a benchmark had more than 1% errors,
// a balance check failed or the suite could not run.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/mnvhq/mnv/tests/harness"
)

const (
	maxErrorRate = 0.01
	restGoal     = 0.70
	hotGoal      = 0.90
	callTimeout  = 10 * time.Second
)

func main() { os.Exit(run()) }

func run() int {
	var (
		cfg         = Config{Timeout: callTimeout}
		grpcConns   int
		skipPGBench bool
	)
	flag.IntVar(&cfg.Workers, "c", 32, "concurrent workers (closed loop)")
	flag.DurationVar(&cfg.Duration, "d", 10*time.Second, "measured duration of each round")
	flag.IntVar(&cfg.Rounds, "rounds", 2, "interleaved rounds of each benchmark")
	flag.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "uncounted warm-up before each measured round")
	flag.IntVar(&grpcConns, "grpc-conns", 1, "gRPC client connections to accounts, used round-robin")
	flag.BoolVar(&skipPGBench, "skip-pgbench", false, "do not measure the raw PostgreSQL limit")
	flag.Parse()
	if cfg.Workers < 1 || cfg.Duration <= 0 || cfg.Rounds < 1 || cfg.Warmup < 0 || grpcConns < 1 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "bench: -c, -d, -rounds and -grpc-conns must be positive, -warmup not negative; no arguments")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	progress := os.Stderr
	root := repoRoot()
	start := time.Now()

	rep := Report{Header: []string{
		"mnv bench " + start.Format(time.RFC3339),
		fmt.Sprintf("parameters: C=%d D=%s rounds=%d warm-up=%s (before every round) GOMAXPROCS=%d nproc=%d grpc-conns=%d (round-robin)",
			cfg.Workers, cfg.Duration, cfg.Rounds, cfg.Warmup, runtime.GOMAXPROCS(0), runtime.NumCPU(), grpcConns),
		fmt.Sprintf("req/s = median of the %d rounds (each: successes / wall time); p50, p99 over every successful request of every round", cfg.Rounds),
		"the load generator, accounts, gateway and PostgreSQL all run on this machine",
	}}

	err := measure(ctx, cfg, grpcConns, progress, &rep)
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(os.Stderr, "bench: interrupted")
		return 130
	case err != nil:
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}

	if skipPGBench {
		rep.PG = &PGLimit{Skipped: "-skip-pgbench"}
	} else {
		fmt.Fprintln(progress, "== raw PostgreSQL limit (pgbench)")
		pg := runPGLimit(ctx, root, os.Getenv("DATABASE_URL"), cfg.Duration, cfg.Workers)
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "bench: interrupted")
			return 130
		}
		rep.PG = &pg
	}
	rep.Header = append(rep.Header, fmt.Sprintf("total run time %s", time.Since(start).Round(time.Second)))

	text := rep.String()
	fmt.Print("\n" + text)
	if err := writeOut(root, text); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if len(rep.Failures) > 0 {
		return 1
	}
	return 0
}

// measure starts the suite, runs benchmarks A and B into rep and stops the suite again.
func measure(ctx context.Context, cfg Config, grpcConns int, progress io.Writer, rep *Report) (err error) {
	fmt.Fprintln(progress, "== starting accounts and gateway")
	s, err := harness.Start(ctx, harness.Options{Env: []string{"MNV_LOG_LEVEL=warn"}})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w (service logs in %s)", err, s.LogDir)
		}
		s.Stop()
	}()

	fmt.Fprintln(progress, "== A: REST through the gateway vs gRPC to accounts")
	rest, grpcM, err := benchAPI(ctx, s, cfg, grpcConns, progress)
	if err != nil {
		return fmt.Errorf("benchmark A: %w", err)
	}
	fmt.Fprintln(progress, "== B: debits spread over many clients vs on one client")
	deb, err := benchDebits(ctx, s, cfg, grpcConns, progress)
	if err != nil {
		return fmt.Errorf("benchmark B: %w", err)
	}

	rep.Rows = []Measured{rest, grpcM, deb.Spread, deb.Hot}
	rep.Ratios = []Ratio{
		{Name: "REST/gRPC", Num: rest.Throughput(), Den: grpcM.Throughput(), Goal: restGoal},
		{Name: "hot/spread", Num: deb.Hot.Throughput(), Den: deb.Spread.Throughput(), Goal: hotGoal},
	}
	rep.Checks = deb.Checks
	rep.Spread, rep.Hot = deb.Spread.Throughput(), deb.Hot.Throughput()
	for _, m := range rep.Rows {
		if rate := m.ErrorRate(); rate > maxErrorRate {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s: error rate %.2f%% > %.0f%% (%d of %d); e.g. %v; service logs in %s",
				m.Name, 100*rate, 100*maxErrorRate, m.Errors(), m.OK()+m.Errors(), m.FirstErr(), s.LogDir))
		} else if m.Errors() > 0 {
			fmt.Fprintf(progress, "  note: %s had %d errors, e.g. %v\n", m.Name, m.Errors(), m.FirstErr())
		}
	}
	for _, c := range deb.Checks {
		if !c.OK {
			rep.Failures = append(rep.Failures, fmt.Sprintf("check %s: %s", c.Name, c.Text))
		}
	}
	return nil
}

// writeOut writes the report to out/bench.txt in the repository (or the working directory).
func writeOut(root, text string) error {
	if root == "" {
		root = "."
	}
	dir := filepath.Join(root, "out")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, "bench.txt")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "bench: report written to", path)
	return nil
}

// repoRoot is the folder of go.work above the working directory, or "" when there is none.
func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
