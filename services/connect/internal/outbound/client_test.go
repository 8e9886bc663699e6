package outbound

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const testTimeout = 2 * time.Second

var loopbackOnly = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

// countingServer is an httptest server that counts the TCP connections it accepts, so a test
// can tell "refused before connecting" from "connected, then failed".
type countingServer struct {
	*httptest.Server
	conns atomic.Int64
}

func newCountingServer(t *testing.T, h http.Handler, useTLS bool) *countingServer {
	t.Helper()
	s := &countingServer{Server: httptest.NewUnstartedServer(h)}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	if useTLS {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

func okHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
}

// trust makes c accept the httptest server's certificate, as a real CA-issued one would be.
func trust(t *testing.T, c *http.Client, srv *httptest.Server) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	c.Transport.(*guardedTransport).base.TLSClientConfig.RootCAs = pool
}

// assertPolicyRefusal checks that err is the policy's *Error (not a connection error) and that
// the server never saw a connection.
func assertPolicyRefusal(t *testing.T, err error, srv *countingServer) {
	t.Helper()
	if err == nil {
		t.Fatal("request succeeded, want a policy refusal")
	}
	var perr *Error
	if !errors.As(err, &perr) {
		t.Fatalf("error %v (%T) is not a policy *Error", err, err)
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("error %v is a connection error", err)
	}
	if strings.Contains(perr.Message, "127.0.0.1") || strings.Contains(perr.Message, "::1") {
		t.Fatalf("policy message %q repeats the address", perr.Message)
	}
	if n := srv.conns.Load(); n != 0 {
		t.Fatalf("server accepted %d connections, want none", n)
	}
}

func get(c *http.Client, u string) (*http.Response, error) {
	resp, err := c.Get(u)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	return resp, err
}

func TestClientRefusesLoopbackByDefault(t *testing.T) {
	srv := newCountingServer(t, okHandler(), true)
	c := NewClient(Policy{}, testTimeout)
	trust(t, c, srv.Server)
	_, err := get(c, srv.URL) // https://127.0.0.1:port
	assertPolicyRefusal(t, err, srv)
}

func TestClientRefusesLoopbackWithAllowHTTPOnly(t *testing.T) {
	srv := newCountingServer(t, okHandler(), false)
	_, err := get(NewClient(Policy{AllowHTTP: true}, testTimeout), srv.URL)
	assertPolicyRefusal(t, err, srv)
}

func TestClientRefusesPlainHTTPByDefault(t *testing.T) {
	srv := newCountingServer(t, okHandler(), false)
	// The address is allowed, the scheme is not.
	_, err := get(NewClient(Policy{AllowedNets: loopbackOnly}, testTimeout), srv.URL)
	assertPolicyRefusal(t, err, srv)
}

func TestClientRefusesHostnameResolvingToLoopback(t *testing.T) {
	srv := newCountingServer(t, okHandler(), false)
	u, _ := url.Parse(srv.URL)
	byName := "http://localhost:" + u.Port() + "/"
	// The raw client, not CheckURL: the refusal must come from the dialer, after resolution.
	_, err := get(NewClient(Policy{AllowHTTP: true}, testTimeout), byName)
	assertPolicyRefusal(t, err, srv)

	// The same name is reachable once its resolved addresses are allowed, which shows the
	// check is on the address, not the name.
	p := Policy{AllowHTTP: true, AllowedNets: []netip.Prefix{
		netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128"),
	}}
	resp, err := get(NewClient(p, testTimeout), byName)
	if err != nil {
		t.Fatalf("allowed localhost: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestClientRefusesIPv6Loopback(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	srv := &countingServer{Server: &httptest.Server{Listener: ln, Config: &http.Server{Handler: okHandler()}}}
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			srv.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	_, err = get(NewClient(Policy{AllowHTTP: true}, testTimeout), srv.URL)
	assertPolicyRefusal(t, err, srv)
}

func TestClientConnectsWhenAllowed(t *testing.T) {
	plain := newCountingServer(t, okHandler(), false)
	var tlsVersion atomic.Uint32
	secure := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tlsVersion.Store(uint32(r.TLS.Version))
	}), true)

	tests := []struct {
		name   string
		policy Policy
		srv    *countingServer
	}{
		{"AllowedNets + AllowHTTP", Policy{AllowHTTP: true, AllowedNets: loopbackOnly}, plain},
		{"AllowPrivate + AllowHTTP", Policy{AllowHTTP: true, AllowPrivate: true}, plain},
		{"https with AllowedNets", Policy{AllowedNets: loopbackOnly}, secure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClient(tt.policy, testTimeout)
			if tt.srv.TLS != nil {
				trust(t, c, tt.srv.Server)
			}
			resp, err := get(c, tt.srv.URL)
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
		})
	}
	if v := tlsVersion.Load(); v < tls.VersionTLS12 {
		t.Fatalf("TLS version %#x", v)
	}
}

func TestClientDoesNotFollowRedirects(t *testing.T) {
	var followed atomic.Int64
	elsewhere := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		followed.Add(1)
	}), false)
	mux := http.NewServeMux()
	mux.HandleFunc("/same", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/target", http.StatusFound)
	})
	mux.HandleFunc("/other", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/x", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/target", func(w http.ResponseWriter, r *http.Request) { followed.Add(1) })
	srv := newCountingServer(t, mux, false)

	c := NewClient(Policy{AllowHTTP: true, AllowedNets: loopbackOnly}, testTimeout)
	for path, want := range map[string]int{"/same": http.StatusFound, "/other": http.StatusTemporaryRedirect} {
		resp, err := get(c, srv.URL+path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if resp.StatusCode != want {
			t.Fatalf("%s: status %d, want %d", path, resp.StatusCode, want)
		}
	}
	if n := followed.Load(); n != 0 {
		t.Fatalf("redirect followed %d times", n)
	}
	if n := elsewhere.conns.Load(); n != 0 {
		t.Fatalf("redirect target contacted %d times", n)
	}
}

func TestNewClientSettings(t *testing.T) {
	c := NewClient(Policy{}, 0)
	if c.Timeout != DefaultTimeout {
		t.Errorf("Timeout %v, want DefaultTimeout", c.Timeout)
	}
	c = NewClient(Policy{}, 3*time.Second)
	if c.Timeout != 3*time.Second {
		t.Errorf("Timeout %v", c.Timeout)
	}
	tr := c.Transport.(*guardedTransport).base
	if tr.Proxy != nil {
		t.Error("Proxy is set: a proxy would dial for us, out of reach of the address check")
	}
	if tr.TLSClientConfig == nil || tr.TLSClientConfig.MinVersion < tls.VersionTLS12 {
		t.Error("TLS minimum below 1.2")
	}
	if tr.TLSClientConfig.InsecureSkipVerify {
		t.Error("certificate verification off")
	}
	if tr.TLSHandshakeTimeout <= 0 || tr.TLSHandshakeTimeout > 3*time.Second ||
		tr.ResponseHeaderTimeout <= 0 || tr.ResponseHeaderTimeout > 3*time.Second {
		t.Errorf("timeouts: handshake %v, headers %v", tr.TLSHandshakeTimeout, tr.ResponseHeaderTimeout)
	}
	if tr.MaxIdleConnsPerHost < 2 || tr.MaxIdleConnsPerHost > 32 {
		t.Errorf("MaxIdleConnsPerHost %d", tr.MaxIdleConnsPerHost)
	}
	if c.CheckRedirect == nil || c.CheckRedirect(nil, nil) != http.ErrUseLastResponse {
		t.Error("CheckRedirect does not stop at the first response")
	}
	c.CloseIdleConnections() // reaches the guarded transport without panicking
}

func TestDialControlRefusesNonTCP(t *testing.T) {
	p := Policy{AllowPrivate: true}
	if err := p.control("udp", "127.0.0.1:53", nil); err == nil {
		t.Error("udp allowed")
	}
	if err := p.control("tcp", "not-an-address", nil); err == nil {
		t.Error("unparsable address allowed")
	}
	if err := p.control("tcp6", "[fe80::1%lo]:80", nil); err != nil {
		t.Errorf("zoned link-local with AllowPrivate: %v", err)
	}
	if err := (Policy{}).control("tcp6", "[fe80::1%lo]:80", nil); err == nil {
		t.Error("zoned link-local allowed by default")
	}
}
