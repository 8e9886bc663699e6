package app_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/auth/authtest"
	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/verification/app"
	"github.com/mnvhq/mnv/services/verification/app/apptest"
)

// TestLoadConfigCredentials: the credentials and the sandbox switch are read, and each mistake
// stops the start with a message naming its variable.
func TestLoadConfigCredentials(t *testing.T) {
	base := func() map[string]string {
		return map[string]string{
			"DATABASE_URL":         "postgres://localhost/mnv",
			"MNV_INTERNAL_TOKEN":   authtest.VerificationToken,
			"MNV_INTERNAL_CALLERS": authtest.Callers().String(),
			"MNV_DATA_KEYS":        apptest.DataKeys,
			"MNV_NUMBER_HASH_KEY":  apptest.NumberHashKey,
		}
	}
	tests := []struct {
		name    string
		edit    func(map[string]string)
		wantErr string // "" for none
		check   func(t *testing.T, c app.Config)
	}{
		{"complete; the sandbox is off by default", nil, "", func(t *testing.T, c app.Config) {
			if c.Sandbox {
				t.Error("the sandbox is on without MNV_SANDBOX")
			}
			if c.InternalToken != authtest.VerificationToken || !c.InternalCallers.Accepts(authtest.GatewayToken) {
				t.Error("the token or the callers were not read")
			}
		}},
		{"MNV_SANDBOX=true", func(m map[string]string) { m["MNV_SANDBOX"] = "true" }, "", func(t *testing.T, c app.Config) {
			if !c.Sandbox {
				t.Error("the sandbox is off")
			}
		}},
		{"TLS", func(m map[string]string) {
			m["MNV_GRPC_TLS_CERT"], m["MNV_GRPC_TLS_KEY"], m["MNV_GRPC_TLS_CA"] = "/tls/tls.crt", "/tls/tls.key", "/tls/ca.crt"
		}, "", func(t *testing.T, c app.Config) {
			if c.Transport.CertFile != "/tls/tls.crt" || c.Transport.KeyFile != "/tls/tls.key" || c.TLSCAFile != "/tls/ca.crt" {
				t.Errorf("transport %+v, CA %q", c.Transport, c.TLSCAFile)
			}
		}},
		{"no own token", func(m map[string]string) { delete(m, "MNV_INTERNAL_TOKEN") }, "MNV_INTERNAL_TOKEN: required", nil},
		{"no callers", func(m map[string]string) { delete(m, "MNV_INTERNAL_CALLERS") }, "MNV_INTERNAL_CALLERS: required", nil},
		{"malformed callers", func(m map[string]string) { m["MNV_INTERNAL_CALLERS"] = "gateway:" + authtest.GatewayToken }, "MNV_INTERNAL_CALLERS: entry 1 (gateway)", nil},
		{"a certificate without its key", func(m map[string]string) { m["MNV_GRPC_TLS_CERT"] = "/tls/tls.crt" }, "MNV_GRPC_TLS_CERT and MNV_GRPC_TLS_KEY", nil},
		{"a malformed sandbox switch", func(m map[string]string) { m["MNV_SANDBOX"] = "yes please" }, "MNV_SANDBOX", nil},
		{"an SMSC", func(m map[string]string) {
			m["MNV_SMPP_ADDR"], m["MNV_SMPP_SYSTEM_ID"], m["MNV_SMPP_WINDOW"] = "smsc.example:2775", "mnv", "20"
			m["MNV_SMPP_PASSWORD_FILE"] = writeFile(t, "pw"+"1234")
		}, "", func(t *testing.T, c app.Config) {
			if c.SMPP.Addr != "smsc.example:2775" || c.SMPP.SystemID != "mnv" || c.SMPP.Password != "pw1234" || c.SMPP.Window != 20 || c.SMPP.Source != "mnv" {
				t.Errorf("SMPP %+v", c.SMPP)
			}
		}},
		{"an SMSC over TLS", func(m map[string]string) {
			m["MNV_SMPP_ADDR"], m["MNV_SMPP_SYSTEM_ID"], m["MNV_SMPP_TLS"] = "smsc.example:3550", "mnv", "true"
			m["MNV_SMPP_TLS_CA"], m["MNV_SMPP_TLS_SERVER_NAME"] = "/tls/smsc-ca.crt", "smsc.operator.example"
		}, "", func(t *testing.T, c app.Config) {
			if !c.SMPP.TLS || c.SMPP.TLSCAFile != "/tls/smsc-ca.crt" || c.SMPP.TLSServerName != "smsc.operator.example" {
				t.Errorf("SMPP %+v", c.SMPP)
			}
		}},
		{"an SMSC's CA without TLS", func(m map[string]string) {
			m["MNV_SMPP_ADDR"], m["MNV_SMPP_SYSTEM_ID"], m["MNV_SMPP_TLS_CA"] = "smsc.example:2775", "mnv", "/tls/smsc-ca.crt"
		}, "MNV_SMPP_TLS=true", nil},
		{"an in-doubt hold", func(m map[string]string) { m["MNV_SMS_IN_DOUBT_HOLD"] = "5s" }, "", func(t *testing.T, c app.Config) {
			if c.SMSInDoubtHold != 5*time.Second {
				t.Errorf("hold %s", c.SMSInDoubtHold)
			}
		}},
		{"an in-doubt hold too long", func(m map[string]string) { m["MNV_SMS_IN_DOUBT_HOLD"] = "1h" }, "MNV_SMS_IN_DOUBT_HOLD", nil},
		{"a negative in-doubt hold", func(m map[string]string) { m["MNV_SMS_IN_DOUBT_HOLD"] = "-1s" }, "MNV_SMS_IN_DOUBT_HOLD", nil},
		{"an SMSC without a system id", func(m map[string]string) { m["MNV_SMPP_ADDR"] = "smsc.example:2775" }, "MNV_SMPP_SYSTEM_ID", nil},
		{"an SMSC password too long", func(m map[string]string) {
			m["MNV_SMPP_ADDR"], m["MNV_SMPP_SYSTEM_ID"], m["MNV_SMPP_PASSWORD"] = "smsc.example:2775", "mnv", strings.Repeat("p", 9)
		}, "MNV_SMPP_PASSWORD", nil},
		{"an SMSC without a port", func(m map[string]string) { m["MNV_SMPP_ADDR"], m["MNV_SMPP_SYSTEM_ID"] = "smsc.example", "mnv" }, "MNV_SMPP_ADDR", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := base()
			if tt.edit != nil {
				tt.edit(m)
			}
			c, err := app.LoadConfig(config.FromMap(m))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("LoadConfig = %v, want an error containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), authtest.GatewayToken) || strings.Contains(err.Error(), authtest.VerificationToken) {
					t.Errorf("the error quotes a token: %v", err)
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

// TestSandboxOperatorNeedsTheSwitch: a registry file with a sandbox operator is refused at
// start-up unless MNV_SANDBOX is on, with a message that says so.
func TestSandboxOperatorNeedsTheSwitch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "operators.yaml")
	const registry = `operators:
  - id: sandbox
    name: mnv sandbox
    country: ZZ
    methods: [HEADER_ENRICHMENT]
    sandbox: true
    headerEnrichment:
      trustedRanges: ["127.0.0.0/8"]
      numberHeader: X-Mnv-Sandbox-Msisdn
`
	if err := os.WriteFile(path, []byte(registry), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := app.DefaultConfig()
	cfg.DataKeys, cfg.NumberHashKey, cfg.OperatorsFile = apptest.DataKeys, apptest.NumberHashKey, path
	cfg.InternalToken, cfg.InternalCallers = authtest.VerificationToken, auth.Callers{}.With(auth.CallerGateway, authtest.GatewayToken)
	_, err := app.New(context.Background(), cfg, zap.NewNop(), nil)
	if err == nil || !strings.Contains(err.Error(), "MNV_SANDBOX=true") || !strings.Contains(err.Error(), `"sandbox"`) {
		t.Fatalf("New = %v, want a refusal naming the operator and MNV_SANDBOX", err)
	}
}

// writeFile writes content to a file of the test's and names it.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
