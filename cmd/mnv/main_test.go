package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/cmd/internal/devstate"
	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/services/platform/process"
)

// freeAddr is a loopback address nothing listens on (the port was free a moment ago).
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestRunReleasesEverything runs the all-in-one as make run does, on its own ports and
// database, and checks that whatever ends it (a later app that cannot start, or the end of its
// context) leaves no port bound and no database connection open: an app that failed to start
// used to leave the ones started before it listening, with their pools open.
func TestRunReleasesEverything(t *testing.T) {
	tests := []struct {
		name string
		// taken is the app whose port something else holds; "" for none.
		taken string
		env   map[string]string
		// wantErr is part of run's error (with a taken port, its address is); "" for a clean
		// run, stopped once the gateway serves.
		wantErr string
	}{
		{name: "the gateway's port is taken", taken: "gateway"},
		{name: "connect's port is taken", taken: "connect"},
		{name: "the demo site's port is taken", taken: "demo"},
		{name: "verification fails to build", env: map[string]string{"MNV_OPERATORS_FILE": "/nonexistent/operators.yaml"}, wantErr: "verification: MNV_OPERATORS_FILE"},
		{name: "stopped after a clean start"},
		// The registry make run writes for the sandbox (the sandbox-camara operator with its
		// camara and swap blocks) loads: verification builds its NETWORK_API and swap clients.
		{name: "the sandbox's registry loads", env: map[string]string{"MNV_SANDBOX": "true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := pgtest.NewDatabase(t)
			addrs := map[string]string{}
			for _, app := range []string{"accounts", "verification", "connect", "gateway", "demo", "camara"} {
				addrs[app] = freeAddr(t)
			}
			env := map[string]string{
				"DATABASE_URL":                 db,
				"MNV_ACCOUNTS_GRPC_ADDR":       addrs["accounts"],
				"MNV_VERIFICATION_GRPC_ADDR":   addrs["verification"],
				"MNV_CONNECT_GRPC_ADDR":        addrs["connect"],
				"MNV_HTTP_ADDR":                addrs["gateway"],
				"MNV_DEMO_ADDR":                addrs["demo"],
				"MNV_VERIFICATION_CAMARA_ADDR": addrs["camara"],
				"MNV_SHUTDOWN_TIMEOUT":         "5s",
				"MNV_REDIS_URL":                "",
				"MNV_OPERATORS_FILE":           "",
				// devSecrets sets these; t.Setenv puts back what was there.
				"MNV_PEPPER_FILE": "", "MNV_DATA_KEYS_FILE": "", "MNV_ADMIN_TOKEN_FILE": "", "MNV_NUMBER_HASH_KEY_FILE": "",
				"MNV_INTERNAL_CALLERS": "", "MNV_SANDBOX": "",
			}
			for k, v := range tt.env {
				env[k] = v
			}
			for k, v := range env {
				t.Setenv(k, v)
			}
			if tt.taken != "" {
				tt.wantErr = "listen on " + addrs[tt.taken]
				lis, err := net.Listen("tcp", addrs[tt.taken])
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = lis.Close() })
			}
			state := filepath.Join(t.TempDir(), "state")
			tokens, err := devSecrets(state)
			if err != nil {
				t.Fatal(err)
			}

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, config.FromOS(), zaptest.NewLogger(t), prometheus.NewRegistry(), state, tokens)
			}()
			if tt.wantErr == "" {
				waitServing(t, "http://"+addrs["gateway"]+"/healthz", done)
				t.Setenv(devstate.StateDirVar, state)
				waitRecorded(t, devstate.Addrs{AccountsGRPC: addrs["accounts"], VerificationGRPC: addrs["verification"],
					ConnectGRPC: addrs["connect"], GatewayHTTP: addrs["gateway"], DemoHTTP: addrs["demo"], CAMARAHTTP: addrs["camara"]})
				waitServing(t, "http://"+addrs["demo"]+"/", done)
				cancel()
			}
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("run did not return")
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("run = %v, want %q", err, tt.wantErr)
			}

			for app, addr := range addrs {
				if app == tt.taken {
					continue
				}
				lis, err := net.Listen("tcp", addr)
				if err != nil {
					t.Errorf("%s's port is still bound after run returned: %v", app, err)
					continue
				}
				_ = lis.Close()
			}
			pgtest.WaitNoConnections(t, db, "mnv-%")
		})
	}
}

// waitServing waits until url answers 200, failing if run ends first.
func waitServing(t *testing.T, url string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("run ended before serving: %v", err)
		default:
		}
		if resp, err := http.Get(url); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not answer 200 within 30s", url)
}

// waitRecorded waits until the state folder records want, the addresses mnvctl will dial.
func waitRecorded(t *testing.T, want devstate.Addrs) {
	t.Helper()
	var got devstate.Addrs
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got, err = devstate.FindAddrs(); err == nil && got == want {
			return
		}
	}
	t.Fatalf("recorded addresses %+v, %v; want %+v", got, err, want)
}

// recorder is an app that records when its Run ends, failing at once with fail.
type recorder struct {
	name    string
	fail    error
	stopped chan<- string
}

func (r *recorder) Listen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
func (r *recorder) Close() error                  { return nil }

func (r *recorder) Run(ctx context.Context, lis net.Listener) error {
	defer func() { r.stopped <- r.name }()
	defer lis.Close()
	if r.fail != nil {
		return r.fail
	}
	<-ctx.Done()
	// Slow enough that stopping the next app at the same time would show in the order.
	time.Sleep(20 * time.Millisecond)
	return nil
}

// TestServeStopsLastStartedFirst checks the order of the stop, whatever ends the run: the
// gateway first, accounts, which every other app calls, last.
func TestServeStopsLastStartedFirst(t *testing.T) {
	failure := errors.New("serve failed")
	tests := []struct {
		name    string
		failing string
		want    string
	}{
		{name: "context ends", want: "gateway connect verification accounts"},
		{name: "an app fails", failing: "verification", want: "verification gateway connect accounts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			names := []string{"accounts", "verification", "connect", "gateway"}
			stopped := make(chan string, len(names))
			var parts []part
			for _, n := range names {
				r := &recorder{name: n, stopped: stopped}
				if n == tt.failing {
					r.fail = failure
				}
				parts = append(parts, part{n, func(context.Context) (process.Service, error) { return r, nil }})
			}
			apps, err := start(context.Background(), parts)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- serve(ctx, apps, time.Second, func(context.Context) {}) }()
			if tt.failing == "" {
				cancel()
			}
			err = <-done
			if tt.failing == "" && err != nil || tt.failing != "" && !errors.Is(err, failure) {
				t.Fatalf("serve = %v, want the failure of %q", err, tt.failing)
			}
			var order []string
			for range names {
				order = append(order, <-stopped)
			}
			if got := strings.Join(order, " "); got != tt.want {
				t.Errorf("stopped %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFreeIfTaken(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freeAddr := free.Addr().String()
	free.Close()

	for _, c := range []struct {
		name, addr string
		moved      bool
	}{
		{"a free address is kept", freeAddr, false},
		{"a taken address moves to a free port", held.Addr().String(), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, moved, err := freeIfTaken(c.addr)
			if err != nil || moved != c.moved {
				t.Fatalf("freeIfTaken(%s) = %s, %v, %v; want moved %v", c.addr, got, moved, err, c.moved)
			}
			if !moved && got != c.addr {
				t.Fatalf("kept address changed: %s", got)
			}
			l, err := net.Listen("tcp", got)
			if err != nil {
				t.Fatalf("the address given cannot be listened on: %v", err)
			}
			l.Close()
		})
	}
	if _, _, err := freeIfTaken("not an address"); err == nil {
		t.Fatal("a malformed address passed")
	}
}

// TestDemoOrigins: the demo client allows the demo site's real port, under both loopback names,
// wherever it listens.
func TestDemoOrigins(t *testing.T) {
	for _, tt := range []struct {
		addr string
		want []string
	}{
		{"127.0.0.1:8081", []string{"http://127.0.0.1:8081", "http://localhost:8081"}},
		{"127.0.0.1:40123", []string{"http://127.0.0.1:40123", "http://localhost:40123"}},
		{"0.0.0.0:9000", []string{"http://127.0.0.1:9000", "http://localhost:9000"}},
		{"[::]:9001", []string{"http://127.0.0.1:9001", "http://localhost:9001"}},
	} {
		addr, err := net.ResolveTCPAddr("tcp", tt.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := demoOrigins(addr); !slices.Equal(got, tt.want) {
			t.Errorf("demoOrigins(%s) = %v, want %v", tt.addr, got, tt.want)
		}
		if !sameOrigins([]string{tt.want[1], tt.want[0]}, tt.want) || sameOrigins(tt.want[:1], tt.want) {
			t.Errorf("sameOrigins is not an unordered comparison")
		}
	}
}
