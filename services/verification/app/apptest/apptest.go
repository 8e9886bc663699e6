// Package apptest starts a real verification service for tests of this and other modules, on a
// fresh database, in front of a running accounts service.
package apptest

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/platform/auth/authtest"
	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/services/verification/app"
)

// Test secrets. DataKeys may differ from accounts'; the number hash key must match Connect's.
const (
	DataKeys      = "v1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	NumberHashKey = "apptest-number-hash-key-0123456789abcdef"
)

// Server is a running verification service.
type Server struct {
	Addr        string
	DatabaseURL string
	// Metrics is the registry the service registered its metrics on.
	Metrics *prometheus.Registry
}

// Start runs a verification service against the accounts service at accountsAddr (which must
// accept internalToken, the token verification presents) until the test ends. It accepts the
// callers of authtest, and the sandbox operator is on. edit may change the configuration.
func Start(t testing.TB, accountsAddr, internalToken string, edit func(*app.Config)) *Server {
	t.Helper()
	cfg := app.DefaultConfig()
	cfg.GRPCAddr = "127.0.0.1:0"
	cfg.DatabaseURL = pgtest.NewDatabase(t)
	cfg.AccountsAddr, cfg.InternalToken = accountsAddr, internalToken
	cfg.InternalCallers = authtest.Callers()
	cfg.Sandbox = true
	cfg.DataKeys, cfg.NumberHashKey = DataKeys, NumberHashKey
	cfg.ConnectAddr = "" // no Connect in these tests: keep the outbox, relay nothing
	cfg.ShutdownTimeout = 5 * time.Second
	// Many test packages share one PostgreSQL; a small pool keeps them within its connections.
	cfg.DBMaxConns = 8
	if edit != nil {
		edit(&cfg)
	}
	log := zaptest.NewLogger(t)
	if _, bench := t.(*testing.B); bench {
		log = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	}
	ctx, cancel := context.WithCancel(context.Background())
	reg := prometheus.NewRegistry()
	a, err := app.New(ctx, cfg, log, reg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	lis, err := a.Listen()
	if err != nil {
		_ = a.Close()
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("verification stopped with %v", err)
		}
	})
	return &Server{Addr: lis.Addr().String(), DatabaseURL: cfg.DatabaseURL, Metrics: reg}
}
