package app

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"github.com/mnvhq/mnv/services/platform/grpcclient"
	"github.com/mnvhq/mnv/services/platform/smpp"
	"github.com/mnvhq/mnv/services/verification/internal/smsc"
)

func (c SMPPConfig) validate() error {
	if c.Addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return errors.New("MNV_SMPP_ADDR: must be host:port")
	}
	// SMPP 3.4's field sizes, less the terminating NUL.
	if len(c.SystemID) == 0 || len(c.SystemID) > 15 || len(c.Password) > 8 || len(c.SystemType) > 12 {
		return errors.New("MNV_SMPP_SYSTEM_ID (1 to 15 characters), MNV_SMPP_PASSWORD (at most 8), MNV_SMPP_SYSTEM_TYPE (at most 12): as the SMSC issued them")
	}
	if c.Window < 1 || c.Window > 1000 {
		return errors.New("MNV_SMPP_WINDOW: must be between 1 and 1000")
	}
	// A CA or a name without TLS would be a deployment that believes it is encrypted and sends
	// the password in clear.
	if !c.TLS && (c.TLSCAFile != "" || c.TLSServerName != "") {
		return errors.New("MNV_SMPP_TLS_CA, MNV_SMPP_TLS_SERVER_NAME: need MNV_SMPP_TLS=true")
	}
	return nil
}

// smsc is the adapter's configuration; the bind is named for its address in the metrics. With
// TLS, a CA file that cannot be read stops the start.
func (c SMPPConfig) smsc() (smsc.Config, error) {
	sc := smsc.Config{Name: c.Addr, Source: c.Source, Config: smpp.Config{
		Addr: c.Addr, SystemID: c.SystemID, Password: c.Password, SystemType: c.SystemType, Window: c.Window,
	}}
	if c.TLS {
		// An empty ServerName is Addr's host (smpp.Config.TLS); RootCAs nil, the system's.
		sc.TLS = &tls.Config{ServerName: c.TLSServerName, MinVersion: tls.VersionTLS12}
		if c.TLSCAFile != "" {
			pool, err := grpcclient.LoadCAs(c.TLSCAFile)
			if err != nil {
				return smsc.Config{}, fmt.Errorf("MNV_SMPP_TLS_CA: %w", err)
			}
			sc.TLS.RootCAs = pool
		}
	}
	return sc, nil
}

// smsJobWorkers is how many SMS jobs a process works at once: enough to keep the bind's window
// full, since each job waits for its submit's answer.
func smsJobWorkers(window int) int { return max(2*window, 4) }
