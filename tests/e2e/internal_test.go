package e2e_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	verificationv1 "github.com/mnvhq/mnv/proto/gen/mnv/verification/v1"
	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/grpcclient"
	"github.com/mnvhq/mnv/tests/harness"
)

// dialAs connects to addr of suite s presenting token ("" for none) as its bearer credential.
func dialAs(t *testing.T, s *harness.Suite, addr, token string) *grpc.ClientConn {
	t.Helper()
	opts, err := grpcclient.CredentialOptions(token, s.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestOnlyTheGatewaySpeaksForTheNetwork dials the verification process directly, as another
// mnv service or anyone with an SDK token could, and sends the metadata the gateway sets on
// the capture routes: the client address it resolved and an operator's number header. Only a
// call with the gateway's own token is believed; connect's token (connect talks to the
// internet) or verification's is taken at its socket address with no headers, like a call with
// no token at all. The sockets are loopback, which the sandbox operator trusts, so a believed
// header captures the number and an ignored one captures nothing.
func TestOnlyTheGatewaySpeaksForTheNetwork(t *testing.T) {
	c := newClient(t, 10, "--features", "VERIFY,SANDBOX")
	token := sdkToken(t, suite, c)
	tests := []struct {
		name     string
		token    string
		clientIP string
		want     verificationv1.CaptureStatus
	}{
		{"the gateway's token: believed", suite.Tokens[auth.CallerGateway], "127.0.0.1", verificationv1.CaptureStatus_CAPTURE_STATUS_CAPTURED},
		// Believed means the address too: one outside the sandbox's ranges captures nothing.
		{"the gateway's token, an outside address: believed", suite.Tokens[auth.CallerGateway], "203.0.113.9", verificationv1.CaptureStatus_CAPTURE_STATUS_NO_NETWORK_IDENTITY},
		{"connect's token: not believed", suite.Tokens[auth.CallerConnect], "127.0.0.1", verificationv1.CaptureStatus_CAPTURE_STATUS_NO_NETWORK_IDENTITY},
		{"verification's token: not believed", suite.Tokens[auth.CallerVerification], "127.0.0.1", verificationv1.CaptureStatus_CAPTURE_STATUS_NO_NETWORK_IDENTITY},
		{"no token, an SDK token holder: not believed", "", "127.0.0.1", verificationv1.CaptureStatus_CAPTURE_STATUS_NO_NETWORK_IDENTITY},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := verificationv1.NewVerificationServiceClient(dialAs(t, suite, suite.VerificationAddr, tt.token))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ctx = metadata.AppendToOutgoingContext(ctx,
				"x-sdk-token", token, "x-client-id", c.ID,
				auth.MDClientIP, tt.clientIP,
				auth.MDHeaderPrefix+strings.ToLower(sandboxHeader), nextNumber())
			resp, err := cl.CreateSdkSession(ctx, &verificationv1.CreateSdkSessionRequest{Platform: verificationv1.Platform_PLATFORM_ANDROID})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetStatus() != tt.want {
				t.Errorf("status %v, want %v", resp.GetStatus(), tt.want)
			}
		})
	}
}

// TestInternalMethodsAdmitTheirCallers: each internal method of the processes admits the
// callers that need it and no other, whatever token is valid elsewhere.
func TestInternalMethodsAdmitTheirCallers(t *testing.T) {
	c := newClient(t, 10, "--features", "VERIFY,SANDBOX")
	var tr transaction
	ok(t, "POST", "/v1/api/opportunity", keyOf(c), `{"serviceCode":"VERIFY","metadataId":"callers"}`).decode(t, &tr)
	tests := []struct {
		name  string
		token string
	}{
		{"connect's token", suite.Tokens[auth.CallerConnect]},
		{"verification's token", suite.Tokens[auth.CallerVerification]},
		{"the admin token", suite.AdminToken},
		{"no token", ""},
	}
	// The calls only the gateway makes: a capture, the operator's way back to mnv, and the
	// page's completion of a capture that went through the operator.
	calls := []struct {
		name string
		call func(ctx context.Context, cl verificationv1.VerificationServiceClient) error
	}{
		{"capture", func(ctx context.Context, cl verificationv1.VerificationServiceClient) error {
			ctx = metadata.AppendToOutgoingContext(ctx, auth.MDClientIP, "127.0.0.1", auth.MDHeaderPrefix+strings.ToLower(sandboxHeader), nextNumber())
			_, err := cl.CaptureTransaction(ctx, &verificationv1.CaptureTransactionRequest{TransactionId: tr.TransactionID})
			return err
		}},
		{"the operator's callback", func(ctx context.Context, cl verificationv1.VerificationServiceClient) error {
			code := "a-code"
			_, err := cl.CompleteSessionAuthorization(ctx, &verificationv1.CompleteSessionAuthorizationRequest{State: "a-state", Code: &code})
			return err
		}},
		{"a page's completion", func(ctx context.Context, cl verificationv1.VerificationServiceClient) error {
			_, err := cl.CompleteWebTransaction(ctx, &verificationv1.CompleteWebTransactionRequest{
				TransactionId: tr.TransactionID, Code: "a-code", CodeVerifier: "a-verifier"})
			return err
		}},
	}
	for _, tt := range tests {
		for _, c := range calls {
			t.Run(c.name+" with "+tt.name, func(t *testing.T) {
				cl := verificationv1.NewVerificationServiceClient(dialAs(t, suite, suite.VerificationAddr, tt.token))
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := c.call(ctx, cl); status.Code(err) != codes.Unauthenticated {
					t.Fatalf("%s = %v, want Unauthenticated", c.name, err)
				}
			})
		}
	}
	// Nothing was captured: the transaction still waits for the browser.
	var after transaction
	ok(t, "GET", "/v1/api/opportunity/"+tr.TransactionID, keyOf(c), "").decode(t, &after)
	if after.Status != "PENDING" {
		t.Errorf("transaction %+v after the refused captures", after)
	}
}

// TestSandboxSwitchedOff: a verification without MNV_SANDBOX has no sandbox operator, so a
// request from loopback with the sandbox's number header captures nothing, even for a client
// with the SANDBOX feature; with it on (the main suite) the same request captures.
func TestSandboxSwitchedOff(t *testing.T) {
	s, err := harness.Start(context.Background(), harness.Options{
		Env:        mainEnv,
		ProcessEnv: map[string][]string{"verification": {"MNV_SANDBOX="}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	for _, tt := range []struct {
		name     string
		s        *harness.Suite
		sandbox  bool
		captured string
	}{
		{"sandbox unset", s, false, "NO_NETWORK_IDENTITY"},
		{"sandbox on", suite, true, "CAPTURED"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.s.CreateClient(context.Background(), 10, "--features", "VERIFY,SANDBOX")
			if err != nil {
				t.Fatal(err)
			}
			r := callSuite(t, tt.s, "GET", "/v1/api/operators", keyOf(c), "")
			if r.status != http.StatusOK {
				t.Fatalf("operators: %d %s", r.status, r.raw)
			}
			if listed := strings.Contains(string(r.raw), `"sandbox"`); listed != tt.sandbox {
				t.Errorf("operators %s: sandbox listed %v, want %v", r.raw, listed, tt.sandbox)
			}
			sess := openSession(t, tt.s, c, sdkToken(t, tt.s, c), headers{sandboxHeader: nextNumber()})
			if sess.Status != tt.captured {
				t.Errorf("session from loopback with the sandbox header: %+v, want %s", sess, tt.captured)
			}
		})
	}
}

// TestTLSBetweenProcesses runs every process with TLS on the gRPC hops: the API works end to
// end through the gateway, mnvctl reaches accounts with the CA, and a plaintext caller with a
// valid token gets nowhere.
func TestTLSBetweenProcesses(t *testing.T) {
	s, err := harness.Start(context.Background(), harness.Options{Env: mainEnv, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c, err := s.CreateClient(context.Background(), 10, "--features", "VERIFY,SANDBOX")
	if err != nil {
		t.Fatal(err) // mnvctl over TLS
	}
	n := nextNumber()
	sess := openSession(t, s, c, sdkToken(t, s, c), headers{sandboxHeader: n})
	if sess.Status != "CAPTURED" {
		t.Fatalf("session %+v", sess)
	}
	r := callSuite(t, s, "POST", "/v1/api/verify", keyOf(c), verifyBody(n, *sess.EncryptedMobileNumber))
	var v verification
	r.decode(t, &v)
	if r.status != http.StatusOK || v.Status != "VERIFIED" || v.Charged != 1 {
		t.Fatalf("verify: %d %s", r.status, r.raw)
	}

	// The CAMARA facade's hop is TLS too: the gateway reaches it (discovery, and the API's own
	// answer to a call without a token), a plain request straight to its listener gets the TLS
	// server's refusal, and a client trusting the CA reaches it.
	for path, want := range map[string]int{"/.well-known/openid-configuration": http.StatusOK, "/number-verification/v2/device-phone-number": http.StatusUnauthorized} {
		resp, err := http.Get(s.GatewayURL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || strings.Contains(string(body), "UNAVAILABLE") {
			t.Errorf("facade through the gateway %s: %d %s", path, resp.StatusCode, body)
		}
	}
	resp, err := http.Get("http://" + s.CAMARAAddr + "/.well-known/openid-configuration")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "issuer") {
			t.Errorf("plain HTTP to the facade: %d %s", resp.StatusCode, body)
		}
	}
	caTLS, err := grpcclient.TLSConfig(s.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	direct := &http.Client{Transport: &http.Transport{TLSClientConfig: caTLS}, Timeout: 5 * time.Second}
	if resp, err := direct.Get("https://" + s.CAMARAAddr + "/.well-known/openid-configuration"); err != nil {
		t.Errorf("HTTPS to the facade with the CA: %v", err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusOK {
		t.Errorf("HTTPS to the facade with the CA: %d", resp.StatusCode)
	}

	plain := &harness.Suite{} // no CA: plaintext
	for name, addr := range map[string]string{"accounts": s.AccountsAddr, "verification": s.VerificationAddr, "connect": s.ConnectAddr} {
		cl := verificationv1.NewVerificationServiceClient(dialAs(t, plain, addr, s.Tokens[auth.CallerGateway]))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cl.ListOperators(ctx, &verificationv1.ListOperatorsRequest{})
		cancel()
		if code := status.Code(err); code != codes.Unavailable {
			t.Errorf("plaintext call to %s: %v, want Unavailable", name, err)
		}
	}
}
