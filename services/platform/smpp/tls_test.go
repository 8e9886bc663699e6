package smpp

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/tlstest"
)

// TestTLSTransport: with Config.TLS the session runs over TLS, the SMSC's name taken from Addr
// unless set; over plain TCP, an SMSC that answers in TLS or hangs up unanswered is named as
// the likely cause. The test against an SMSC that is not ours (npm smpp over node:tls) is
// tests/smsc's TestTLS.
func TestTLSTransport(t *testing.T) {
	ca, err := tlstest.NewCA("smpp test CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue("smsc.test", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	overTLS := func(c *smscConn) {
		tc := tls.Server(c.nc, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		c.nc, c.br = tc, bufio.NewReader(tc)
		standard(nil)(c)
	}
	tlsSMSC := startSMSC(t, overTLS)

	t.Run("bound and sending over TLS, the name checked being Addr's host", func(t *testing.T) {
		cfg := testConfig(tlsSMSC.ln.Addr().String())
		cfg.TLS = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		c := dial(t, cfg)
		if ids, err := c.Submit(context.Background(), Message{From: "mnv", To: "1", Text: "hi"}); err != nil || len(ids) != 1 {
			t.Fatalf("submit over TLS: %v %v", ids, err)
		}
		if cfg.TLS.ServerName != "" {
			t.Error("the caller's tls.Config was written to")
		}
	})

	alert := []byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46} // protocol_version, fatal
	tests := []struct {
		name  string
		serve func(c *smscConn)
		tls   *tls.Config
		check func(error) bool
	}{
		{"plain TCP, the SMSC answers with a TLS alert", func(c *smscConn) {
			_, _ = c.read()
			_, _ = c.nc.Write(alert)
		}, nil, func(err error) bool { return errors.Is(err, ErrTLSExpected) }},
		{"plain TCP, the SMSC hangs up unanswered", func(c *smscConn) {
			_, _ = c.read()
		}, nil, func(err error) bool { return errors.Is(err, io.EOF) && strings.Contains(err.Error(), "expect TLS") }},
		{"TLS, the certificate not for the name asked", overTLS, &tls.Config{RootCAs: roots, ServerName: "other.test", MinVersion: tls.VersionTLS12},
			func(err error) bool {
				var e x509.HostnameError
				return errors.As(err, &e) && strings.Contains(err.Error(), "TLS handshake with")
			}},
		{"TLS, an SMSC that sends plain SMPP", func(c *smscConn) {
			_, _ = c.nc.Write([]byte{0, 0, 0, 16, 0x80, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 1}) // generic_nack
		}, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}, func(err error) bool {
			var e tls.RecordHeaderError
			return errors.As(err, &e)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			smsc := startSMSC(t, tt.serve)
			cfg := testConfig(smsc.ln.Addr().String())
			cfg.TLS, cfg.DialTimeout = tt.tls, 2*time.Second
			c, err := Dial(context.Background(), cfg)
			if err == nil {
				c.Close()
				t.Fatal("bound")
			}
			if !tt.check(err) || !strings.Contains(err.Error(), smsc.ln.Addr().String()) || strings.Contains(err.Error(), cfg.Password) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}
