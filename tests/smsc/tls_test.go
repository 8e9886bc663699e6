package smsc_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/smpp"
	"github.com/mnvhq/mnv/services/platform/tlstest"
	"github.com/mnvhq/mnv/tests/harness"
)

// TestTLS: over TLS (MNV_SMPP_TLS) the client checks the SMSC's certificate against the CA it
// is given before the bind's credentials leave, then sends and gets its receipt as over TCP;
// every mismatch of transport, CA or name fails the bind with an error that says which, and
// the SMSC never reads a bind.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlstest.NewCA("smsc test CA")
	if err != nil {
		t.Fatal(err)
	}
	// The certificate names the SMSC by a DNS name and by the loopback address it is dialled on.
	files, err := ca.Write(dir, "smsc", "smsc.test", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := tlstest.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	pool := func(pem []byte) *x509.CertPool {
		p := x509.NewCertPool()
		if !p.AppendCertsFromPEM(pem) {
			t.Fatal("no CA certificate")
		}
		return p
	}
	trusted, untrusted := pool(ca.PEM), pool(other.PEM)

	secure := start(t, harness.SMSCConfig{TLSCert: files.Cert, TLSKey: files.Key})
	plain := start(t, harness.SMSCConfig{})

	t.Run("bound over TLS: a message sent and its receipt back", func(t *testing.T) {
		cfg := clientConfig(secure)
		cfg.TLS = &tls.Config{RootCAs: trusted, MinVersion: tls.VersionTLS12}
		got := make(chan smpp.Receipt, 1)
		cfg.OnReceipt = func(r smpp.Receipt, ack smpp.Ack) { got <- r; ack(true) }
		c := dial(t, cfg)
		ids, err := c.Submit(context.Background(), smpp.Message{From: "mnv", To: "+15550100", Text: "123456 is your code", RegisteredDelivery: true})
		if err != nil || len(ids) != 1 {
			t.Fatalf("submit over TLS: %v %v", ids, err)
		}
		select {
		case r := <-got:
			if r.MessageID != ids[0] || r.State != smpp.StateDelivered {
				t.Fatalf("receipt %+v, sent %s", r, ids[0])
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no receipt over TLS within 10s")
		}
		if rs := secure.Received(); len(rs) != 1 || rs[0].Text != "123456 is your code" || !rs[0].Accepted() {
			t.Fatalf("the SMSC read %+v", rs)
		}
	})

	tests := []struct {
		name   string
		smsc   *harness.SMSC
		tls    *tls.Config
		want   string // in the error
		wantAs func(error) bool
		// waits: the SMSC neither answers nor hangs up, so the bind fails at DialTimeout (npm
		// smpp reads a ClientHello as the head of a PDU of some 350 MB and waits for the rest).
		waits bool
	}{
		{"a CA that did not sign the SMSC's certificate", secure, &tls.Config{RootCAs: untrusted, MinVersion: tls.VersionTLS12},
			"TLS handshake with", func(err error) bool { var e *tls.CertificateVerificationError; return errors.As(err, &e) }, false},
		{"the system's roots, which do not know the test CA", secure, &tls.Config{MinVersion: tls.VersionTLS12},
			"TLS handshake with", func(err error) bool { var e *tls.CertificateVerificationError; return errors.As(err, &e) }, false},
		{"a server name the certificate does not carry", secure, &tls.Config{RootCAs: trusted, ServerName: "smsc.example", MinVersion: tls.VersionTLS12},
			"smsc.example", func(err error) bool { var e x509.HostnameError; return errors.As(err, &e) }, false},
		// Node's TLS server hangs up on a plain bind without a word; the bind's octets (the
		// password among them) did leave in clear, which no client set up for plain TCP can help.
		{"plain TCP to an SMSC that speaks TLS", secure, nil, "expect TLS", func(err error) bool { return errors.Is(err, io.EOF) }, false},
		{"TLS to an SMSC that speaks plain SMPP", plain, &tls.Config{RootCAs: trusted, MinVersion: tls.VersionTLS12},
			"TLS handshake with", func(err error) bool { var e net.Error; return errors.As(err, &e) && e.Timeout() }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			binds := len(tt.smsc.Binds())
			cfg := clientConfig(tt.smsc)
			cfg.TLS, cfg.DialTimeout = tt.tls, 2*time.Second
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := smpp.Dial(ctx, cfg)
			if err == nil {
				_ = c.Close()
				t.Fatal("bound")
			}
			t.Logf("error: %v", err)
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.smsc.Addr) {
				t.Errorf("error %q: want it to name the SMSC and contain %q", err, tt.want)
			}
			if tt.wantAs != nil && !tt.wantAs(err) {
				t.Errorf("error %v: not of the kind expected", err)
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("the error quotes the password: %v", err)
			}
			if !tt.waits && errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("a mismatch the SMSC answers should fail at once, not at the timeout: %v", err)
			}
			if n := len(tt.smsc.Binds()); n != binds {
				t.Errorf("the SMSC read %d bind(s)", n-binds)
			}
		})
	}
}
