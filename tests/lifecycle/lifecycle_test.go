// Package lifecycle_test checks that every app releases what it opened: when its New fails
// halfway, and when its Run ends. Each app is built as its binary builds it, on a real database.
package lifecycle_test

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	gateway "github.com/mnvhq/mnv/gateway/app"
	accounts "github.com/mnvhq/mnv/services/accounts/app"
	accountstest "github.com/mnvhq/mnv/services/accounts/app/apptest"
	connect "github.com/mnvhq/mnv/services/connect/app"
	connecttest "github.com/mnvhq/mnv/services/connect/app/apptest"
	"github.com/mnvhq/mnv/services/platform/auth/authtest"
	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/services/platform/process"
	verification "github.com/mnvhq/mnv/services/verification/app"
	verificationtest "github.com/mnvhq/mnv/services/verification/app/apptest"
)

// app builds one app listening on addr, on the database at db ("" for the gateway, which has
// none), registering its metrics on reg. addrVar is the variable that sets addr.
type app struct {
	name    string
	addrVar string
	build   func(t *testing.T, db, addr string, reg prometheus.Registerer) (process.Service, error)
}

// anyPort lets the system choose the port.
const anyPort = "127.0.0.1:0"

// service keeps a failed New's nil a nil interface.
func service[S process.Service](s S, err error) (process.Service, error) {
	if err != nil {
		return nil, err
	}
	return s, nil
}

// unreachable is an address nothing listens on: the apps dial lazily, so New succeeds.
const unreachable = "127.0.0.1:1"

var apps = []app{
	{"accounts", "MNV_ACCOUNTS_GRPC_ADDR", func(t *testing.T, db, addr string, reg prometheus.Registerer) (process.Service, error) {
		cfg := accounts.DefaultConfig()
		cfg.GRPCAddr, cfg.DatabaseURL = addr, db
		cfg.Pepper, cfg.DataKeys, cfg.AdminToken = accountstest.Pepper, accountstest.DataKeys, accountstest.AdminToken
		cfg.InternalCallers = authtest.Callers()
		return service(accounts.New(context.Background(), cfg, zaptest.NewLogger(t), reg))
	}},
	{"verification", "MNV_VERIFICATION_GRPC_ADDR", func(t *testing.T, db, addr string, reg prometheus.Registerer) (process.Service, error) {
		cfg := verification.DefaultConfig()
		cfg.GRPCAddr, cfg.DatabaseURL = addr, db
		cfg.AccountsAddr, cfg.InternalToken = unreachable, authtest.VerificationToken
		cfg.DataKeys, cfg.NumberHashKey = verificationtest.DataKeys, verificationtest.NumberHashKey
		cfg.InternalCallers = authtest.Callers()
		cfg.ConnectAddr = unreachable // the connection to Connect is opened last: one more to close
		return service(verification.New(context.Background(), cfg, zaptest.NewLogger(t), reg))
	}},
	{"connect", "MNV_CONNECT_GRPC_ADDR", func(t *testing.T, db, addr string, reg prometheus.Registerer) (process.Service, error) {
		cfg := connect.DefaultConfig()
		cfg.GRPCAddr, cfg.DatabaseURL = addr, db
		cfg.AccountsAddr, cfg.InternalToken = unreachable, authtest.ConnectToken
		cfg.DataKeys, cfg.NumberHashKey = connecttest.DataKeys, connecttest.NumberHashKey
		cfg.InternalCallers = authtest.Callers()
		return service(connect.New(context.Background(), cfg, zaptest.NewLogger(t), reg))
	}},
	{"gateway", "MNV_HTTP_ADDR", func(t *testing.T, _, addr string, reg prometheus.Registerer) (process.Service, error) {
		cfg := gateway.DefaultConfig()
		cfg.HTTPAddr = addr
		cfg.AccountsAddr, cfg.VerificationAddr, cfg.ConnectAddr = unreachable, unreachable, unreachable
		cfg.InternalToken = authtest.GatewayToken
		return service(gateway.New(context.Background(), cfg, zaptest.NewLogger(t), reg, prometheus.NewRegistry()))
	}},
}

// released fails t unless what the app opened is gone: its pool's connections (the services),
// and the goroutines it started, back to what ran before it was built (the gateway's health
// checks and gRPC connections; the services' too, though their pools are the clearer sign).
func released(t *testing.T, a app, db string, goroutines int) {
	t.Helper()
	if db != "" {
		pgtest.WaitNoConnections(t, db, "mnv-"+a.name)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutines {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before the app was built:\n%s", runtime.NumGoroutine(), goroutines, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFailedNewReleasesWhatItOpened builds each app twice on one registry: the second New fails
// at its metrics, after it opened its pool and connections, and must close them itself.
func TestFailedNewReleasesWhatItOpened(t *testing.T) {
	for _, a := range apps {
		t.Run(a.name, func(t *testing.T) {
			db := ""
			if a.name != "gateway" {
				db = pgtest.NewDatabase(t)
			}
			goroutines := runtime.NumGoroutine()
			reg := prometheus.NewRegistry()
			first, err := a.build(t, db, anyPort, reg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.build(t, db, anyPort, reg); err == nil || !strings.Contains(err.Error(), "register metrics") {
				t.Fatalf("second New = %v, want a metrics registration error", err)
			}
			// The first app's pool is still open, so count only once it is closed too.
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			released(t, a, db, goroutines)
		})
	}
}

// TestRunReleasesWhatNewOpened runs each app until its context ends; Run must then have closed
// what New opened, and a Close after it has nothing left to do.
func TestRunReleasesWhatNewOpened(t *testing.T) {
	for _, a := range apps {
		t.Run(a.name, func(t *testing.T) {
			db := ""
			if a.name != "gateway" {
				db = pgtest.NewDatabase(t)
			}
			goroutines := runtime.NumGoroutine()
			svc, err := a.build(t, db, anyPort, prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			lis, err := svc.Listen()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- svc.Run(ctx, lis) }()
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			// Asked of the listener itself, not by dialling its port: another test package may
			// listen on the port the moment it is free.
			if tl, ok := lis.(*net.TCPListener); ok {
				_ = tl.SetDeadline(time.Now().Add(200 * time.Millisecond))
			}
			if _, err := lis.Accept(); !errors.Is(err, net.ErrClosed) {
				t.Errorf("the listener is still open after Run returned (Accept: %v)", err)
			}
			released(t, a, db, goroutines)
			if err := svc.Close(); err != nil {
				t.Errorf("Close after Run = %v, want nil", err)
			}
		})
	}
}

// TestBindErrorNamesTheVariable: when an app's address is taken, its Listen error says which
// variable sets it, so whoever runs it knows what to change.
func TestBindErrorNamesTheVariable(t *testing.T) {
	taken, err := net.Listen("tcp", anyPort)
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	for _, a := range apps {
		t.Run(a.addrVar, func(t *testing.T) {
			db := ""
			if a.name != "gateway" {
				db = pgtest.NewDatabase(t)
			}
			svc, err := a.build(t, db, addr, prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := svc.Close(); err != nil {
					t.Error(err)
				}
			}()
			lis, err := svc.Listen()
			if err == nil {
				lis.Close()
				t.Fatalf("Listen on a taken address succeeded")
			}
			want := "listen on " + addr + " (" + a.addrVar + "): "
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "address already in use") {
				t.Errorf("Listen = %q, want it to contain %q and the cause", err, want)
			}
		})
	}
}
