package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// PGLimit is what PostgreSQL alone does on this machine (pgbench-verify-limit.sh), or why it
// was not measured.
type PGLimit struct {
	Script      string
	Seconds     int
	Clients     int
	Spread, Hot float64
	Skipped     string
}

// pgbenchScript finds the raw-limit script: $MNV_PGBENCH_SCRIPT, else
// ../shared/bench/pgbench-verify-limit.sh next to the repository.
func pgbenchScript(root string) (string, error) {
	path := os.Getenv("MNV_PGBENCH_SCRIPT")
	if path == "" {
		if root == "" {
			return "", fmt.Errorf("repository root not found and MNV_PGBENCH_SCRIPT not set")
		}
		path = filepath.Join(root, "..", "shared", "bench", "pgbench-verify-limit.sh")
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("no script: %w", err)
	}
	return path, nil
}

// runPGLimit runs the script against the server at dbURL with the benchmark's duration and
// concurrency. It never fails the benchmark: a missing script or a failed run is reported as
// Skipped.
func runPGLimit(ctx context.Context, root, dbURL string, d time.Duration, clients int) PGLimit {
	l := PGLimit{Seconds: max(1, int(math.Ceil(d.Seconds()))), Clients: clients}
	script, err := pgbenchScript(root)
	if err != nil {
		l.Skipped = err.Error()
		return l
	}
	l.Script = script
	if dbURL == "" {
		l.Skipped = "DATABASE_URL is not set"
		return l
	}
	cmd := exec.CommandContext(ctx, "bash", script, dbURL, strconv.Itoa(l.Seconds), strconv.Itoa(clients))
	// Its own process group, so an interrupt reaches pgbench too and the script's exit trap
	// still drops its scratch database.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		l.Skipped = fmt.Sprintf("%s failed: %v: %s", filepath.Base(script), err, lastLine(stderr.String()))
		return l
	}
	vals := map[string]float64{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 {
			vals[k] = f
		}
	}
	var found bool
	if l.Spread, found = vals["spread_tps"]; !found {
		l.Skipped = fmt.Sprintf("no spread_tps in the output of %s: %q", filepath.Base(script), stdout.String())
	} else if l.Hot, found = vals["hot_tps"]; !found {
		l.Skipped = fmt.Sprintf("no hot_tps in the output of %s: %q", filepath.Base(script), stdout.String())
	}
	return l
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	if s == "" {
		return "(no output on stderr)"
	}
	return s
}
