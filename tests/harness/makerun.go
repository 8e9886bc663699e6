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
	cmd    *exec.Cmd
	out    *Output
	exited chan struct{} // closed once make run has exited
}

// MakeRunAddrs are the variables of every address make run listens on: a run of its own gets
// each free, so two runs at once (tests/readme and tests/browser) never meet on a default port.
var MakeRunAddrs = []string{"MNV_HTTP_ADDR", "MNV_ACCOUNTS_GRPC_ADDR", "MNV_VERIFICATION_GRPC_ADDR",
	"MNV_CONNECT_GRPC_ADDR", "MNV_DEMO_ADDR", "MNV_VERIFICATION_CAMARA_ADDR"}

// StartMakeRunReady starts make run on free addresses (it sets MakeRunAddrs in env) and waits
// until its gateway is ready. An address is free only when asked: another process (an outgoing
// connection's ephemeral port, a parallel test) may take it before make run listens, and make
// run then exits at once with "address already in use". Such a start is tried again on new
// addresses, three times in all; any other failure is returned with make run's output.
func StartMakeRunReady(ctx context.Context, root string, env map[string]string, within time.Duration) (*MakeRun, error) {
	for attempt := 1; ; attempt++ {
		for _, name := range MakeRunAddrs {
			addr, err := FreeAddr()
			if err != nil {
				return nil, err
			}
			env[name] = addr
		}
		m, err := StartMakeRun(root, env)
		if err != nil {
			return nil, err
		}
		err = m.WaitReady(ctx, "http://"+env["MNV_HTTP_ADDR"]+"/readyz", within)
		if err == nil {
			return m, nil
		}
		m.Stop()
		if attempt == 3 || !strings.Contains(m.Output(), "address already in use") {
			return nil, err
		}
	}
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
	m := &MakeRun{cmd: cmd, out: out, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(m.exited) }()
	return m, nil
}

// Output is what make run printed so far.
func (m *MakeRun) Output() string { return m.out.String() }

// WaitReady waits until make run printed its banner (after the demo client is made) and
// readyURL answers 200; it gives up at once when make run exits.
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
		case <-m.exited:
			return fmt.Errorf("make run exited before it was ready:\n%s", m.out.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("make run did not get ready within %s:\n%s", within, m.out.String())
}

// Stop ends make run: make execs mnv, which stops on SIGTERM; the whole group is killed when it
// has not within 20 seconds.
func (m *MakeRun) Stop() {
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.exited
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
