package readme_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/tests/harness"
	"github.com/mnvhq/mnv/tests/readme"
)

// TestReadmeRuns pastes the README into a shell, block by block, against a real `make run` on
// free ports, as a newcomer on a fresh clone would: each block must exit 0 and print what the
// README shows after it. The README cannot drift from what the suite answers.
func TestReadmeRuns(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := readme.Blocks(md)
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	runnable := 0
	for _, b := range blocks {
		if b.Mode == readme.Run {
			runnable++
		}
	}
	if runnable < 10 {
		t.Fatalf("README.md has %d runnable shell blocks; the walk-through should have many more", runnable)
	}

	// The blocks above are checked under -short too; running them needs PostgreSQL and make run.
	if testing.Short() {
		t.Skip("readme: running the walk-through needs PostgreSQL and make run; skipped under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dbURL, drop, err := pgtest.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)

	// The reader's terminal: a folder like the checkout's root, with the binaries make run builds
	// and the state folder it writes.
	home := t.TempDir()
	if err := os.Symlink(filepath.Join(root, "bin"), filepath.Join(home, "bin")); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"DATABASE_URL":  dbURL,
		"MNV_STATE_DIR": filepath.Join(home, ".mnv"),
		"MNV_LOG_LEVEL": "warn",
	}
	suite, err := harness.StartMakeRunReady(ctx, root, env, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(suite.Stop)
	// A start where nothing is wrong is quiet: a warning there reads as a fault to a newcomer.
	// (The principal streams open in the first moments; give them one.)
	time.Sleep(time.Second)
	if out := suite.Output(); strings.Contains(out, "WARN") {
		t.Errorf("make run warned on a clean start:\n%s", out)
	}

	sh := newShell(t, home, env)
	for _, b := range blocks {
		switch b.Mode {
		case readme.Skip:
			continue
		case readme.Background:
			sh.background(b)
			continue
		}
		out, errOut, err := sh.run(ctx, b)
		if err != nil {
			t.Fatalf("README.md line %d: the block failed: %v\n--- block\n%s--- stdout\n%s--- stderr\n%s--- make run\n%s",
				b.Line, err, b.Code, out, errOut, suite.Output())
		}
		// Two answers printed without a newline between them read as one garbled line.
		if strings.Contains(out, "}{") {
			t.Errorf("README.md line %d: two answers glued on one line (add a newline):\n%s", b.Line, out)
		}
		if b.Shown != "" {
			if err := readme.Match(b.Shown, out); err != nil {
				t.Fatalf("README.md line %d: the block prints other than the README shows: %v\n--- block\n%s--- stdout\n%s--- stderr\n%s",
					b.Line, err, b.Code, out, errOut)
			}
		}
	}
	checkLeftBehind(t, home)
}

// The walk cleans up after itself: what a reader started, it stops, and it leaves no file in
// the checkout but the state folder (and the binaries).
func checkLeftBehind(t *testing.T, home string) {
	t.Helper()
	entries, err := os.ReadDir(home)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "bin" && e.Name() != ".mnv" {
			t.Errorf("the walk leaves %s in the checkout", e.Name())
		}
	}
	// The receivers the walk starts (the CRM's, the webhooks').
	for _, addr := range []string{"127.0.0.1:9999", "127.0.0.1:8099"} {
		deadline := time.Now().Add(5 * time.Second)
		for {
			lis, err := net.Listen("tcp", addr)
			if err == nil {
				_ = lis.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("the walk leaves a receiver running on %s", addr)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// shell runs blocks as one terminal session would: in the checkout, with the variables one
// block sets seen by the next.
type shell struct {
	t    *testing.T
	dir  string
	env  []string
	vars string // the file the session's variables are kept in between blocks
	base string // the variables a fresh shell has, which are not carried
}

func newShell(t *testing.T, dir string, env map[string]string) *shell {
	state := t.TempDir()
	s := &shell{t: t, dir: dir, vars: filepath.Join(state, "vars"), base: filepath.Join(state, "base")}
	// A reader's terminal does not hold the suite's settings: only what a terminal has.
	for _, k := range []string{"PATH", "HOME", "LANG", "TERM", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			s.env = append(s.env, k+"="+v)
		}
	}
	if err := os.WriteFile(s.vars, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", "compgen -v > "+s.base)
	cmd.Env = s.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bash: %v %s", err, out)
	}
	return s
}

// script wraps a block: restore the session's variables, run the block with errors fatal, keep
// the variables it set.
func (s *shell) script(code string) string {
	return fmt.Sprintf(`source %[1]q 2>/dev/null || true
set -euo pipefail
%[3]s
set +u
for v in $(compgen -v); do grep -qx "$v" %[2]q || declare -p "$v" 2>/dev/null; done > %[1]q
`, s.vars, s.base, code)
}

func (s *shell) run(ctx context.Context, b readme.Block) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", s.script(b.Code))
	cmd.Dir, cmd.Env = s.dir, s.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	// A block may start a receiver in the background, which a later block stops. When the walk
	// fails between the two, the receiver would outlive the test and hold its port against the
	// next run: each block has a process group of its own, killed when the test ends (after
	// checkLeftBehind, which still tells a walk that forgets to stop what it started).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Run()
	if cmd.Process != nil {
		pgid := cmd.Process.Pid
		s.t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	}
	return out.String(), errOut.String(), err
}

func (s *shell) background(b readme.Block) {
	cmd := exec.Command("bash", "-c", fmt.Sprintf("source %q 2>/dev/null || true\n%s", s.vars, b.Code))
	cmd.Dir, cmd.Env = s.dir, s.env
	logs := &harness.Output{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("README.md line %d: %v", b.Line, err)
	}
	s.t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	// A server block needs a moment to listen before the next block calls it.
	time.Sleep(time.Second)
}
