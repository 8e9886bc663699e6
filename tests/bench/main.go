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
//   - C, REST verify throughput: POST /v1/api/verify through the gateway (verification,
//     which authenticates the key and debits through accounts), each consuming one sealed blob
//     of an SDK session opened before the round (not measured), with the sessions spread over
//     200 clients against all on ONE client. Goals: many-client verifies/s at least 0.50 of the
//     raw PostgreSQL limit of a verification (spread_tps below), one/many at least 0.90. Then
//     an open loop on the many-client pool at each share of its peak -open-loop names (half and
//     a quarter by default), latency counted from each request's scheduled send; the goal is
//     p99 under 15 ms at half, the other shares show how the tail falls with the load. The
//     charges are checked afterwards against the VERIFIED answers, client by client. The suite
//     runs with the rate limits off (MNV_CLIENT_RATE=0, MNV_IP_RATE=0,
//     MNV_AUTH_FAILURE_RATE=0), since the bench itself is the abuse they are there to stop.
//     The per-number limit keeps its
//     production default: every session carries a number of its own, so each verify pays the
//     count of its number's attempts, as in production, and none is refused.
//   - D, Connect: a generated CSV of 1,000,000 rows (-connect-rows), each a distinct valid
//     number, is uploaded as a text/csv body and imported, timed from the upload's 202 until
//     the job reads COMPLETED, while connect's RSS is sampled every 100 ms (goal: peak under
//     150 MB). Then the same file is read, parsed and COPY'd in this process into a table like
//     connect.profiles (same indexes, no triggers) in a scratch schema of the same database:
//     import rows/s over raw COPY rows/s is what the import leaves of PostgreSQL's bulk-load
//     limit; the goal is at least 0.50. Then every imported profile is delivered by a MANUAL
//     sync of an integration with batches of 500 to a receiver in this process, timed from the
//     sync's answer until the receiver has every queued record (distinct delivery ids); the
//     goal is at least 20,000 records/s. Once with the masked number only, once with the full
//     number too (opened for every record). With -connect-pprof, connect's CPU profile of the
//     first 30 s of the import is written to a file.
//   - E, webhooks: -webhook-events ping events (POST /v1/api/me/webhooks/{id}/test) over
//     -webhook-endpoints clients with one endpoint each, sent by -c workers, delivered to a
//     receiver in this process that checks every Standard Webhooks signature and acknowledges:
//     events delivered per second (first ping sent to last event received) and the lag from
//     each event's createdAt to its arrival, p50 and p99, beside D's delivery figures. No goal
//     yet: the issue asks for the figures.
//   - F, CAMARA: the latency of one verification by the way the operator vouches for the line,
//     against a fake CAMARA operator (platform/testkit/sandboxcamara) that this process starts
//     before the suite, with verification's registry holding the sandbox operator and a NETWORK_API
//     operator at the fake (enabled per client, as a client's operators are). Three flows, each
//     ending in one charged VERIFIED answer: header enrichment (SDK session with the sandbox's
//     number header, then POST /v1/api/verify), NETWORK_API (SDK session naming the
//     operator, the device following its authorization URL to the fake and back to mnv's
//     callback, then POST /v1/api/verify with serviceType NETWORK_API, which calls the fake's
//     /verify), and the CAMARA facade (the device's authorization code flow through the gateway,
//     the client's token exchange, then POST /number-verification/v2/verify). -camara-flows of
//     each, first interleaved one at a time, then each flow alone on -camara-c workers: p50 and
//     p99 of the verify call alone and of the whole flow, and what NETWORK_API adds over header
//     enrichment. The charges are checked per flow against the VERIFIED answers, and the fake's
//     /verify calls against the NETWORK_API verifies. No goal: the issue asks for the figures.
//     The fake runs in this process, so its CPU counts as the generator's.
//   - The raw PostgreSQL limit (../shared/bench/pgbench-verify-limit.sh, when present), run
//     last so it does not compete: the same writes as plain SQL, so mnv's debits/s can be read
//     as a fraction of what the database allows.
//
// The load generator, the services and PostgreSQL share the machine, so absolute numbers are
// only comparable between runs on the same machine; the ratios are the point. Each service runs
// with the GOMAXPROCS its production CPU limit gives it (deploy/k8s/overlays/prod, read at the
// start: gateway and verification 1, accounts and connect 2 today), as Go derives it in a pod. To tell where a
// request's cost went, every run also splits the machine's CPU time per request (per row or
// record for D) between the generator, the gateway, accounts, verification, connect and the
// rest (PostgreSQL, other tenants). The report goes to stdout and out/bench.txt. The exit code
// is 1 when a benchmark had more than 1% errors, a check (balances, charges, the import, the
// deliveries) failed or the suite could not run.
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
	"strings"
	"syscall"
	"time"

	"github.com/mnvhq/mnv/services/platform/testkit/sandboxsmsc"
	"github.com/mnvhq/mnv/tests/harness"
)

const (
	maxErrorRate = 0.01
	restGoal     = 0.70
	hotGoal      = 0.90
	verifyGoal   = 0.90 // one-client verifies/s over many-client ones
	pacedP99Goal = 15 * time.Millisecond
	callTimeout  = 10 * time.Second
)

// suiteEnv is added to every process of the suite: quiet logs, and the rate limits off (per
// credential, per address), which benchmark C would otherwise run into at once. The per-number
// limit stays on: no number is verified twice.
var suiteEnv = []string{"MNV_LOG_LEVEL=warn", "MNV_CLIENT_RATE=0", "MNV_IP_RATE=0", "MNV_AUTH_FAILURE_RATE=0"}

// Options are the command line's choices beyond the load shape.
type Options struct {
	Procs        map[string]int // GOMAXPROCS by service (prodProcs)
	GRPCConns    int
	SkipAPI      bool // benchmark A
	SkipDebits   bool // benchmark B
	VerifyRounds int  // rounds of benchmark C
	SkipVerify   bool
	// OpenLoop are the shares of benchmark C's many-client peak at which it runs an open loop;
	// the p99 goal is at goalShare.
	OpenLoop     []float64
	SkipConnect  bool
	ConnectRows  int    // rows of benchmark D's CSV
	ConnectPprof string // where to write connect's CPU profile of the import ("": none)
	// Pprof is a folder for every service's CPU profiles of the first round of each variant of
	// A, B and C ("": none).
	Pprof        string
	SkipWebhooks bool
	// WebhookEvents are benchmark E's pings, spread over WebhookEndpoints clients.
	WebhookEvents, WebhookEndpoints int
	SkipCAMARA                      bool
	// CAMARAFlows are benchmark F's flows of each kind, per run; CAMARAWorkers its concurrent
	// workers (0: the sequential run only).
	CAMARAFlows, CAMARAWorkers int
	SkipUsage                  bool
	// UsageRows are the verifications benchmark G seeds; UsageCalls its timed calls per range,
	// UsageLive its calls before the roll-up.
	UsageRows, UsageCalls, UsageLive int
	// SkipWorkflowUsage skips G's workflow part; WorkflowUsageSteps are the steps it seeds (its
	// calls are G's).
	SkipWorkflowUsage  bool
	WorkflowUsageSteps int
	SkipWorkflows      bool
	// Workflows are benchmark H's workflows, on WorkflowWorkers workers.
	Workflows, WorkflowWorkers int
	SkipConsole                bool
	// ConsoleLoads are benchmark I's loads of the console's first page, cold and warm each.
	ConsoleLoads int
}

func main() { os.Exit(run()) }

func run() int {
	var (
		cfg         = Config{Timeout: callTimeout}
		opts        Options
		skipPGBench bool
	)
	flag.IntVar(&cfg.Workers, "c", 32, "concurrent workers (closed loop)")
	flag.DurationVar(&cfg.Duration, "d", 10*time.Second, "measured duration of each round")
	flag.IntVar(&cfg.Rounds, "rounds", 2, "interleaved rounds of each benchmark")
	flag.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "uncounted warm-up before each measured round")
	flag.IntVar(&opts.GRPCConns, "grpc-conns", 1, "gRPC client connections to accounts, used round-robin")
	flag.BoolVar(&opts.SkipAPI, "skip-api", false, "do not run benchmark A (REST against gRPC)")
	flag.BoolVar(&opts.SkipDebits, "skip-debits", false, "do not run benchmark B (hot against spread debits)")
	flag.IntVar(&opts.VerifyRounds, "verify-rounds", 0, "interleaved rounds of benchmark C (0: as -rounds)")
	flag.BoolVar(&opts.SkipVerify, "skip-verify", false, "do not run benchmark C (REST verify)")
	flag.BoolVar(&opts.SkipConnect, "skip-connect", false, "do not run benchmark D (Connect import and delivery)")
	flag.IntVar(&opts.ConnectRows, "connect-rows", 1_000_000, "rows of benchmark D's CSV (at most what fits in 50 MiB)")
	flag.StringVar(&opts.ConnectPprof, "connect-pprof", "", fmt.Sprintf("write connect's CPU profile of the first %ds of the import to this file", pprofSeconds))
	flag.StringVar(&opts.Pprof, "pprof", "", "write each service's CPU profile of the first measured round of every A, B and C variant (the open loop included) into this folder")
	flag.BoolVar(&opts.SkipWebhooks, "skip-webhooks", false, "do not run benchmark E (webhook delivery)")
	flag.IntVar(&opts.WebhookEvents, "webhook-events", 5000, "ping events of benchmark E")
	flag.IntVar(&opts.WebhookEndpoints, "webhook-endpoints", 4, "clients of benchmark E, one endpoint each")
	flag.BoolVar(&opts.SkipCAMARA, "skip-camara", false, "do not run benchmark F (CAMARA: NETWORK_API and facade latency against header enrichment)")
	flag.IntVar(&opts.CAMARAFlows, "camara-flows", 200, "flows of each kind in each run of benchmark F")
	flag.IntVar(&opts.CAMARAWorkers, "camara-c", 4, "concurrent workers of benchmark F's second run (0: none)")
	flag.BoolVar(&opts.SkipUsage, "skip-usage", false, "do not run benchmark G (the usage route over seeded verifications)")
	flag.IntVar(&opts.UsageRows, "usage-rows", 10_000_000, "verifications benchmark G seeds for its client, over 365 days")
	flag.IntVar(&opts.UsageCalls, "usage-calls", 50, "calls of benchmark G per range")
	flag.IntVar(&opts.UsageLive, "usage-live-calls", 3, "365-day calls of benchmark G before the roll-up, read from the rows alone (0: none)")
	flag.BoolVar(&opts.SkipWorkflowUsage, "skip-workflow-usage", false, "do not run benchmark G's workflow part (the workflow usage route over seeded steps)")
	flag.IntVar(&opts.WorkflowUsageSteps, "workflow-usage-steps", 2_000_000, "workflow steps benchmark G's workflow part seeds for its client, over 365 days")
	flag.BoolVar(&opts.SkipWorkflows, "skip-workflows", false, "do not run benchmark H (verification workflows: SMS over one SMPP bind to VERIFIED)")
	flag.IntVar(&opts.Workflows, "workflows", 500, "workflows of benchmark H")
	flag.IntVar(&opts.WorkflowWorkers, "workflows-c", 16, "concurrent workers of benchmark H")
	flag.BoolVar(&opts.SkipConsole, "skip-console", false, "do not run benchmark I (the console's first page in Chromium, signed in with a passkey)")
	flag.IntVar(&opts.ConsoleLoads, "console-loads", 20, "loads of benchmark I's first page, cold and warm each")
	flag.BoolVar(&skipPGBench, "skip-pgbench", false, "do not measure the raw PostgreSQL limit")
	openLoop := flag.String("open-loop", "0.5,0.25", "shares of benchmark C's many-client peak to run an open loop at, comma-separated (the p99 goal is at 0.5; empty: none)")
	flag.Parse()
	shares, err := parseShares(*openLoop)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	opts.OpenLoop = shares
	if opts.VerifyRounds == 0 {
		opts.VerifyRounds = cfg.Rounds
	}
	if cfg.Workers < 1 || cfg.Duration <= 0 || cfg.Rounds < 1 || cfg.Warmup < 0 || opts.GRPCConns < 1 || opts.VerifyRounds < 0 || opts.ConnectRows < 1 ||
		opts.WebhookEvents < 1 || opts.WebhookEndpoints < 1 || opts.CAMARAFlows < 1 || opts.CAMARAWorkers < 0 || opts.UsageRows < 1 || opts.UsageCalls < 1 || opts.UsageLive < 0 || opts.WorkflowUsageSteps < 4 || opts.Workflows < 1 || opts.WorkflowWorkers < 1 || opts.ConsoleLoads < 1 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "bench: -c, -d, -rounds, -grpc-conns, -connect-rows, -webhook-events, -webhook-endpoints, -camara-flows, -usage-rows, -usage-calls, -workflows, -workflows-c and -console-loads must be positive, -warmup, -verify-rounds, -camara-c and -usage-live-calls not negative; no arguments")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	progress := os.Stderr
	root, _ := harness.RepoRoot() // "" outside a checkout: the report goes to ./out
	procs, err := prodProcs(root, profiled)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	opts.Procs = procs
	start := time.Now()

	rep := Report{Header: []string{
		"mnv bench " + start.Format(time.RFC3339),
		fmt.Sprintf("parameters: C=%d D=%s rounds=%d warm-up=%s (before every round) GOMAXPROCS=%d nproc=%d grpc-conns=%d (round-robin)",
			cfg.Workers, cfg.Duration, cfg.Rounds, cfg.Warmup, runtime.GOMAXPROCS(0), runtime.NumCPU(), opts.GRPCConns),
		"suite env: " + strings.Join(suiteEnv, " ") + " (verification's per-client rate off; its per-number limit at its default)",
		"GOMAXPROCS of each service as its CPU limit in " + prodOverlay + " gives it: " + procsLine(procs),
		"req/s = median of the rounds (each: successes / wall time); p50, p99 over every successful request of every round",
		"the load generator, accounts, verification, connect, gateway and PostgreSQL all run on this machine",
	}}
	if !opts.SkipVerify {
		rep.Header = append(rep.Header, fmt.Sprintf("C: rounds=%d; %d clients (many) and 1 client (one); every verify consumes a sealed blob of an SDK session opened before its round (not measured); "+
			"open loop at each of %s (of the many-client req/s) for %s (after a warm-up), at most %d in flight, latency from the scheduled send",
			opts.VerifyRounds, verifyManyClients, sharesLine(opts.OpenLoop), cfg.Duration, pacedInFlight*cfg.Workers))
	}
	if !opts.SkipConnect {
		rep.Header = append(rep.Header, fmt.Sprintf("D: %d rows, header %s, rows %s; one client (CONNECT); delivery: MANUAL sync of every profile in batches of %d, plain http to a receiver in this process",
			opts.ConnectRows, csvHeader, csvRowShape, deliveryBatch))
	}

	if !opts.SkipWebhooks {
		rep.Header = append(rep.Header, fmt.Sprintf("E: %d pings over %d clients (one endpoint each), %d senders; plain http to a receiver in this process that verifies each signature; lag from the event's createdAt",
			opts.WebhookEvents, opts.WebhookEndpoints, cfg.Workers))
	}

	if !opts.SkipCAMARA {
		rep.Header = append(rep.Header, fmt.Sprintf("F: %d flows of each kind interleaved on one worker, then each kind alone on %d workers (%d uncounted first); one VERIFIED answer per flow; "+
			"the fake CAMARA operator runs in this process (its CPU is gen's)", opts.CAMARAFlows, opts.CAMARAWorkers, camaraWarmup))
	}

	err = measure(ctx, cfg, opts, progress, &rep)
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

// measure starts the suite, runs benchmarks A to H into rep and stops the suite again.
func measure(ctx context.Context, cfg Config, opts Options, progress io.Writer, rep *Report) (err error) {
	hopts := harness.Options{Env: suiteEnv, ProcessEnv: map[string][]string{}}
	for name, n := range opts.Procs {
		hopts.ProcessEnv[name] = []string{fmt.Sprintf("GOMAXPROCS=%d", n)}
	}
	// Each process serves pprof on its own address when a profile is asked for.
	debug := map[string]string{}
	if (!opts.SkipConnect && opts.ConnectPprof != "") || opts.Pprof != "" {
		for _, name := range profiled {
			if debug[name], err = harness.FreeAddr(); err != nil {
				return err
			}
			hopts.ProcessEnv[name] = append(hopts.ProcessEnv[name], "MNV_DEBUG_ADDR="+debug[name])
		}
	}
	var camaraOp *CAMARAOperator
	if !opts.SkipCAMARA {
		fmt.Fprintln(progress, "== starting the fake CAMARA operator")
		if camaraOp, err = startCAMARAOperator(); err != nil {
			return fmt.Errorf("benchmark F: %w", err)
		}
		defer camaraOp.Close()
		hopts.ProcessEnv["verification"] = append(hopts.ProcessEnv["verification"], "MNV_OPERATORS_FILE="+camaraOp.Registry)
	}
	var smsc *sandboxsmsc.Server
	if !opts.SkipWorkflows {
		var env []string
		if smsc, env, err = startBenchSMSC(); err != nil {
			return fmt.Errorf("benchmark H: %w", err)
		}
		defer smsc.Close()
		hopts.ProcessEnv["verification"] = append(hopts.ProcessEnv["verification"], env...)
	}
	fmt.Fprintln(progress, "== starting accounts, verification, connect and gateway")
	if opts.Pprof != "" {
		cfg.Profile = profileAll(debug, opts.Pprof, progress)
	}
	s, err := harness.Start(ctx, hopts)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w (service logs in %s)", err, s.LogDir)
		}
		s.Stop()
	}()

	if opts.SkipAPI {
		rep.Notes = append(rep.Notes, "benchmark A (REST against gRPC) skipped: -skip-api")
	} else {
		fmt.Fprintln(progress, "== A: REST through the gateway vs gRPC to accounts")
		rest, grpcM, err := benchAPI(ctx, s, cfg, opts.GRPCConns, progress)
		if err != nil {
			return fmt.Errorf("benchmark A: %w", err)
		}
		rep.Rows = append(rep.Rows, rest, grpcM)
		rep.Ratios = append(rep.Ratios, Ratio{Name: "REST/gRPC", Num: rest.Throughput(), Den: grpcM.Throughput(), Goal: restGoal})
	}
	if opts.SkipDebits {
		rep.Notes = append(rep.Notes, "benchmark B (hot against spread debits) skipped: -skip-debits")
	} else {
		fmt.Fprintln(progress, "== B: debits spread over many clients vs on one client")
		deb, err := benchDebits(ctx, s, cfg, opts.GRPCConns, progress)
		if err != nil {
			return fmt.Errorf("benchmark B: %w", err)
		}
		rep.Rows = append(rep.Rows, deb.Spread, deb.Hot)
		rep.Ratios = append(rep.Ratios, Ratio{Name: "hot/spread", Num: deb.Hot.Throughput(), Den: deb.Spread.Throughput(), Goal: hotGoal})
		rep.Checks = append(rep.Checks, deb.Checks...)
		rep.Spread, rep.Hot = deb.Spread.Throughput(), deb.Hot.Throughput()
	}

	if opts.SkipVerify {
		rep.Notes = append(rep.Notes, "benchmark C (REST verify) skipped: -skip-verify")
	} else {
		fmt.Fprintln(progress, "== C: REST verify, sessions spread over many clients vs on one client")
		vcfg := cfg
		vcfg.Rounds = opts.VerifyRounds
		ver, err := benchVerify(ctx, s, vcfg, opts.OpenLoop, progress)
		if err != nil {
			return fmt.Errorf("benchmark C: %w", err)
		}
		rep.Rows = append(rep.Rows, ver.Many, ver.One)
		rep.Ratios = append(rep.Ratios, Ratio{Name: "verify one/many", Num: ver.One.Throughput(), Den: ver.Many.Throughput(), Goal: verifyGoal})
		for _, o := range ver.Open {
			rep.Rows = append(rep.Rows, o.Measured)
			l := LatencyGoal{
				Name: o.Name, Offered: o.Rate, Achieved: o.Throughput(), P50: o.Percentile(50), P99: o.Percentile(99),
				Sent: o.Rounds[0].Sent, Late: o.Rounds[0].Late, MaxLate: o.Rounds[0].MaxLate, Busy: o.Rounds[0].Busy(),
			}
			if o.Share == goalShare {
				l.P99Below = pacedP99Goal
			}
			rep.Latency = append(rep.Latency, l)
		}
		rep.Checks = append(rep.Checks, ver.Checks...)
		rep.Verify = ver.Many.Throughput()
	}
	if opts.SkipConnect {
		rep.Notes = append(rep.Notes, "benchmark D (Connect import and delivery) skipped: -skip-connect")
	} else {
		fmt.Fprintln(progress, "== D: Connect, CSV import vs raw COPY, and delivery to a local receiver")
		con, err := benchConnect(ctx, s, cfg, opts.ConnectRows, debug["connect"], opts.ConnectPprof, progress)
		if err != nil {
			return fmt.Errorf("benchmark D: %w", err)
		}
		rep.Bulk = append(rep.Bulk, con.Import, con.Raw)
		rep.Bulk = append(rep.Bulk, con.Deliveries...)
		rep.Ratios = append(rep.Ratios, Ratio{Name: "import/raw COPY", Num: con.Import.Rate(), Den: con.Raw.Rate(), Goal: importGoal, Unit: "rows/s"})
		rep.Goals = append(rep.Goals, Goal{Name: "connect peak RSS, upload+import", Value: mb(con.PeakRSS), Unit: "MB", Bound: mb(rssGoal), Below: true,
			Detail: fmt.Sprintf("largest of %d VmRSS samples every %s; %.1f MB before the upload; VmHWM afterwards %.1f MB",
				con.RSSSamples, rssEvery, mb(con.RSSBefore), mb(con.HWM))})
		for _, d := range con.Deliveries {
			rep.Goals = append(rep.Goals, Goal{Name: d.Name, Value: d.Rate(), Unit: "records/s", Bound: deliveryGoal})
		}
		rep.Checks = append(rep.Checks, con.Checks...)
		rep.Notes = append(rep.Notes, con.Notes...)
	}
	if opts.SkipWebhooks {
		rep.Notes = append(rep.Notes, "benchmark E (webhook delivery) skipped: -skip-webhooks")
	} else {
		fmt.Fprintln(progress, "== E: webhook events delivered to a local receiver")
		wh, err := benchWebhooks(ctx, s, cfg, opts.WebhookEvents, opts.WebhookEndpoints, progress)
		if err != nil {
			return fmt.Errorf("benchmark E: %w", err)
		}
		rep.Bulk = append(rep.Bulk, wh.Delivered)
		rep.Checks = append(rep.Checks, wh.Checks...)
	}
	if opts.SkipCAMARA {
		rep.Notes = append(rep.Notes, "benchmark F (CAMARA) skipped: -skip-camara")
	} else {
		fmt.Fprintln(progress, "== F: CAMARA, NETWORK_API and facade verifies against header enrichment")
		t0 := time.Now()
		cam, err := benchCAMARA(ctx, s, cfg, camaraOp, opts.CAMARAFlows, opts.CAMARAWorkers, progress)
		if err != nil {
			return fmt.Errorf("benchmark F: %w", err)
		}
		fmt.Fprintf(progress, "  benchmark F took %s\n", time.Since(t0).Round(100*time.Millisecond))
		rep.Flows = append(append(rep.Flows, cam.Sequential...), cam.Concurrent...)
		rep.Added = append(rep.Added, cam.Added...)
		rep.Checks = append(rep.Checks, cam.Checks...)
	}
	if opts.SkipWorkflows {
		rep.Notes = append(rep.Notes, "benchmark H (workflows over SMS) skipped: -skip-workflows")
	} else {
		fmt.Fprintln(progress, "== H: verification workflows, SMS over one SMPP bind to VERIFIED")
		wf, err := benchWorkflows(ctx, s, smsc, opts.Workflows, opts.WorkflowWorkers, progress)
		if err != nil {
			return fmt.Errorf("benchmark H: %w", err)
		}
		rep.Flows = append(rep.Flows, wf.Flow)
		rep.Notes = append(rep.Notes, wf.Notes...)
		rep.Checks = append(rep.Checks, wf.Checks...)
	}
	if opts.SkipConsole {
		rep.Notes = append(rep.Notes, "benchmark I (the console's first page) skipped: -skip-console")
	} else {
		fmt.Fprintln(progress, "== I: the console's first page in Chromium, signed in with a passkey")
		con, err := benchConsole(ctx, s, opts.ConsoleLoads, progress)
		if err != nil {
			return fmt.Errorf("benchmark I: %w", err)
		}
		rep.Goals = append(rep.Goals, con.Goals...)
		rep.Notes = append(rep.Notes, con.Notes...)
	}
	// Before G's verifications, lighter: two million steps in another table.
	if opts.SkipWorkflowUsage {
		rep.Notes = append(rep.Notes, "benchmark G's workflow part (workflow usage) skipped: -skip-workflow-usage")
	} else {
		fmt.Fprintln(progress, "== G (workflows): the workflow usage route over a year of seeded steps")
		us, err := benchWorkflowUsage(ctx, s, opts.WorkflowUsageSteps, opts.UsageCalls, opts.UsageLive, progress)
		if err != nil {
			return fmt.Errorf("benchmark G (workflows): %w", err)
		}
		rep.Goals = append(rep.Goals, us.Goals...)
		rep.Notes = append(rep.Notes, us.Notes...)
	}
	// Last: its ten million rows would slow what runs after them.
	if opts.SkipUsage {
		rep.Notes = append(rep.Notes, "benchmark G (usage) skipped: -skip-usage")
	} else {
		fmt.Fprintln(progress, "== G: the usage route over a year of seeded verifications")
		us, err := benchUsage(ctx, s, opts.UsageRows, opts.UsageCalls, opts.UsageLive, progress)
		if err != nil {
			return fmt.Errorf("benchmark G: %w", err)
		}
		rep.Goals = append(rep.Goals, us.Goals...)
		rep.Notes = append(rep.Notes, us.Notes...)
	}
	for _, m := range rep.Rows {
		if n := m.Exhausted(); n > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: the blob pool ran dry in %d of %d rounds (marked (dry)); those rounds ran shorter than %s and their req/s is over the time they ran",
				m.Name, n, len(m.Rounds), cfg.Duration))
		}
	}
	for _, m := range rep.Rows {
		if rate := m.ErrorRate(); rate > maxErrorRate {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s: error rate %.2f%% > %.0f%% (%d of %d); e.g. %v; service logs in %s",
				m.Name, 100*rate, 100*maxErrorRate, m.Errors(), m.OK()+m.Errors(), m.FirstErr(), s.LogDir))
		} else if m.Errors() > 0 {
			fmt.Fprintf(progress, "  note: %s had %d errors, e.g. %v\n", m.Name, m.Errors(), m.FirstErr())
		}
	}
	for _, f := range rep.Flows {
		if rate := f.ErrorRate(); rate > maxErrorRate {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s: error rate %.2f%% > %.0f%% (%d of %d); e.g. %v; service logs in %s",
				f.Name, 100*rate, 100*maxErrorRate, f.Errors, f.OK()+f.Errors, f.FirstErr, s.LogDir))
		}
	}
	for _, c := range rep.Checks {
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
