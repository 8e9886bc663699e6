package grpcclient_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/grpcclient"
	"github.com/mnvhq/mnv/services/platform/grpcserver"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/tlstest"
)

// whoAmI is an internal method that answers with the caller the server recognised.
const whoAmI = "/test.Svc/WhoAmI"

// startServer serves whoAmI on a loopback port with transport tr, and returns its address.
func startServer(t *testing.T, tr grpcserver.Transport) string {
	t.Helper()
	s, err := grpcserver.New(grpcserver.Options{Logger: zap.NewNop(), Guard: gatewayOnly("WhoAmI"), Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	lis := listen(t)
	serveTest(t, s, lis, map[string]func(context.Context) string{"WhoAmI": func(ctx context.Context) string {
		name, _ := auth.Caller(ctx)
		return name
	}})
	return lis.Addr().String()
}

// certificate makes a CA named caName and a server certificate it signs for hosts, in dir.
func certificate(t *testing.T, dir, caName string, hosts ...string) tlstest.Files {
	t.Helper()
	ca, err := tlstest.NewCA(caName)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ca.Write(dir, strings.ReplaceAll(caName, " ", "-"), hosts...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func callWhoAmI(conn *grpc.ClientConn) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := new(wrapperspb.StringValue)
	err := conn.Invoke(ctx, whoAmI, wrapperspb.String(""), out)
	return out.GetValue(), err
}

// TestTLSBetweenServices: a server with a certificate speaks TLS only, and a client with the
// CA that signed it reaches it; anything else fails, and the token only ever travels inside TLS.
func TestTLSBetweenServices(t *testing.T) {
	dir := t.TempDir()
	// The server's certificate names the loopback address and a service name, as a Kubernetes
	// certificate names the Service.
	files := certificate(t, dir, "mnv test CA", "mnv-accounts", "127.0.0.1")
	otherFiles := certificate(t, dir, "another CA", "unused")
	notPEM := filepath.Join(dir, "not-pem.crt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsAddr := startServer(t, grpcserver.Transport{CertFile: files.Cert, KeyFile: files.Key})
	_, port, _ := net.SplitHostPort(tlsAddr)

	// byName resolves mnv-accounts:<port> to the loopback server, so the name checked against
	// the certificate is the host part of the target, as with a headless Service.
	byName := func(host string) (string, grpc.DialOption) {
		res := manual.NewBuilderWithScheme("mnvtls")
		res.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: tlsAddr}}})
		return res.Scheme() + ":///" + net.JoinHostPort(host, port), grpc.WithResolvers(res)
	}
	tests := []struct {
		name     string
		target   func() (string, []grpc.DialOption)
		caFile   string
		wantCode codes.Code
	}{
		{"TLS client with the CA, by address", func() (string, []grpc.DialOption) { return tlsAddr, nil }, files.CA, codes.OK},
		{"TLS client with the CA, by service name", func() (string, []grpc.DialOption) {
			target, opt := byName("mnv-accounts")
			return target, []grpc.DialOption{opt}
		}, files.CA, codes.OK},
		{"a name the certificate does not hold", func() (string, []grpc.DialOption) {
			target, opt := byName("mnv-connect")
			return target, []grpc.DialOption{opt}
		}, files.CA, codes.Unavailable},
		{"TLS client with another CA", func() (string, []grpc.DialOption) { return tlsAddr, nil }, otherFiles.CA, codes.Unavailable},
		{"plaintext client", func() (string, []grpc.DialOption) { return tlsAddr, nil }, "", codes.Unavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target, extra := tt.target()
			conn, err := grpcclient.Dial(target, grpcclient.Options{Token: token, CAFile: tt.caFile}, extra...)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			caller, err := callWhoAmI(conn)
			if code := status.Code(err); code != tt.wantCode {
				t.Fatalf("call = %v, want %v", err, tt.wantCode)
			}
			if tt.wantCode == codes.OK && caller != auth.CallerGateway {
				t.Errorf("the server saw caller %q, want the gateway", caller)
			}
		})
	}

	t.Run("a CA file that is not PEM", func(t *testing.T) {
		if _, err := grpcclient.Dial(tlsAddr, grpcclient.Options{Token: token, CAFile: notPEM}); err == nil || !strings.Contains(err.Error(), "MNV_GRPC_TLS_CA") {
			t.Fatalf("Dial = %v, want an error naming MNV_GRPC_TLS_CA", err)
		}
	})
	t.Run("a short token", func(t *testing.T) {
		if _, err := grpcclient.Dial(tlsAddr, grpcclient.Options{Token: "short-token", CAFile: files.CA}); err == nil || !strings.Contains(err.Error(), "MNV_INTERNAL_TOKEN") {
			t.Fatalf("Dial = %v, want an error naming MNV_INTERNAL_TOKEN", err)
		}
	})
	t.Run("a missing CA file", func(t *testing.T) {
		if _, err := grpcclient.Dial(tlsAddr, grpcclient.Options{Token: token, CAFile: filepath.Join(dir, "none.crt")}); err == nil {
			t.Fatal("Dial succeeded")
		}
	})
}

// startRecorder serves, in plaintext, an open method that records the authorization metadata
// each call brought: a server that was not switched to TLS, or anything posing as one.
func startRecorder(t *testing.T) (addr string, seen func() []string) {
	t.Helper()
	var (
		mu  sync.Mutex
		got []string
	)
	s, err := grpcserver.New(grpcserver.Options{
		Logger: zap.NewNop(),
		Guard:  auth.NewGuard(auth.Policy{"/test.Svc/Record": {Credential: principal.None}}, nil, auth.NewServiceTokens(auth.Callers{}, "")),
	})
	if err != nil {
		t.Fatal(err)
	}
	lis := listen(t)
	serveTest(t, s, lis, map[string]func(context.Context) string{"Record": func(ctx context.Context) string {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		got = append(got, md.Get("authorization")...)
		mu.Unlock()
		return ""
	}})
	return lis.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// TestTokenNeverInClear: a client configured for TLS that meets a plaintext server sends it no
// token (the handshake fails first), while a plaintext client does, which shows the recorder
// would see one. A connection without TLS that carries a bearer credential requiring it (what
// a TLS client's options make) is refused before anything is sent.
func TestTokenNeverInClear(t *testing.T) {
	files := certificate(t, t.TempDir(), "mnv test CA", "127.0.0.1")
	addr, seen := startRecorder(t)
	call := func(caFile string) error {
		conn, err := grpcclient.Dial(addr, grpcclient.Options{Token: token, CAFile: caFile})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return conn.Invoke(ctx, "/test.Svc/Record", wrapperspb.String(""), new(wrapperspb.StringValue))
	}

	if err := call(files.CA); status.Code(err) != codes.Unavailable {
		t.Errorf("TLS client to a plaintext server = %v, want Unavailable", err)
	}
	if got := seen(); len(got) != 0 {
		t.Fatalf("a TLS client's token reached a plaintext server: %d authorization value(s)", len(got))
	}
	if err := call(""); err != nil {
		t.Fatalf("plaintext client: %v", err)
	}
	if got := seen(); !slices.Equal(got, []string{"Bearer " + token}) {
		t.Fatalf("the recorder saw %d value(s) from a plaintext client; it cannot tell", len(got))
	}

	_, err := grpc.NewClient(addr, append(mustOptions(t, "", ""), grpc.WithPerRPCCredentials(auth.BearerCredentials{Token: token}))...)
	if err == nil || !strings.Contains(err.Error(), "transport level security") {
		t.Errorf("a TLS-only bearer credential over plaintext: NewClient = %v, want a refusal", err)
	}
}

func mustOptions(t *testing.T, tok, caFile string) []grpc.DialOption {
	t.Helper()
	opts, err := grpcclient.CredentialOptions(tok, caFile)
	if err != nil {
		t.Fatal(err)
	}
	return opts
}

// TestRenewedCertificateServed: a certificate renewed on disk (cert-manager, a rotated Secret)
// is what the next connection gets, without a restart.
func TestRenewedCertificateServed(t *testing.T) {
	dir := t.TempDir()
	files := certificate(t, dir, "first CA", "127.0.0.1")
	secondFiles := certificate(t, dir, "second CA", "127.0.0.1")
	addr := startServer(t, grpcserver.Transport{CertFile: files.Cert, KeyFile: files.Key})
	dial := func(caFile string) (string, error) {
		conn, err := grpcclient.Dial(addr, grpcclient.Options{Token: token, CAFile: caFile})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return callWhoAmI(conn)
	}
	if _, err := dial(files.CA); err != nil {
		t.Fatalf("before the renewal: %v", err)
	}
	// Renew: the second CA's certificate replaces the first, with a later modification time.
	for src, dst := range map[string]string{secondFiles.Cert: files.Cert, secondFiles.Key: files.Key} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Minute)
		if err := os.Chtimes(dst, later, later); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dial(secondFiles.CA); err != nil {
		t.Errorf("after the renewal, a client of the new CA: %v", err)
	}
	if _, err := dial(files.CA); status.Code(err) != codes.Unavailable {
		t.Errorf("after the renewal, a client of the old CA = %v, want Unavailable", err)
	}
}

// TestHealthPortForProbes: with TLS on, the kubelet's gRPC probe (plaintext) reaches the
// health service on its own port, and nothing else is served there.
func TestHealthPortForProbes(t *testing.T) {
	files := certificate(t, t.TempDir(), "mnv test CA", "127.0.0.1")
	healthLis := listen(t)
	healthAddr := healthLis.Addr().String()
	healthLis.Close()
	startServer(t, grpcserver.Transport{CertFile: files.Cert, KeyFile: files.Key, HealthAddr: healthAddr})

	conn, err := grpc.NewClient(healthAddr, mustOptions(t, "", "")...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("plaintext health check = %v, %v; want SERVING", resp, err)
	}
	if _, err := callWhoAmI(conn); status.Code(err) != codes.Unimplemented {
		t.Errorf("an internal method on the health port = %v, want Unimplemented", err)
	}
}
