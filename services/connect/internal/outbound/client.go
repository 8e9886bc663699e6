package outbound

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// DefaultTimeout bounds a whole delivery attempt (connect, send, response headers, reading the
// response) when NewClient is given no timeout: a worker must never wait on a stalled
// endpoint indefinitely.
const DefaultTimeout = 30 * time.Second

// NewClient returns the HTTP client deliveries must use. It enforces p where it cannot be
// bypassed:
//
//   - the dialer's Control function checks the address of every socket about to connect
//     (after DNS resolution, for every address tried), so a host name that resolves, or later
//     re-resolves, to a refused address is never connected to (DNS rebinding);
//   - every request's scheme is re-checked (https, http only with AllowHTTP), because the
//     policy can be tightened after an integration was stored;
//   - redirects are not followed (a redirect is reported as the 3xx it is), so an endpoint
//     cannot bounce us elsewhere;
//   - no proxy is taken from the environment: a proxy would do the dialling, out of reach of
//     the address check.
//
// TLS is at least 1.2. timeout bounds each request as a whole (DefaultTimeout when not
// positive); dial and TLS handshake are bounded by 10 seconds or timeout if shorter.
func NewClient(p Policy, timeout time.Duration) *http.Client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	step := min(timeout, 10*time.Second)
	dialer := &net.Dialer{
		Timeout:   step,
		KeepAlive: 30 * time.Second,
		Control:   p.control,
	}
	base := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true, // a custom DialContext otherwise turns HTTP/2 off
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    step,
		ResponseHeaderTimeout:  timeout,
		ExpectContinueTimeout:  time.Second,
		IdleConnTimeout:        90 * time.Second,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    8, // batches to one CRM go one after another; a few spare suffice
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &http.Client{
		Transport: &guardedTransport{policy: p, base: base},
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// control is the net.Dialer Control hook: it runs after the socket is created and before it
// connects, with the literal address being dialled.
func (p Policy) control(network, address string, _ syscall.RawConn) error {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return refuse("the endpoint must be reached over TCP")
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return refuse("the endpoint address is not valid")
	}
	return p.CheckAddr(ap.Addr())
}

// guardedTransport re-checks the scheme of every request before handing it to the transport
// whose dialer checks addresses.
type guardedTransport struct {
	policy Policy
	base   *http.Transport
}

// RoundTrip implements http.RoundTripper.
func (t *guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.policy.checkScheme(req.URL.Scheme); err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper must close the body, even on error
		}
		return nil, err
	}
	return t.base.RoundTrip(req)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the pooled connections.
func (t *guardedTransport) CloseIdleConnections() { t.base.CloseIdleConnections() }
