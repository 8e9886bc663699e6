package harness

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MakeRun is `make run` started from a checkout, as a newcomer starts it: one process group
// whose output is kept for messages.
type MakeRun struct {
	cmd *exec.Cmd
	out *Output
}

// StartMakeRun starts `make -C root run` with env added to this process's environment (give it
// free addresses, its own MNV_STATE_DIR and a fresh DATABASE_URL). Stop it with Stop.
func StartMakeRun(root string, env map[string]string) (*MakeRun, error) {
	cmd := exec.Command("make", "-C", root, "run")
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out := &Output{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("make run: %w", err)
	}
	return &MakeRun{cmd: cmd, out: out}, nil
}

// Output is what make run printed so far.
func (m *MakeRun) Output() string { return m.out.String() }

// WaitReady waits until make run printed its banner (after the demo client is made) and
// readyURL answers 200.
func (m *MakeRun) WaitReady(ctx context.Context, readyURL string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if strings.Contains(m.out.String(), "mnv is running") {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, readyURL, nil)
			if err != nil {
				return err
			}
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("make run did not get ready within %s:\n%s", within, m.out.String())
}

// Stop ends make run: make execs mnv, which stops on SIGTERM; the whole group is killed when it
// has not within 20 seconds.
func (m *MakeRun) Stop() {
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = m.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// Output collects a process's output for messages, safe for concurrent writes.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}
