package process

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mnvhq/mnv/services/platform/config"
)

// service records what serve does with it. Listen opens a real loopback listener unless
// listenErr is set.
type service struct {
	listenErr error
	ran       net.Listener
	closed    int
}

func (s *service) Listen() (net.Listener, error) {
	if s.listenErr != nil {
		return nil, s.listenErr
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

func (s *service) Run(_ context.Context, lis net.Listener) error {
	s.ran = lis
	return lis.Close()
}

func (s *service) Close() error { s.closed++; return nil }

func TestServe(t *testing.T) {
	errBuild, errListen := errors.New("bad config"), errors.New("address in use")
	tests := []struct {
		name        string
		command     string
		hasMigrate  bool
		buildErr    error
		listenErr   error
		wantErr     string
		wantMigrate bool
		wantRun     bool
		wantClosed  int
	}{
		{name: "serves", command: "", hasMigrate: true, wantRun: true},
		{name: "serves without a migrate command", command: "", wantRun: true},
		{name: "migrates", command: "migrate", hasMigrate: true, wantMigrate: true},
		{name: "unknown command", command: "migrat", hasMigrate: true, wantErr: `unknown command "migrat": run with no argument to serve, or with migrate`},
		{name: "migrate without a migrate command", command: "migrate", wantErr: `unknown command "migrate": run with no argument to serve`},
		{name: "build fails", buildErr: errBuild, wantErr: "bad config"},
		{name: "listen fails: the built service is closed", listenErr: errListen, wantErr: "address in use", wantClosed: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &service{listenErr: tt.listenErr}
			built, migrated := false, false
			build := func(context.Context, *config.Env, *zap.Logger, *prometheus.Registry) (Service, error) {
				built = true
				if tt.buildErr != nil {
					return nil, tt.buildErr
				}
				return svc, nil
			}
			var migrate func(context.Context, *config.Env, *zap.Logger) error
			if tt.hasMigrate {
				migrate = func(context.Context, *config.Env, *zap.Logger) error { migrated = true; return nil }
			}
			err := serve(build, tt.command, migrate)(context.Background(), config.New(func(string) (string, bool) { return "", false }), zap.NewNop(), prometheus.NewRegistry())
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if migrated != tt.wantMigrate {
				t.Errorf("migrated = %v, want %v", migrated, tt.wantMigrate)
			}
			if wantBuilt := tt.command == ""; built != wantBuilt {
				t.Errorf("built = %v, want %v", built, wantBuilt)
			}
			if (svc.ran != nil) != tt.wantRun {
				t.Errorf("ran = %v, want %v", svc.ran != nil, tt.wantRun)
			}
			if svc.closed != tt.wantClosed {
				t.Errorf("closed %d times, want %d", svc.closed, tt.wantClosed)
			}
		})
	}
}

func TestBuild(t *testing.T) {
	errLoad, errNew := errors.New("bad config"), errors.New("no database")
	tests := []struct {
		name            string
		loadErr, newErr error
		wantErr         error
		wantConstructed bool
	}{
		{name: "builds", wantConstructed: true},
		{name: "configuration fails", loadErr: errLoad, wantErr: errLoad},
		{name: "construction fails", newErr: errNew, wantErr: errNew, wantConstructed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			constructed := false
			load := func(*config.Env) (string, error) { return "cfg", tt.loadErr }
			construct := func(_ context.Context, cfg string, _ *zap.Logger, _ prometheus.Registerer) (*service, error) {
				constructed = true
				if cfg != "cfg" {
					t.Errorf("construct got configuration %q, want what load returned", cfg)
				}
				if tt.newErr != nil {
					return nil, tt.newErr
				}
				return &service{}, nil
			}
			svc, err := Build(load, construct)(context.Background(), config.FromMap(nil), zap.NewNop(), prometheus.NewRegistry())
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			// A failed New's nil *service must come back as a nil Service, not a non-nil
			// interface holding nil.
			if (svc != nil) != (tt.wantErr == nil) {
				t.Errorf("service = %#v, want one only when the build succeeds", svc)
			}
			if constructed != tt.wantConstructed {
				t.Errorf("constructed = %v, want %v", constructed, tt.wantConstructed)
			}
		})
	}
}

// TestServeAsideNamesItsVariable: when the metrics or debug address is taken, the log says
// which variable to change, and the service goes on; when it is free, it serves.
func TestServeAsideNamesItsVariable(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	core, logs := observer.New(zap.ErrorLevel)
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })

	serveAside(zap.New(core), "metrics server", "MNV_METRICS_ADDR", taken.Addr().String(), ok)()
	want := "listen on " + taken.Addr().String() + " (MNV_METRICS_ADDR): "
	if entries := logs.All(); len(entries) != 1 || !strings.Contains(fmt.Sprint(entries[0].ContextMap()["error"]), want) ||
		!strings.Contains(fmt.Sprint(entries[0].ContextMap()["error"]), "address already in use") {
		t.Fatalf("logged %v, want an error containing %q", entries, want)
	}

	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	free.Close()
	stop := serveAside(zap.New(core), "debug server", "MNV_DEBUG_ADDR", addr, ok)
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	stop()
	if resp.StatusCode != http.StatusTeapot {
		t.Errorf("status %d, want the handler's", resp.StatusCode)
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Error("still listening after stop")
	}
}
