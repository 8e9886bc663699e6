package service_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/auth/authtest"
	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/service"
)

// testVars are a service's own names, as an app spells them.
var testVars = service.Vars{GRPCAddr: "MNV_SVC_GRPC_ADDR", DatabaseURL: "MNV_SVC_DATABASE_URL", DBMaxConns: "MNV_SVC_DB_MAX_CONNS"}

const testKeys = "t1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

// TestLoad: each common variable is read over its default, under the service's own name where it
// has one, and each mistake is reported naming its variable.
func TestLoad(t *testing.T) {
	redisFile := filepath.Join(t.TempDir(), "redis")
	if err := os.WriteFile(redisFile, []byte("redis://file:6379/0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := func() map[string]string {
		return map[string]string{
			"DATABASE_URL":         "postgres://localhost/mnv",
			"MNV_DATA_KEYS":        testKeys,
			"MNV_INTERNAL_CALLERS": authtest.Callers().String(),
		}
	}
	tests := []struct {
		name    string
		edit    func(map[string]string)
		wantErr string // "" for none
		check   func(t *testing.T, c service.Config)
	}{
		{"defaults", nil, "", func(t *testing.T, c service.Config) {
			want := service.DefaultConfig("127.0.0.1:9999", testVars)
			if c.GRPCAddr != want.GRPCAddr || c.DBMaxConns != 32 || c.ClientRate != 50 || c.ClientBurst != 100 ||
				c.ShutdownTimeout != 15*time.Second || c.Jobs.RescueAfter != jobs.DefaultRescueAfter {
				t.Errorf("defaults not kept: %+v", c)
			}
			if c.DatabaseURL != "postgres://localhost/mnv" || c.DataKeys != testKeys || c.InternalToken != "" || c.RedisURL != "" || c.TLSCAFile != "" {
				t.Errorf("read %+v", c)
			}
			if !c.InternalCallers.Accepts(authtest.GatewayToken) || c.Transport.CertFile != "" {
				t.Errorf("callers or transport: %+v", c)
			}
			if c.Vars != testVars {
				t.Errorf("vars %+v, want %+v", c.Vars, testVars)
			}
		}},
		{"the service's own names", func(m map[string]string) {
			m["MNV_SVC_GRPC_ADDR"], m["MNV_SVC_DATABASE_URL"], m["MNV_SVC_DB_MAX_CONNS"] = "0.0.0.0:1", "postgres://own/db", "7"
		}, "", func(t *testing.T, c service.Config) {
			if c.GRPCAddr != "0.0.0.0:1" || c.DatabaseURL != "postgres://own/db" || c.DBMaxConns != 7 {
				t.Errorf("read %q %q %d", c.GRPCAddr, c.DatabaseURL, c.DBMaxConns)
			}
		}},
		{"the own database URL alone", func(m map[string]string) {
			delete(m, "DATABASE_URL")
			m["MNV_SVC_DATABASE_URL"] = "postgres://own/db"
		}, "", func(t *testing.T, c service.Config) {
			if c.DatabaseURL != "postgres://own/db" {
				t.Errorf("database URL %q", c.DatabaseURL)
			}
		}},
		{"the common variables", func(m map[string]string) {
			m["MNV_INTERNAL_TOKEN"], m["MNV_GRPC_TLS_CA"] = authtest.VerificationToken, "/tls/ca.crt"
			m["MNV_CLIENT_RATE"], m["MNV_CLIENT_BURST"] = "0.5", "3"
			m["MNV_SHUTDOWN_TIMEOUT"], m["MNV_JOBS_RESCUE_AFTER"] = "3s", "10m"
			m["MNV_GRPC_TLS_CERT"], m["MNV_GRPC_TLS_KEY"] = "/tls/tls.crt", "/tls/tls.key"
			m["MNV_REDIS_URL_FILE"] = redisFile
		}, "", func(t *testing.T, c service.Config) {
			if c.InternalToken != authtest.VerificationToken || c.TLSCAFile != "/tls/ca.crt" || c.ClientRate != 0.5 || c.ClientBurst != 3 ||
				c.ShutdownTimeout != 3*time.Second || c.Jobs.RescueAfter != 10*time.Minute || c.RedisURL != "redis://file:6379/0" ||
				c.Transport.CertFile != "/tls/tls.crt" || c.Transport.KeyFile != "/tls/tls.key" {
				t.Errorf("read %+v", c)
			}
			if got := c.Client(); got.Token != authtest.VerificationToken || got.CAFile != "/tls/ca.crt" {
				t.Errorf("Client() = %+v", got)
			}
		}},
		{"no database URL", func(m map[string]string) { delete(m, "DATABASE_URL") }, "DATABASE_URL: required", nil},
		{"no data keys", func(m map[string]string) { delete(m, "MNV_DATA_KEYS") }, "MNV_DATA_KEYS: required", nil},
		{"no callers", func(m map[string]string) { delete(m, "MNV_INTERNAL_CALLERS") }, "MNV_INTERNAL_CALLERS: required", nil},
		{"a pool size that is no number", func(m map[string]string) { m["MNV_SVC_DB_MAX_CONNS"] = "many" }, "MNV_SVC_DB_MAX_CONNS: not an integer", nil},
		{"a rate that is no number", func(m map[string]string) { m["MNV_CLIENT_RATE"] = "fast" }, "MNV_CLIENT_RATE: not a number", nil},
		{"a malformed timeout", func(m map[string]string) { m["MNV_SHUTDOWN_TIMEOUT"] = "soon" }, "MNV_SHUTDOWN_TIMEOUT: not a duration", nil},
		{"a certificate without its key", func(m map[string]string) { m["MNV_GRPC_TLS_CERT"] = "/tls/tls.crt" }, "MNV_GRPC_TLS_CERT and MNV_GRPC_TLS_KEY", nil},
		{"a secret twice", func(m map[string]string) { m["MNV_REDIS_URL"], m["MNV_REDIS_URL_FILE"] = "redis://x", redisFile }, "MNV_REDIS_URL: set either it or MNV_REDIS_URL_FILE", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := base()
			if tt.edit != nil {
				tt.edit(m)
			}
			env := config.FromMap(m)
			c := service.DefaultConfig("127.0.0.1:9999", testVars)
			loadErr := c.Load(env)
			err := errors.Join(env.Err(), loadErr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

// TestValidate: what parses but makes no sense is refused with the message naming the variable
// (docs/operations.md); the pool's under the service's own name.
func TestValidate(t *testing.T) {
	const longest = time.Minute
	tests := []struct {
		name    string
		edit    func(*service.Config)
		wantErr string // "" for none
	}{
		{"defaults", nil, ""},
		{"the smallest pool", func(c *service.Config) { c.DBMaxConns = 2 }, ""},
		{"a rate of 0 disables the limit", func(c *service.Config) { c.ClientRate = 0 }, ""},
		{"a pool of one", func(c *service.Config) { c.DBMaxConns = 1 }, "MNV_SVC_DB_MAX_CONNS: must be between 2 and 1000"},
		{"a pool too large", func(c *service.Config) { c.DBMaxConns = 1001 }, "MNV_SVC_DB_MAX_CONNS: must be between 2 and 1000"},
		{"a negative rate", func(c *service.Config) { c.ClientRate = -1 }, "MNV_CLIENT_RATE, MNV_CLIENT_BURST: must not be negative (burst at least 1)"},
		{"no burst", func(c *service.Config) { c.ClientBurst = 0 }, "MNV_CLIENT_RATE, MNV_CLIENT_BURST: must not be negative (burst at least 1)"},
		{"a rescue no longer than an attempt", func(c *service.Config) { c.Jobs.RescueAfter = longest }, "MNV_JOBS_RESCUE_AFTER: 1m0s must exceed the longest job attempt, 1m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := service.DefaultConfig("127.0.0.1:9999", testVars)
			if tt.edit != nil {
				tt.edit(&c)
			}
			err := c.Validate(longest)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
