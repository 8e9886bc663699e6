package e2e_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/tlstest"
	"github.com/mnvhq/mnv/tests/harness"
)

// TestSMSOverTLS: verification's binary binds to an SMSC that speaks TLS only (npm smpp over
// node:tls) as MNV_SMPP_TLS, MNV_SMPP_TLS_CA and MNV_SMPP_TLS_SERVER_NAME say, and a workflow's
// code goes out and its receipt comes back over it. The certificate names the SMSC only by a
// DNS name, not by the loopback address dialled, so the bind holds only if the name set is the
// one checked. The mismatches (wrong CA, plain TCP) are tests/smsc's TestTLS.
func TestSMSOverTLS(t *testing.T) {
	ca, err := tlstest.NewCA("e2e SMSC CA")
	if err != nil {
		t.Fatal(err)
	}
	files, err := ca.Write(t.TempDir(), "smsc", "smsc.e2e.test")
	if err != nil {
		t.Fatal(err)
	}
	s := startSMSSuite(t, harness.SMSCConfig{TLSCert: files.Cert, TLSKey: files.Key},
		"MNV_SMPP_TLS=true", "MNV_SMPP_TLS_CA="+files.CA, "MNV_SMPP_TLS_SERVER_NAME=smsc.e2e.test")
	c := s.client(t, smsOnly)
	n := nextNumber()
	w := s.start(t, c, n)
	code := s.code(t, n)
	eventually(t, 20*time.Second, "the receipt over TLS makes the step DELIVERED", func() bool {
		_, st := s.get(t, c, w.WorkflowID).smsStep()
		return st == "DELIVERED"
	})
	if status, got := s.check(t, c, w.WorkflowID, code); status != http.StatusOK || got.Status != "VERIFIED" {
		t.Fatalf("check: %d %+v", status, got)
	}
	if binds := s.smsc.Binds(); len(binds) != 1 || binds[0].Status != 0 {
		t.Fatalf("binds %+v, want the one over TLS", binds)
	}
}
