package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mnvhq/mnv/gateway/app"
	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/services/accounts/app/apptest"
	connecttest "github.com/mnvhq/mnv/services/connect/app/apptest"
	"github.com/mnvhq/mnv/services/platform/auth/authtest"
)

// TestTooLargeBodyIsAnswered writes a 2 MiB body over a raw connection before reading
// anything, as simple clients do, at the pace of a real network (on loopback the whole body
// would sit in socket buffers before the server could close): it must read the 413 envelope,
// every time, rather than a connection reset (the gateway answered early and closed on unread
// data).
func TestTooLargeBodyIsAnswered(t *testing.T) {
	s := start(t)
	c := s.accounts.CreateClient(t, 0)
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"name":"` + strings.Repeat("a", 2<<20) + `"}`
	chunked := func(b string) string {
		var out strings.Builder
		for len(b) > 0 {
			n := min(len(b), 32<<10)
			fmt.Fprintf(&out, "%x\r\n%s\r\n", n, b[:n])
			b = b[n:]
		}
		return out.String() + "0\r\n\r\n"
	}
	tests := []struct {
		name    string
		framing string // the header that frames the body
		wire    string // the body as written
	}{
		{"with Content-Length", fmt.Sprintf("Content-Length: %d", len(body)), body},
		{"chunked", "Transfer-Encoding: chunked", chunked(body)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// It was intermittent: one success proves little.
			for i := range 5 {
				conn, err := net.Dial("tcp", u.Host)
				if err != nil {
					t.Fatal(err)
				}
				_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
				head := "POST /v1/api/me/api-keys HTTP/1.1\r\nHost: " + u.Host + "\r\nX-API-KEY: " + c.APIKey +
					"\r\nContent-Type: application/json\r\n" + tt.framing + "\r\n\r\n"
				if err := writeSlowly(conn, head+tt.wire); err != nil {
					conn.Close()
					t.Fatalf("attempt %d: writing the body: %v", i+1, err)
				}
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					conn.Close()
					t.Fatalf("attempt %d: reading the answer: %v", i+1, err)
				}
				raw, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				conn.Close()
				var env struct {
					Messages []struct {
						Code string `json:"code"`
					} `json:"messages"`
				}
				if err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge || json.Unmarshal(raw, &env) != nil ||
					len(env.Messages) != 1 || env.Messages[0].Code != "PAYLOAD_TOO_LARGE" {
					t.Fatalf("attempt %d: %d %s (%v), want the 413 envelope", i+1, resp.StatusCode, raw, err)
				}
			}
		})
	}
}

// writeSlowly writes data in 64 KiB pieces, 20 ms apart: about 2 MiB in 0.6 s.
func writeSlowly(w io.Writer, data string) error {
	for len(data) > 0 {
		n := min(len(data), 64<<10)
		if _, err := io.WriteString(w, data[:n]); err != nil {
			return err
		}
		data = data[n:]
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// refusingAddr is a loopback address nothing listens on: connections are refused at once.
func refusingAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// silentAddr accepts connections and never answers, like a frozen process or a host whose
// packets vanish: gRPC waits for its handshake up to its 20-second connect timeout.
func silentAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	t.Cleanup(func() { lis.Close(); <-done })
	return lis.Addr().String()
}

// TestBackendDown runs the gateway with verification away, refusing connections or silent:
// the gateway stays ready and says which service is away, the routes of the services that
// work answer, the routes of the one that is away answer 503 in the envelope within a second
// or so (not after gRPC's 20-second connect timeout), and the failure's log line names the
// route, not the path (a capture's path holds the transaction id, the flow's capability).
func TestBackendDown(t *testing.T) {
	acc := apptest.Start(t)
	con := connecttest.Start(t, acc.Addr, authtest.ConnectToken, nil)
	c := acc.CreateClient(t, 10, accountsv1.Feature_FEATURE_VERIFY, accountsv1.Feature_FEATURE_SANDBOX, accountsv1.Feature_FEATURE_CONNECT)
	const txID = "6f1c2a3b-4d5e-4f60-8172-93a4b5c6d7e8"
	routes := []struct {
		name       string
		call       call
		wantStatus int
		wantCode   string // of the error envelope
	}{
		{"accounts answers", call{method: "GET", path: "/v1/api/clients", headers: keyHeaders(c)}, http.StatusOK, ""},
		{"connect answers", call{method: "GET", path: "/v1/api/me/connect/profiles", headers: meHeaders(c)}, http.StatusOK, ""},
		{"verify is unavailable", call{method: "POST", path: "/v1/api/verify", headers: keyHeaders(c),
			body: `{"mobileNumber":"+971501234567","encryptedMobileNumber":"AAAA","operatorId":"sandbox","serviceType":"HEADER_ENRICHMENT"}`},
			http.StatusServiceUnavailable, "UNAVAILABLE"},
		{"the capture is unavailable", call{method: "POST", path: "/v1/api/web/transactions/" + txID + "/capture",
			headers: map[string]string{"Origin": "https://shop.example.com"}, body: `{}`}, http.StatusServiceUnavailable, "UNAVAILABLE"},
	}
	for _, away := range []struct {
		name string
		addr func(*testing.T) string
	}{
		{"refusing", refusingAddr},
		{"silent", silentAddr},
	} {
		t.Run(away.name, func(t *testing.T) {
			cfg := app.DefaultConfig()
			cfg.AccountsAddr, cfg.VerificationAddr, cfg.ConnectAddr = acc.Addr, away.addr(t), con.Addr
			cfg.InternalToken = authtest.GatewayToken
			core, logs := observer.New(zapcore.DebugLevel)
			reg := prometheus.NewRegistry()
			g, err := app.New(context.Background(), cfg, zap.New(core), reg, reg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := g.Close(); err != nil {
					t.Error(err)
				}
			})
			srv := httptest.NewServer(g.Handler())
			t.Cleanup(srv.Close)
			s := &stack{accounts: acc, handler: g.Handler(), url: srv.URL}

			// The states come from checks every second: wait for the first ones.
			const listing = `"backends":{"accounts":"SERVING","connect":"SERVING","verification":"UNREACHABLE"}`
			waitFor(t, "readyz to list verification as unreachable", func() bool {
				ready := s.do(t, call{method: "GET", path: "/readyz"})
				if ready.status != http.StatusOK {
					t.Fatalf("readyz with verification away: %d %s", ready.status, ready.body)
				}
				return strings.Contains(string(ready.body), listing)
			})
			for _, tt := range routes {
				t.Run(tt.name, func(t *testing.T) {
					began := time.Now()
					a := s.do(t, tt.call)
					if took := time.Since(began); took > 3*time.Second {
						t.Errorf("answered in %v, want within a second or so", took)
					}
					if a.status != tt.wantStatus {
						t.Fatalf("%d %s, want %d", a.status, a.body, tt.wantStatus)
					}
					if tt.wantCode == "" {
						return
					}
					var env struct {
						Success  bool `json:"success"`
						Messages []struct {
							Code      string `json:"code"`
							Technical bool   `json:"technical"`
						} `json:"messages"`
					}
					if json.Unmarshal(a.body, &env) != nil || env.Success || len(env.Messages) != 1 || env.Messages[0].Code != tt.wantCode || !env.Messages[0].Technical {
						t.Errorf("body %s, want the %s envelope", a.body, tt.wantCode)
					}
				})
			}

			t.Run("failure logs name the route, never the path", func(t *testing.T) {
				found := false
				for _, e := range logs.FilterMessage("request failed").All() {
					found = found || e.ContextMap()["route"] == "/v1/api/web/transactions/{transaction_id=*}/capture"
				}
				if !found {
					t.Errorf("no failure line names the capture route: %v", logs.FilterMessage("request failed").All())
				}
				for _, e := range logs.All() {
					if line := fmt.Sprint(e.Message, e.ContextMap()); strings.Contains(line, txID) {
						t.Errorf("a log line holds the transaction id: %s", line)
					}
				}
			})
		})
	}
}
