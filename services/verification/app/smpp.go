package app

import (
	"context"
	"crypto/tls"
	"errors"
	"net"

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
	return nil
}

// smsc is the adapter's configuration; the bind is named for its address in the metrics.
func (c SMPPConfig) smsc() smsc.Config {
	sc := smsc.Config{Name: c.Addr, Source: c.Source, Config: smpp.Config{
		Addr: c.Addr, SystemID: c.SystemID, Password: c.Password, SystemType: c.SystemType, Window: c.Window,
	}}
	if c.TLS {
		host, _, _ := net.SplitHostPort(c.Addr)
		d := &tls.Dialer{Config: &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}}
		sc.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		}
	}
	return sc
}

// smsJobWorkers is how many SMS jobs a process works at once: enough to keep the bind's window
// full, since each job waits for its submit's answer.
func smsJobWorkers(window int) int { return max(2*window, 4) }
