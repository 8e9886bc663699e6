package camaraproxy_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/gateway/internal/camaraproxy"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/grpcclient"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
	"github.com/mnvhq/mnv/services/platform/tlstest"
)

const gatewayToken = "gateway-token-0123456789abcdef0123456789"

// facade stands for verification's CAMARA listener: an HTTP server on a real socket, TLS with
// the certificate the gRPC server's transport tr loads, when tr is given. It counts the requests
// that reach it and answers what it was given.
type facade struct {
	addr   string
	served atomic.Int64
}

func startFacade(t *testing.T, tr *grpcserver.Transport) *facade {
	t.Helper()
	f := &facade{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = lis.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.served.Add(1)
		w.Header().Set("X-Seen-Tls", map[bool]string{true: "yes", false: "no"}[r.TLS != nil])
		w.Header().Set("X-Seen-Authorization", r.Header.Get("Authorization"))
		w.Header().Set("X-Seen-Caller", r.Header.Get(auth.HTTPCallerHeader))
		w.WriteHeader(http.StatusOK)
	})}
	serve := srv.Serve
	if tr != nil {
		if srv.TLSConfig, err = tr.TLSConfig(); err != nil {
			t.Fatal(err)
		}
		serve = func(l net.Listener) error { return srv.ServeTLS(l, "", "") }
	}
	go func() {
		if err := serve(lis); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("facade: %v", err)
		}
	}()
	t.Cleanup(func() { srv.Close() })
	return f
}

// TestTLSToTheFacade: with TLS on, the proxy reaches the facade over TLS verified against the
// services' CA, carrying the client's Authorization and the gateway's token; a proxy or client
// without TLS, or trusting another CA, or facing a certificate for another host, gets nothing
// through, and nothing reaches the facade's handler.
func TestTLSToTheFacade(t *testing.T) {
	dir := t.TempDir()
	ca, err := tlstest.NewCA("mnv test CA")
	if err != nil {
		t.Fatal(err)
	}
	files, err := ca.Write(dir, "verification", "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	otherCA, err := tlstest.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := otherCA.Write(dir, "other", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	elsewhere, err := ca.Write(dir, "elsewhere", "mnv-verification")
	if err != nil {
		t.Fatal(err)
	}
	trusting := func(caFile string) *tls.Config {
		c, err := grpcclient.TLSConfig(caFile)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	tests := []struct {
		name     string
		facade   *grpcserver.Transport
		proxyTLS *tls.Config
		// want is the status the client gets: 200 from the facade, 503 when the proxy could not
		// reach it, 400 when the TLS listener refused a plain request.
		want int
	}{
		{"TLS on both ends", &grpcserver.Transport{CertFile: files.Cert, KeyFile: files.Key}, trusting(files.CA), http.StatusOK},
		{"TLS off on both ends", nil, nil, http.StatusOK},
		{"a plain proxy to a TLS facade", &grpcserver.Transport{CertFile: files.Cert, KeyFile: files.Key}, nil, http.StatusBadRequest},
		{"a TLS proxy to a plain facade", nil, trusting(files.CA), http.StatusServiceUnavailable},
		{"a facade certificate of another CA", &grpcserver.Transport{CertFile: other.Cert, KeyFile: other.Key}, trusting(files.CA), http.StatusServiceUnavailable},
		{"a facade certificate for another host", &grpcserver.Transport{CertFile: elsewhere.Cert, KeyFile: elsewhere.Key}, trusting(files.CA), http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := startFacade(t, tt.facade)
			proxy := camaraproxy.New(f.addr, gatewayToken, nil, tt.proxyTLS, zaptest.NewLogger(t))
			front := httptest.NewServer(camaraproxy.KeepAuthorization(proxy))
			defer front.Close()
			req, _ := http.NewRequest(http.MethodPost, front.URL+"/oauth2/token", strings.NewReader("grant_type=authorization_code"))
			req.SetBasicAuth("client", "mnvsec_secret")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("%d %s, want %d", resp.StatusCode, body, tt.want)
			}
			if tt.want != http.StatusOK {
				if tt.want == http.StatusServiceUnavailable && !strings.Contains(string(body), `"code":"UNAVAILABLE"`) {
					t.Fatalf("body %s", body)
				}
				if n := f.served.Load(); n != 0 {
					t.Fatalf("the facade's handler served %d requests", n)
				}
				return
			}
			wantTLS := map[bool]string{true: "yes", false: "no"}[tt.facade != nil]
			if resp.Header.Get("X-Seen-Tls") != wantTLS ||
				!strings.HasPrefix(resp.Header.Get("X-Seen-Authorization"), "Basic ") || resp.Header.Get("X-Seen-Caller") != gatewayToken {
				t.Fatalf("%d %v", resp.StatusCode, resp.Header)
			}
		})
	}

	t.Run("a plain client straight to the TLS listener", func(t *testing.T) {
		f := startFacade(t, &grpcserver.Transport{CertFile: files.Cert, KeyFile: files.Key})
		req, _ := http.NewRequest(http.MethodGet, "http://"+f.addr+"/number-verification/v2/device-phone-number", nil)
		req.Header.Set(auth.HTTPCallerHeader, gatewayToken)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Fatalf("plain HTTP answered %d", resp.StatusCode)
			}
		}
		if n := f.served.Load(); n != 0 {
			t.Fatalf("the facade's handler served %d plain requests", n)
		}
		// The same listener answers a client that trusts the CA.
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: trusting(files.CA)}}
		resp, err = c.Get("https://" + f.addr + "/number-verification/v2/device-phone-number")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || f.served.Load() != 1 {
			t.Fatalf("TLS client: %d, served %d", resp.StatusCode, f.served.Load())
		}
	})
}
