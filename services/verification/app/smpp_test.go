package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/services/platform/tlstest"
)

// TestSMPPTLS: MNV_SMPP_TLS and its CA and name become the smpp client's TLS; a CA file that
// is missing or holds no certificate stops the start with a message naming the variable. The
// bind over TLS itself is tested against the Node SMSC (tests/smsc TestTLS, tests/e2e
// TestSMSOverTLS).
func TestSMPPTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlstest.NewCA("smsc CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile, notPEM := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "not.crt")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := SMPPConfig{Addr: "smsc.example:3550", SystemID: "mnv", Window: 10}
	tests := []struct {
		name      string
		edit      func(c *SMPPConfig)
		tls       bool   // the client runs TLS
		ownCA     bool   // with RootCAs of its own, not the system's
		server    string // the name checked; "" for Addr's host
		wantErr   string // from smsc(), or validate() when invalid
		invalidly bool
	}{
		{"plain TCP", nil, false, false, "", "", false},
		{"TLS against the system's roots", func(c *SMPPConfig) { c.TLS = true }, true, false, "", "", false},
		{"TLS against a CA and for a name", func(c *SMPPConfig) { c.TLS, c.TLSCAFile, c.TLSServerName = true, caFile, "smsc.operator.test" }, true, true, "smsc.operator.test", "", false},
		{"a CA file that is not there", func(c *SMPPConfig) { c.TLS, c.TLSCAFile = true, filepath.Join(dir, "missing.crt") }, false, false, "", "MNV_SMPP_TLS_CA", false},
		{"a CA file without a certificate", func(c *SMPPConfig) { c.TLS, c.TLSCAFile = true, notPEM }, false, false, "", "MNV_SMPP_TLS_CA", false},
		{"a CA without TLS", func(c *SMPPConfig) { c.TLSCAFile = caFile }, false, false, "", "MNV_SMPP_TLS=true", true},
		{"a name without TLS", func(c *SMPPConfig) { c.TLSServerName = "smsc.operator.test" }, false, false, "", "MNV_SMPP_TLS=true", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			if tt.edit != nil {
				tt.edit(&c)
			}
			err := c.validate()
			if tt.invalidly {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("validate = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sc, err := c.smsc()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("smsc() = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (sc.TLS != nil) != tt.tls {
				t.Fatalf("TLS %v, want %v", sc.TLS != nil, tt.tls)
			}
			if sc.TLS == nil {
				return
			}
			if (sc.TLS.RootCAs != nil) != tt.ownCA || sc.TLS.ServerName != tt.server || sc.TLS.InsecureSkipVerify {
				t.Fatalf("tls.Config: own CAs %v, server name %q, skip verify %v", sc.TLS.RootCAs != nil, sc.TLS.ServerName, sc.TLS.InsecureSkipVerify)
			}
		})
	}
}
