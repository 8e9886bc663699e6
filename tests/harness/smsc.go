package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/pgtest"
)

// SMSCDir is the test SMSC (Node.js, npm's smpp server), relative to the checkout.
const SMSCDir = "tests/smsc"

// SMSC is a running test SMSC: an operator's SMS centre speaking SMPP 3.4 through an
// implementation that is not ours, steered over its control port.
type SMSC struct {
	t       testing.TB
	Addr    string // host:port of its SMPP listener
	control string
	cmd     *exec.Cmd
	done    chan struct{}
	errs    *Output
}

// SMSCConfig is what the test SMSC accepts and how it answers.
type SMSCConfig struct {
	SystemID string `json:"systemId"`
	Password string `json:"password"`
	// Undeliverable numbers get an UNDELIV receipt; every other one DELIVRD.
	Undeliverable []string `json:"undeliverable"`
	// Refuse numbers: their submits are answered ESME_RINVDSTADR (refused for good).
	Refuse         []string `json:"refuse"`
	ReceiptDelayMs int      `json:"receiptDelayMs"`
	// RefuseReceipts sends no receipt at all.
	RefuseReceipts bool `json:"refuseReceipts"`
	// TLSCert and TLSKey (PEM files) make the SMPP port speak TLS only, as an SMSC reached
	// over the internet does (MNV_SMPP_TLS). They are read at start-up, not over the control port.
	TLSCert string `json:"-"`
	TLSKey  string `json:"-"`
	// ReceiptReference, when false, leaves user_message_reference out of the receipts (some
	// operators' SMSCs do); nil or true echoes the submit's.
	ReceiptReference *bool `json:"receiptReference,omitempty"`
}

// SMSCSubmit is one submit_sm the test SMSC read, as npm's smpp decoded it.
type SMSCSubmit struct {
	SessionID          int    `json:"sessionId"`
	Seq                uint32 `json:"seq"`
	Source             string `json:"source"`
	SourceTON          int    `json:"sourceTon"`
	Dest               string `json:"dest"`
	DestTON            int    `json:"destTon"`
	DataCoding         int    `json:"dataCoding"`
	ESMClass           int    `json:"esmClass"`
	RegisteredDelivery int    `json:"registeredDelivery"`
	Text               string `json:"text"`
	Concat             *struct {
		Ref   int `json:"ref"`
		Total int `json:"total"`
		Seq   int `json:"seq"`
	} `json:"concat"`
	// Reference is the submit's user_message_reference (nil: none).
	Reference *int `json:"reference"`
	// Status is the command_status it answered (nil: never answered).
	Status    *int   `json:"status"`
	MessageID string `json:"messageId"`
	Answered  bool   `json:"answered"`
}

// Accepted reports whether the SMSC took the message: answered with a message id.
func (s SMSCSubmit) Accepted() bool { return s.Answered && s.Status != nil && *s.Status == 0 }

// SMSCReceipt is one deliver_sm receipt the test SMSC sent.
type SMSCReceipt struct {
	MessageID string `json:"messageId"`
	Dest      string `json:"dest"`
	Stat      string `json:"stat"`
	SessionID int    `json:"sessionId"`
	Acked     bool   `json:"acked"`
	// Status is the deliver_sm_resp's command_status (nil: never answered); a non-zero one is a
	// receipt the client deferred, sent again later.
	Status *int `json:"status"`
	// Reference is the user_message_reference the receipt carried (nil: none).
	Reference *int `json:"reference"`
}

// SMSCBind is one bind attempt and the status it was answered with.
type SMSCBind struct {
	SessionID        int    `json:"sessionId"`
	SystemID         string `json:"systemId"`
	SystemType       string `json:"systemType"`
	InterfaceVersion int    `json:"interfaceVersion"`
	Status           int    `json:"status"`
}

var (
	nodeDepsMu   sync.Mutex
	nodeDepsDone = map[string]bool{}
)

// NodeDeps runs `make target` (an npm ci from a committed lock file, only when it changed) once
// per process and under a file lock, since test packages run in parallel and two npm ci in one
// folder break it.
func NodeDeps(target string) error {
	nodeDepsMu.Lock()
	defer nodeDepsMu.Unlock()
	if nodeDepsDone[target] {
		return nil
	}
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "mnv-"+target+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", target, err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	cmd := exec.Command("make", "-C", root, target)
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MAKELEVEL=") // not the job server of a make above us
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make %s: %w\n%s", target, err, out)
	}
	nodeDepsDone[target] = true
	return nil
}

// StartSMSC installs the test SMSC's npm packages if need be, starts it on free loopback ports
// with cfg and stops it when the test ends. Under -short (no Node.js) it skips t.
func StartSMSC(t testing.TB, cfg SMSCConfig) *SMSC {
	t.Helper()
	if pgtest.Short() {
		t.Skip("harness: the test SMSC needs Node.js; skipped under -short")
	}
	if err := NodeDeps("smsc-deps"); err != nil {
		t.Fatal(err)
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "smsc.mjs")
	cmd.Dir = filepath.Join(root, SMSCDir)
	if cfg.TLSCert != "" {
		cmd.Env = append(os.Environ(), "SMSC_TLS_CERT="+cfg.TLSCert, "SMSC_TLS_KEY="+cfg.TLSKey)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errs := &Output{}
	cmd.Stderr = errs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the test SMSC: %v", err)
	}
	s := &SMSC{t: t, cmd: cmd, done: make(chan struct{}), errs: errs}
	t.Cleanup(s.Stop)
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { _ = cmd.Wait(); close(s.done) }()
	select {
	case line, ok := <-first:
		var ports struct{ SMPP, Control int }
		if !ok || json.Unmarshal([]byte(line), &ports) != nil || ports.SMPP == 0 {
			t.Fatalf("the test SMSC did not print its ports (got %q): %s", line, errs.String())
		}
		s.Addr = fmt.Sprintf("127.0.0.1:%d", ports.SMPP)
		s.control = fmt.Sprintf("http://127.0.0.1:%d", ports.Control)
	case <-time.After(20 * time.Second):
		t.Fatalf("the test SMSC did not start within 20s: %s", errs.String())
	}
	s.Post("/config", cfg)
	return s
}

// Stop kills the SMSC and waits for it.
func (s *SMSC) Stop() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

// Throttle answers the next n submit_sm with ESME_RTHROTTLED.
func (s *SMSC) Throttle(n int) { s.Post("/throttle", map[string]int{"count": n}) }

// DropAfter lets n more submit_sm be answered, then reads the next one without answering and
// ends its session: mode "close" (FIN after what was written), "reset" (at once) or "unbind"
// (an unbind request, the connection closed once the client answers).
func (s *SMSC) DropAfter(n int, mode string) {
	s.Post("/dropAfter", map[string]any{"count": n, "mode": mode})
}

// Unbind sends unbind on every bound session.
func (s *SMSC) Unbind() { s.Post("/unbind", struct{}{}) }

// Drop ends every connection now.
func (s *SMSC) Drop(mode string) { s.Post("/drop", map[string]string{"mode": mode}) }

// Received is every submit_sm read, oldest first.
func (s *SMSC) Received() []SMSCSubmit {
	var v []SMSCSubmit
	s.get("/received", &v)
	return v
}

// Receipts is every receipt sent.
func (s *SMSC) Receipts() []SMSCReceipt {
	var v []SMSCReceipt
	s.get("/receipts", &v)
	return v
}

// Enquire sends enquire_link on every bound session; Enquired lists the answers.
func (s *SMSC) Enquire() { s.Post("/enquire", struct{}{}) }

// SMSCEnquired is the answer to one of the SMSC's enquire_link.
type SMSCEnquired struct {
	SessionID int    `json:"sessionId"`
	Command   string `json:"command"`
	Status    int    `json:"status"`
}

// Enquired is every answer to the SMSC's enquire_link, as npm's smpp parsed it.
func (s *SMSC) Enquired() []SMSCEnquired {
	var v []SMSCEnquired
	s.get("/enquired", &v)
	return v
}

// Binds is every bind attempt.
func (s *SMSC) Binds() []SMSCBind {
	var v []SMSCBind
	s.get("/binds", &v)
	return v
}

// Post sends v as JSON to one of the SMSC's control paths (see smsc.mjs); the test fails if it
// is refused. /config takes a partial SMSCConfig.
func (s *SMSC) Post(path string, v any) {
	s.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		s.t.Fatal(err)
	}
	resp, err := http.Post(s.control+path, "application/json", bytes.NewReader(b))
	if err != nil {
		s.t.Fatalf("test SMSC %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		s.t.Fatalf("test SMSC %s: %d %s", path, resp.StatusCode, msg)
	}
}

func (s *SMSC) get(path string, v any) {
	s.t.Helper()
	resp, err := http.Get(s.control + path)
	if err != nil {
		s.t.Fatalf("test SMSC %s: %v", path, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		s.t.Fatalf("test SMSC %s: %v", path, err)
	}
}
