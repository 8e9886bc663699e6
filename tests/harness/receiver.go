package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/pgtest"
)

// ReceiverDir is the reference webhook receiver (Node.js, the standardwebhooks npm library),
// relative to the checkout.
const ReceiverDir = "tests/webhooks/receiver"

// Receiver is a running reference webhook receiver: a client's endpoint that verifies every
// delivery with the Standard Webhooks reference library, not with our own code.
type Receiver struct {
	t    testing.TB
	base string
	cmd  *exec.Cmd
	done chan struct{}
	errs *Output
}

// ReceiverConfig configures one path of a Receiver.
type ReceiverConfig struct {
	Path string `json:"path"`
	// Secrets are the "whsec_…" secrets a delivery may be signed with; it verifies when any one
	// of them does.
	Secrets []string `json:"secrets"`
	// FailFirst answers Status (500 when 0) to the first FailFirst attempts of each webhook-id.
	FailFirst int `json:"failFirst,omitempty"`
	Status    int `json:"status,omitempty"`
	// DelayMs holds every answer of the path this long: a slow endpoint.
	DelayMs int `json:"delayMs,omitempty"`
	// ToleranceSeconds replaces the library's ±5 minute timestamp window; nil keeps it. Only a
	// self-test of a published (old) example needs it.
	ToleranceSeconds *float64 `json:"toleranceSeconds,omitempty"`
}

// Received is one attempt the receiver recorded.
type Received struct {
	Path            string `json:"path"`
	WebhookID       string `json:"webhookId"`
	Timestamp       string `json:"timestamp"`
	SignatureHeader string `json:"signatureHeader"`
	// VerifiedWith is the index of the configured secret that verified it, -1 for none.
	VerifiedWith int `json:"verifiedWith"`
	// Error says why it did not verify (or that the path was not configured).
	Error      *string         `json:"error"`
	Body       json.RawMessage `json:"body"`
	RawBody    string          `json:"rawBody"`
	ReceivedAt int64           `json:"receivedAt"` // Unix milliseconds
	// Attempt counts the attempts of this webhook-id at this path, from 1.
	Attempt int `json:"attempt"`
}

// Verified reports whether the reference library accepted the attempt.
func (r Received) Verified() bool { return r.VerifiedWith >= 0 && r.Error == nil }

// Event is the body of a delivery: {"id","type","createdAt","data"}.
type Event struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	CreatedAt string          `json:"createdAt"`
	Data      json.RawMessage `json:"data"`
}

// Event decodes the attempt's body as an event.
func (r Received) Event() (Event, error) {
	var e Event
	if err := json.Unmarshal([]byte(r.RawBody), &e); err != nil {
		return Event{}, fmt.Errorf("body %q: %w", r.RawBody, err)
	}
	return e, nil
}

var (
	receiverDepsMu sync.Mutex
	receiverDepsOK bool
)

// ReceiverDeps installs the receiver's pinned npm packages (make receiver-deps: npm ci from the
// committed lock file, only when it changed), once per process and under a file lock, since the
// test packages of a `go test ./...` run in parallel and two npm ci in one folder break it.
func ReceiverDeps() error {
	receiverDepsMu.Lock()
	defer receiverDepsMu.Unlock()
	if receiverDepsOK {
		return nil
	}
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "mnv-webhook-receiver-deps.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock the receiver's install: %w", err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }() // closing the file unlocks it too
	cmd := exec.Command("make", "-C", root, "receiver-deps")
	// A make above us (make test) must not hand its job server or flags to this one.
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MAKELEVEL=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make receiver-deps: %w\n%s", err, out)
	}
	receiverDepsOK = true
	return nil
}

// StartReceiver installs the receiver's dependencies if need be, starts it on a free loopback
// port and stops it when the test ends.
func StartReceiver(t testing.TB) *Receiver {
	t.Helper()
	r, err := NewReceiver(t)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// NewReceiver starts a receiver; the caller stops it with Stop. Under -short (no Node.js) it
// skips t.
func NewReceiver(t testing.TB) (*Receiver, error) {
	t.Helper()
	if pgtest.Short() {
		t.Skip("harness: the webhook receiver needs Node.js; skipped under -short")
	}
	if err := ReceiverDeps(); err != nil {
		return nil, err
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("node", "receiver.mjs", "0")
	cmd.Dir = filepath.Join(root, ReceiverDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	errs := &Output{}
	cmd.Stderr = errs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the webhook receiver: %w", err)
	}
	r := &Receiver{t: t, cmd: cmd, done: make(chan struct{}), errs: errs}
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		_, _ = io.Copy(io.Discard, stdout) // nothing else is printed; keep the pipe drained
	}()
	go func() { _ = cmd.Wait(); close(r.done) }()
	select {
	case line, ok := <-first:
		var hello struct {
			Port int `json:"port"`
		}
		if !ok || json.Unmarshal([]byte(line), &hello) != nil || hello.Port == 0 {
			r.Stop()
			return nil, fmt.Errorf("the webhook receiver did not print its port (got %q): %s", line, errs.String())
		}
		r.base = fmt.Sprintf("http://127.0.0.1:%d", hello.Port)
	case <-time.After(20 * time.Second):
		r.Stop()
		return nil, fmt.Errorf("the webhook receiver did not start within 20s: %s", errs.String())
	}
	return r, nil
}

// Stop kills the receiver and waits for it.
func (r *Receiver) Stop() {
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	<-r.done
}

// URL is the address of path on the receiver ("/hooks/a"), for an endpoint's url.
func (r *Receiver) URL(path string) string { return r.base + path }

// Configure sets how path verifies and answers; the test fails if the receiver refuses it.
func (r *Receiver) Configure(c ReceiverConfig) {
	r.t.Helper()
	if err := r.TryConfigure(c); err != nil {
		r.t.Fatal(err)
	}
}

// TryConfigure is Configure for any goroutine.
func (r *Receiver) TryConfigure(c ReceiverConfig) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	resp, err := http.Post(r.base+"/_config", "application/json", bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("configure the receiver: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("configure the receiver's %s: %d %s", c.Path, resp.StatusCode, msg)
	}
	return nil
}

// Received returns the attempts recorded at path, oldest first; the test fails on an error.
func (r *Receiver) Received(path string) []Received {
	r.t.Helper()
	got, err := r.Records(path)
	if err != nil {
		r.t.Fatal(err)
	}
	return got
}

// Records is Received for any goroutine.
func (r *Receiver) Records(path string) ([]Received, error) {
	resp, err := http.Get(r.base + "/_received?path=" + url.QueryEscape(path))
	if err != nil {
		return nil, fmt.Errorf("read the receiver: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("read the receiver's %s: %d %s", path, resp.StatusCode, msg)
	}
	var got []Received
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		return nil, fmt.Errorf("read the receiver's %s: %w", path, err)
	}
	return got, nil
}

// Await polls path's records until done accepts them, and returns them; the test fails after
// within, showing what arrived.
func (r *Receiver) Await(path string, within time.Duration, what string, done func([]Received) bool) []Received {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := r.Received(path)
		if done(got) {
			return got
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: not within %s at %s; the receiver has %s", what, within, path, Summary(got))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Summary writes records briefly for a failure message.
func Summary(recs []Received) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d attempts:", len(recs))
	for _, rc := range recs {
		e, _ := rc.Event()
		errMsg := ""
		if rc.Error != nil {
			errMsg = " error=" + *rc.Error
		}
		fmt.Fprintf(&b, "\n  %s attempt %d type=%s verifiedWith=%d%s", rc.WebhookID, rc.Attempt, e.Type, rc.VerifiedWith, errMsg)
	}
	return b.String()
}
