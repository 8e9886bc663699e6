// Package apptest starts a real accounts service for tests of this and other modules: a fresh
// migrated database, the real gRPC server on a loopback socket, and admin helpers to create
// clients the way the operator does.
package apptest

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/app"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/auth/authtest"
	"github.com/mnvhq/mnv/services/platform/pgtest"
)

// Test secrets. The internal callers' tokens are authtest's.
const (
	Pepper     = "apptest-pepper-apptest-pepper-0123456789"
	DataKeys   = "t1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	AdminToken = "apptest-admin-token-0123456789abcdefghij"
)

// Server is a running accounts service.
type Server struct {
	Addr        string
	DatabaseURL string
	// Metrics is the registry the service registered its metrics on.
	Metrics *prometheus.Registry
	Admin   accountsv1.AccountsAdminServiceClient
	// Internal calls the internal methods as verification does.
	Internal accountsv1.AccountsInternalServiceClient
}

// Start runs an accounts service until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, pgtest.NewDatabase(t))
}

// StartReplica runs another replica of s's service, on s's database, until the test ends.
func StartReplica(t testing.TB, s *Server) *Server {
	t.Helper()
	return start(t, s.DatabaseURL)
}

func start(t testing.TB, databaseURL string) *Server {
	t.Helper()
	cfg := app.DefaultConfig()
	cfg.GRPCAddr = "127.0.0.1:0"
	cfg.DatabaseURL = databaseURL
	cfg.Pepper, cfg.DataKeys, cfg.AdminToken = Pepper, DataKeys, AdminToken
	cfg.InternalCallers = authtest.Callers()
	cfg.ShutdownTimeout = 5 * time.Second
	// Many test packages share one PostgreSQL; a small pool keeps them within its connections.
	cfg.DBMaxConns = 8
	// No connect here: events are written with their facts and wait in the queue, where a test
	// reads them (Events).
	cfg.ConnectAddr = ""
	if _, ok := t.(*testing.B); ok {
		// A benchmark measures throughput, which the per-credential budget would cap.
		cfg.ClientRate = 0
	}

	ctx, cancel := context.WithCancel(context.Background())
	reg := prometheus.NewRegistry()
	a, err := app.New(ctx, cfg, Logger(t), reg)
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
			t.Errorf("accounts stopped with %v", err)
		}
	})
	s := &Server{Addr: lis.Addr().String(), DatabaseURL: cfg.DatabaseURL, Metrics: reg}
	s.Admin = accountsv1.NewAccountsAdminServiceClient(Dial(t, s.Addr, AdminToken))
	s.Internal = accountsv1.NewAccountsInternalServiceClient(Dial(t, s.Addr, authtest.VerificationToken))
	return s
}

// Logger logs to the test's log; benchmarks get warnings only, so logging is not measured.
func Logger(t testing.TB) *zap.Logger {
	if _, bench := t.(*testing.B); bench {
		return zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	}
	return zaptest.NewLogger(t)
}

// Dial opens a client connection that presents token ("" for none) as a bearer credential.
func Dial(t testing.TB, addr, token string) *grpc.ClientConn {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.BearerCredentials{Token: token, Insecure: true}))
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Client is a created client and its credentials.
type Client struct {
	ID     string
	Secret string
	APIKey string
}

// CreateClient creates a client through the admin API with balance and features.
func (s *Server) CreateClient(t testing.TB, balance int64, features ...accountsv1.Feature) Client {
	t.Helper()
	resp, err := s.Admin.CreateClient(context.Background(), &accountsv1.CreateClientRequest{
		ClientName: "Golden Client", ContactPersonName: "Gil Den", ContactPersonEmail: "gil@example.com",
		ContactPhoneNumber: "0044123456", InitialBalance: balance, Features: features,
	})
	if err != nil {
		t.Fatal(err)
	}
	return Client{ID: resp.GetClient().GetId(), Secret: resp.GetClientSecret(), APIKey: resp.GetApiKey()}
}
