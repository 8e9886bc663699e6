// Package harness starts the real mnv binaries as separate processes, for end-to-end tests and
// benchmarks: each service and the gateway on free loopback ports, against a fresh database.
package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/findup"
	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/services/platform/tenancy"
	"github.com/mnvhq/mnv/services/platform/tlstest"
)

// Binaries the suite runs.
var binaries = []string{"accounts", "verification", "connect", "gateway", "mnvctl"}

// NumberHashKey is the suite's key of number hashes.
const NumberHashKey = "e2e-number-hash-key-0123456789abcdefghij"

// Suite is a running mnv.
type Suite struct {
	GatewayURL string
	// ConsoleURL is the gateway by the name the console's passkeys belong to (localhost):
	// MNV_CONSOLE_ORIGIN, where a browser opens the console.
	ConsoleURL       string
	AccountsAddr     string
	VerificationAddr string
	ConnectAddr      string
	// CAMARAAddr is verification's CAMARA facade listener, which the gateway proxies to.
	CAMARAAddr string
	// DatabaseURL is the one database of every service; "" with Options.ServerPerService.
	DatabaseURL string
	// Databases is the URL of each service's database, by name ("accounts", "verification",
	// "connect"): DatabaseURL for all three, or each its own server's (a ProcessEnv that sets
	// MNV_<SERVICE>_DATABASE_URL itself is not reflected here).
	Databases map[string]string
	// Tokens are the internal tokens each process presents, by caller (auth.CallerGateway, …):
	// one per caller, as in a deployment.
	Tokens     map[string]string
	AdminToken string
	// CAFile is the CA of the services' certificates when the suite runs with TLS, else "".
	CAFile string
	BinDir string
	LogDir string

	procs      []*proc
	processEnv map[string][]string
	// drop removes the database, or stops the servers.
	drop func()
}

// Options adjust a suite.
type Options struct {
	// Env is added to every service's environment (e.g. MNV_LOG_LEVEL).
	Env []string
	// ProcessEnv is added to one process's environment, by name ("verification": MNV_DEBUG_ADDR=…).
	ProcessEnv map[string][]string
	// TLS runs the gRPC between the processes over TLS, with certificates of a CA made for the
	// suite; the gateway still serves plain HTTP.
	TLS bool
	// ServerPerService gives accounts, verification and connect a private PostgreSQL server
	// each (StartServer), found through their own variables (MNV_ACCOUNTS_DATABASE_URL, …) with
	// no DATABASE_URL at all, as a deployment past one server runs
	// (docs/operations.md#past-one-postgresql). The suite stops and removes them.
	ServerPerService bool
}

// services are the processes with a database, in the order the suite starts them.
var services = []string{"accounts", "verification", "connect"}

// ErrShort is BinDir's and Start's error under -short, the tier that builds no binary and has
// no PostgreSQL.
var ErrShort = errors.New("harness: no suite under -short")

// ExitIfShort ends a test binary whose every test needs the suite its TestMain starts, when it
// runs with -short: it prints why and exits 0 before anything is built or started. TestMain
// calls it first; it parses the flags, which testing.Short needs and m.Run would parse later.
func ExitIfShort(pkg string) {
	flag.Parse()
	if testing.Short() {
		fmt.Printf("%s: every test needs the running suite (PostgreSQL, the built binaries); none run under -short\n", pkg)
		os.Exit(0)
	}
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// BinDir returns a folder with freshly built binaries: $MNV_BIN_DIR when set (make test builds
// into bin/ first), else a temporary folder built once per process.
func BinDir() (string, error) {
	if pgtest.Short() {
		return "", ErrShort
	}
	if d := os.Getenv("MNV_BIN_DIR"); d != "" {
		return d, nil
	}
	buildOnce.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		if buildDir, err = os.MkdirTemp("", "mnv-e2e-bin-"); err != nil {
			buildErr = err
			return
		}
		pkgs := map[string]string{
			"accounts": "./services/accounts/cmd/accounts", "verification": "./services/verification/cmd/verification",
			"connect": "./services/connect/cmd/connect",
			"gateway": "./gateway/cmd/gateway", "mnvctl": "./cmd/mnvctl",
		}
		for _, b := range binaries {
			cmd := exec.Command("go", "build", "-o", filepath.Join(buildDir, b), pkgs[b])
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %w\n%s", b, err, out)
				return
			}
		}
	})
	return buildDir, buildErr
}

// RepoRoot returns the checkout: the folder of the go.work in the working directory or the
// nearest directory above it.
func RepoRoot() (string, error) {
	p, err := findup.Path("go.work")
	if err != nil {
		return "", fmt.Errorf("go.work: %w", err)
	}
	return filepath.Dir(p), nil
}

// FreeAddr returns a loopback address with a port that was free a moment ago.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Start runs accounts and the gateway against a fresh database and waits until the gateway is
// ready. On failure it stops whatever it started and drops the database; it removes the logs
// too, unless the suite did not become ready (the error then names them).
func Start(ctx context.Context, opts Options) (_ *Suite, err error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dbURL, byService, drop, err := databases(ctx, opts.ServerPerService)
	if err != nil {
		return nil, err
	}
	s := &Suite{
		DatabaseURL: dbURL, Databases: byService, BinDir: bin, drop: drop, processEnv: opts.ProcessEnv,
		Tokens: map[string]string{
			auth.CallerGateway:      "e2e-gateway-token-0123456789abcdefghij",
			auth.CallerVerification: "e2e-verification-token-0123456789abcdef",
			auth.CallerConnect:      "e2e-connect-token-0123456789abcdefghij",
			auth.CallerAccounts:     "e2e-accounts-token-0123456789abcdefghi",
		},
		AdminToken: "e2e-admin-token-0123456789abcdefghijklm",
	}
	keepLogs := false
	defer func() {
		if err != nil {
			s.Stop() // the processes started so far, then the database
			if s.LogDir != "" && !keepLogs {
				os.RemoveAll(s.LogDir)
			}
		}
	}()
	if s.LogDir, err = os.MkdirTemp("", "mnv-e2e-logs-"); err != nil {
		return nil, err
	}
	var addrs [5]string
	for i := range addrs {
		if addrs[i], err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	accountsAddr, verificationAddr, connectAddr, httpAddr, camaraAddr := addrs[0], addrs[1], addrs[2], addrs[3], addrs[4]
	s.AccountsAddr, s.VerificationAddr, s.ConnectAddr, s.GatewayURL = accountsAddr, verificationAddr, connectAddr, "http://"+httpAddr
	s.CAMARAAddr = camaraAddr
	// The console's passkeys belong to a host name, never an IP address: localhost, on the
	// gateway's port, as make run does.
	_, httpPort, _ := net.SplitHostPort(httpAddr)
	s.ConsoleURL = "http://localhost:" + httpPort
	var callers auth.Callers
	for name, token := range s.Tokens {
		callers = callers.With(name, token)
	}
	common := append([]string{
		"PATH=" + os.Getenv("PATH"),
		"MNV_INTERNAL_CALLERS=" + callers.String(),
		// The tests capture through the sandbox operator; a test may switch it off again.
		"MNV_SANDBOX=true",
		"MNV_LOG_LEVEL=info",
		"MNV_SHUTDOWN_TIMEOUT=10s",
		// Suites run beside other test packages on one PostgreSQL (max_connections is often
		// 100): a pool of 12 per service is plenty for the suites' loads, and keeps a burst
		// (whose connections the pools keep) from taking the server's last connections.
		"MNV_ACCOUNTS_DB_MAX_CONNS=12", "MNV_VERIFICATION_DB_MAX_CONNS=12", "MNV_CONNECT_DB_MAX_CONNS=12",
	}, opts.Env...)
	// The hash-partitioned run (make test-partitioned) reaches the services through their
	// environment: each rebuilds its tenant tables partitioned after migrating.
	if n := os.Getenv(tenancy.PartitionsVar); n != "" {
		common = append(common, tenancy.PartitionsVar+"="+n)
	}
	// tlsEnv is each process's TLS configuration: its server certificate, and the CA it trusts.
	tlsEnv := map[string][]string{}
	if opts.TLS {
		if tlsEnv, err = s.certificates(); err != nil {
			return nil, err
		}
	}
	own := func(name string, env ...string) []string {
		out := append(append(append([]string{}, common...), tlsEnv[name]...), env...)
		if tok, ok := s.Tokens[name]; ok {
			out = append(out, "MNV_INTERNAL_TOKEN="+tok)
		}
		if db, ok := s.Databases[name]; ok {
			if opts.ServerPerService {
				out = append(out, "MNV_"+strings.ToUpper(name)+"_DATABASE_URL="+db)
			} else {
				out = append(out, "DATABASE_URL="+db)
			}
		}
		return out
	}
	if err = s.spawn("accounts", own("accounts",
		"MNV_ACCOUNTS_GRPC_ADDR="+accountsAddr,
		"MNV_PEPPER=e2e-pepper-e2e-pepper-e2e-pepper-0123456",
		"MNV_DATA_KEYS=e2e:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
		"MNV_ADMIN_TOKEN="+s.AdminToken,
		"MNV_CONNECT_ADDR="+connectAddr,
		"MNV_CONSOLE_ORIGIN="+s.ConsoleURL,
	)); err != nil {
		return nil, err
	}
	if err = s.spawn("verification", own("verification",
		"MNV_VERIFICATION_GRPC_ADDR="+verificationAddr,
		"MNV_VERIFICATION_CAMARA_ADDR="+camaraAddr,
		"MNV_CAMARA_ISSUER=http://"+httpAddr,
		"MNV_ACCOUNTS_ADDR="+accountsAddr,
		// NETWORK_API operators send the device back to the gateway.
		"MNV_PUBLIC_URL="+s.GatewayURL,
		"MNV_DATA_KEYS=e2ev:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
		"MNV_NUMBER_HASH_KEY="+NumberHashKey,
		"MNV_CONNECT_ADDR="+connectAddr,
	)); err != nil {
		return nil, err
	}
	if err = s.spawn("connect", own("connect",
		"MNV_CONNECT_GRPC_ADDR="+connectAddr,
		"MNV_ACCOUNTS_ADDR="+accountsAddr,
		"MNV_DATA_KEYS=e2ec:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
		"MNV_NUMBER_HASH_KEY="+NumberHashKey,
		// Tests deliver to a local receiver: plain http on loopback, and retries within seconds.
		"MNV_WEBHOOK_ALLOW_HTTP=true", "MNV_WEBHOOK_ALLOWED_NETS=127.0.0.1/32", "MNV_DELIVERY_BACKOFF=200ms",
	)); err != nil {
		return nil, err
	}
	if err = s.spawn("gateway", own("gateway",
		"MNV_HTTP_ADDR="+httpAddr,
		"MNV_ACCOUNTS_ADDR="+accountsAddr,
		"MNV_VERIFICATION_ADDR="+verificationAddr,
		"MNV_CAMARA_ADDR="+camaraAddr,
		"MNV_CONNECT_ADDR="+connectAddr,
	)); err != nil {
		return nil, err
	}
	if err = s.WaitReady(ctx, 60*time.Second); err != nil {
		keepLogs = true
		return nil, err
	}
	if err = s.checkPartitioned(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// checkPartitioned makes sure a hash-partitioned run is one: with tenancy.PartitionsVar set,
// every service's schema must have tables partitioned by client_id once the suite is ready, or
// the run would pass on plain tables and prove nothing.
func (s *Suite) checkPartitioned(ctx context.Context) error {
	if os.Getenv(tenancy.PartitionsVar) == "" {
		return nil
	}
	for _, name := range services {
		conn, err := pgx.Connect(ctx, s.Databases[name])
		if err != nil {
			return err
		}
		var n int
		err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid
			WHERE c.relnamespace = $1::regnamespace AND p.partstrat = 'h'`, name).Scan(&n)
		conn.Close(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if n == 0 {
			return fmt.Errorf("%s is set but %s's schema has no hash-partitioned table", tenancy.PartitionsVar, name)
		}
	}
	return nil
}

// ReuseDatabaseVar names a database the suites use as it is, instead of a fresh one each: the
// Citus run, whose database must exist on every worker and be distributed before use.
const ReuseDatabaseVar = "MNV_E2E_DATABASE_URL"

// databases makes the suite's databases: one fresh database on the tests' server that every
// service shares (dbURL), or a private server per service (dbURL ""). drop removes them.
func databases(ctx context.Context, serverPerService bool) (dbURL string, byService map[string]string, drop func(), err error) {
	byService = map[string]string{}
	if given := os.Getenv(ReuseDatabaseVar); given != "" && !serverPerService {
		// A database made beforehand and kept (deploy/citus/citus.sh: a database every Citus
		// worker has, its tables distributed), shared by every suite of the run.
		for _, name := range services {
			byService[name] = given
		}
		return given, byService, func() {}, nil
	}
	if !serverPerService {
		if dbURL, drop, err = pgtest.CreateDatabase(ctx); err != nil {
			return "", nil, nil, err
		}
		for _, name := range services {
			byService[name] = dbURL
		}
		return dbURL, byService, drop, nil
	}
	servers, err := StartServers(ctx, len(services))
	if err != nil {
		return "", nil, nil, err
	}
	for i, name := range services {
		byService[name] = servers[i].URL
	}
	return "", byService, func() {
		for _, srv := range servers {
			srv.Stop()
		}
	}, nil
}

// certificates makes a CA for the suite and a certificate for each gRPC server (on loopback),
// in the log folder, and returns each process's TLS variables.
func (s *Suite) certificates() (map[string][]string, error) {
	ca, err := tlstest.NewCA("mnv e2e CA")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(s.LogDir, "tls-")
	if err != nil {
		return nil, err
	}
	env := map[string][]string{}
	for _, name := range []string{"accounts", "verification", "connect"} {
		f, err := ca.Write(dir, name, "127.0.0.1", "localhost")
		if err != nil {
			return nil, err
		}
		env[name] = []string{"MNV_GRPC_TLS_CERT=" + f.Cert, "MNV_GRPC_TLS_KEY=" + f.Key}
		s.CAFile = f.CA
	}
	for _, name := range []string{"accounts", "verification", "connect", "gateway"} {
		env[name] = append(env[name], "MNV_GRPC_TLS_CA="+s.CAFile)
	}
	return env, nil
}

// proc is one process of the suite, kept with its environment so it can be started again.
type proc struct {
	name string
	env  []string
	cmd  *exec.Cmd
	done chan struct{}
}

func (s *Suite) spawn(name string, env []string) error {
	p := &proc{name: name, env: append(env, s.processEnv[name]...)}
	// Only a started process joins the suite: Stop after a failed start must not signal it.
	if err := s.start(p); err != nil {
		return err
	}
	s.procs = append(s.procs, p)
	return nil
}

func (s *Suite) start(p *proc) error {
	logf, err := os.OpenFile(filepath.Join(s.LogDir, p.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(s.BinDir, p.name))
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
	return nil
}

func (s *Suite) proc(name string) (*proc, error) {
	for _, p := range s.procs {
		if p.name == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no process %q in the suite", name)
}

// Kill stops one process of the suite with sig (SIGKILL for a crash, SIGTERM for a graceful
// stop) and waits until it is gone.
func (s *Suite) Kill(name string, sig syscall.Signal) error {
	p, err := s.proc(name)
	if err != nil {
		return err
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return nil
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop on %v", name, sig)
	}
}

// Restart starts a stopped process again, with the environment it had plus env (later values
// win: a changed configuration).
func (s *Suite) Restart(name string, env ...string) error {
	p, err := s.proc(name)
	if err != nil {
		return err
	}
	p.env = append(p.env, env...)
	return s.start(p)
}

// WaitReady polls the gateway's /readyz until it answers 200 and lists every backend as
// SERVING: the gateway is ready on its own, and says how its backends are.
func (s *Suite) WaitReady(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		if states, err := s.Backends(ctx); err == nil && len(states) > 0 {
			serving := true
			for _, st := range states {
				serving = serving && st == "SERVING"
			}
			if serving {
				return nil
			}
		}
		for _, p := range s.procs {
			select {
			case <-p.done:
				return fmt.Errorf("%s exited; logs in %s", p.name, s.LogDir)
			default:
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("suite not ready after %s; logs in %s", within, s.LogDir)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Backends reads the backends' states from the gateway's /readyz, which must answer 200.
func (s *Suite) Backends(ctx context.Context) (map[string]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.GatewayURL+"/readyz", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var env struct {
		Data struct {
			Backends map[string]string `json:"backends"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return nil, fmt.Errorf("readyz: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("readyz: %d", resp.StatusCode)
	}
	return env.Data.Backends, nil
}

// PID returns the process id of a running process of the suite ("connect").
func (s *Suite) PID(name string) (int, error) {
	p, err := s.proc(name)
	if err != nil {
		return 0, err
	}
	select {
	case <-p.done:
		return 0, fmt.Errorf("%s is not running", name)
	default:
		return p.cmd.Process.Pid, nil
	}
}

// Logs returns the output of a process of the suite ("accounts", "gateway").
func (s *Suite) Logs(name string) string {
	b, _ := os.ReadFile(filepath.Join(s.LogDir, name+".log"))
	return string(b)
}

// Stop sends SIGTERM to every process, waits for them and drops the database (or stops the
// servers).
func (s *Suite) Stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		_ = s.Kill(s.procs[i].name, syscall.SIGTERM)
	}
	s.procs = nil
	if s.drop != nil {
		s.drop()
		s.drop = nil
	}
}

// Mnvctl runs the operator CLI against the suite and returns its standard output.
func (s *Suite) Mnvctl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.BinDir, "mnvctl"), args...)
	cmd.Env = []string{"MNV_ACCOUNTS_ADDR=" + s.AccountsAddr, "MNV_ADMIN_TOKEN=" + s.AdminToken}
	if s.CAFile != "" {
		cmd.Env = append(cmd.Env, "MNV_GRPC_TLS_CA="+s.CAFile)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("mnvctl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// Client is a client created with mnvctl.
type Client struct {
	ID     string `json:"clientId"`
	Secret string `json:"clientSecret"`
	APIKey string `json:"apiKey"`
}

// CreateClient creates a client with mnvctl, as an operator would.
func (s *Suite) CreateClient(ctx context.Context, balance int64, extra ...string) (Client, error) {
	args := append([]string{"client", "create", "--name", "E2E Client", "--contact-name", "Eve Tester",
		"--contact-email", "eve@example.com", "--contact-phone", "0099887766", "--balance", fmt.Sprint(balance), "-o", "json"}, extra...)
	out, err := s.Mnvctl(ctx, args...)
	if err != nil {
		return Client{}, err
	}
	var c Client
	if err := json.Unmarshal(out, &c); err != nil {
		return Client{}, fmt.Errorf("mnvctl output %q: %w", out, err)
	}
	return c, nil
}
