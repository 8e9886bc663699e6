package gateway_test

import (
	"context"
	"net"
	"strings"
	"testing"

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

// TestBindErrorNamesTheVariable: when an app's address is taken, its Listen error says which
// variable sets it, so whoever runs it knows what to change.
func TestBindErrorNamesTheVariable(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	// Nothing listens there: the apps dial lazily, so New succeeds.
	const nowhere = "127.0.0.1:1"
	service := func(s process.Service, err error) process.Service {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tests := []struct {
		variable string
		build    func(t *testing.T) process.Service
	}{
		{"MNV_ACCOUNTS_GRPC_ADDR", func(t *testing.T) process.Service {
			cfg := accounts.DefaultConfig()
			cfg.GRPCAddr, cfg.DatabaseURL = addr, pgtest.NewDatabase(t)
			cfg.Pepper, cfg.DataKeys, cfg.AdminToken = accountstest.Pepper, accountstest.DataKeys, accountstest.AdminToken
			cfg.InternalCallers = authtest.Callers()
			return service(accounts.New(context.Background(), cfg, zaptest.NewLogger(t), prometheus.NewRegistry()))
		}},
		{"MNV_VERIFICATION_GRPC_ADDR", func(t *testing.T) process.Service {
			cfg := verification.DefaultConfig()
			cfg.GRPCAddr, cfg.DatabaseURL = addr, pgtest.NewDatabase(t)
			cfg.AccountsAddr, cfg.ConnectAddr, cfg.InternalToken = nowhere, nowhere, authtest.VerificationToken
			cfg.DataKeys, cfg.NumberHashKey = verificationtest.DataKeys, verificationtest.NumberHashKey
			cfg.InternalCallers = authtest.Callers()
			return service(verification.New(context.Background(), cfg, zaptest.NewLogger(t), prometheus.NewRegistry()))
		}},
		{"MNV_CONNECT_GRPC_ADDR", func(t *testing.T) process.Service {
			cfg := connect.DefaultConfig()
			cfg.GRPCAddr, cfg.DatabaseURL = addr, pgtest.NewDatabase(t)
			cfg.AccountsAddr, cfg.InternalToken = nowhere, authtest.ConnectToken
			cfg.DataKeys, cfg.NumberHashKey = connecttest.DataKeys, connecttest.NumberHashKey
			cfg.InternalCallers = authtest.Callers()
			return service(connect.New(context.Background(), cfg, zaptest.NewLogger(t), prometheus.NewRegistry()))
		}},
		{"MNV_HTTP_ADDR", func(t *testing.T) process.Service {
			cfg := gateway.DefaultConfig()
			cfg.HTTPAddr = addr
			cfg.AccountsAddr, cfg.VerificationAddr, cfg.ConnectAddr = nowhere, nowhere, nowhere
			cfg.InternalToken = authtest.GatewayToken
			reg := prometheus.NewRegistry()
			return service(gateway.New(context.Background(), cfg, zaptest.NewLogger(t), reg, reg))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.variable, func(t *testing.T) {
			svc := tt.build(t)
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
			want := "listen on " + addr + " (" + tt.variable + "): "
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "address already in use") {
				t.Errorf("Listen = %q, want it to contain %q and the cause", err, want)
			}
		})
	}
}
