// Package apptest starts a real connect service for tests of this and other modules, on a fresh
// database, in front of a running accounts service.
package apptest

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mnvhq/mnv/services/connect/app"
	"github.com/mnvhq/mnv/services/platform/auth/authtest"
	"github.com/mnvhq/mnv/services/platform/pgtest"
)

// Test secrets; the number hash key is verification's apptest key, so the two match.
const (
	DataKeys      = "c1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	NumberHashKey = "apptest-number-hash-key-0123456789abcdef"
	// AdminToken is the operator's credential connect accepts: accounts' apptest one, as one
	// operator token serves both in a deployment.
	AdminToken = "apptest-admin-token-0123456789abcdefghij"
)

// Server is a running connect service.
type Server struct {
	Addr        string
	DatabaseURL string
	// Metrics is the registry the service registered its metrics on.
	Metrics *prometheus.Registry
	// Logs is what the service logged, for tests that prove what it never logs.
	Logs *observer.ObservedLogs
}

// Start runs a connect service against the accounts service at accountsAddr (which must accept
// internalToken, the token connect presents) until the test ends. It accepts the callers of
// authtest. Deliveries may go to plain-http loopback receivers, with retries a few hundred
// milliseconds apart. edit may change the configuration.
func Start(t testing.TB, accountsAddr, internalToken string, edit func(*app.Config)) *Server {
	t.Helper()
	cfg := app.DefaultConfig()
	cfg.GRPCAddr = "127.0.0.1:0"
	cfg.DatabaseURL = pgtest.NewDatabase(t)
	cfg.AccountsAddr, cfg.InternalToken = accountsAddr, internalToken
	cfg.InternalCallers = authtest.Callers()
	cfg.DataKeys, cfg.NumberHashKey, cfg.AdminToken = DataKeys, NumberHashKey, AdminToken
	cfg.WebhookAllowHTTP = true
	cfg.WebhookAllowedNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	cfg.DeliveryBackoff = 100 * time.Millisecond
	cfg.WebhookBackoff = 100 * time.Millisecond
	cfg.ShutdownTimeout = 5 * time.Second
	// Many test packages share one PostgreSQL; a small pool keeps them within its connections.
	cfg.DBMaxConns = 8
	if edit != nil {
		edit(&cfg)
	}
	log, level := zaptest.NewLogger(t), zapcore.DebugLevel
	if _, bench := t.(*testing.B); bench {
		log, level = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), zapcore.WarnLevel
	}
	core, logs := observer.New(level)
	log = zap.New(zapcore.NewTee(log.Core(), core))
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
			t.Errorf("connect stopped with %v", err)
		}
	})
	return &Server{Addr: lis.Addr().String(), DatabaseURL: cfg.DatabaseURL, Metrics: reg, Logs: logs}
}
