package e2e_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/testkit/sandboxcamara"
	"github.com/mnvhq/mnv/tests/harness"
)

// camaraOperator is the NETWORK_API operator of TestCAMARAConsumer's registry, reached through
// a fake CAMARA operator with private_key_jwt.
const camaraOperator = "camara-test"

type camaraSession struct {
	session
	AuthorizationURL *string `json:"authorizationUrl"`
}

// startCAMARASuite starts a fake CAMARA operator and a suite whose registry lists it.
func startCAMARASuite(t *testing.T) (*harness.Suite, *sandboxcamara.Fake) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	fake, err := sandboxcamara.Start("127.0.0.1:0", sandboxcamara.Options{Clients: []sandboxcamara.Client{{ID: "mnv-e2e", PublicKey: &key.PublicKey}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mnv.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	registry := filepath.Join(dir, "operators.yaml")
	if err := os.WriteFile(registry, []byte(fmt.Sprintf(`operators:
  - id: %s
    name: CAMARA test operator
    country: GB
    methods: [NETWORK_API]
    camara:
      discoveryUrl: %s
      apiRoot: %s
      clientId: mnv-e2e
      clientAuth: private_key_jwt
      privateKeyFile: mnv.pem
      keyId: e2e
      hashedPhoneNumber: true
`, camaraOperator, fake.DiscoveryURL(), fake.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := harness.Start(context.Background(), harness.Options{
		Env: mainEnv,
		ProcessEnv: map[string][]string{"verification": {
			"MNV_OPERATORS_FILE=" + registry, "MNV_NETWORK_API_TIMEOUT=1s",
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	fake.AddRedirectURI("mnv-e2e", s.GatewayURL+"/v1/api/sdk/session/callback")
	return s, fake
}

// TestCAMARAConsumer: the NETWORK_API flow through real processes and a fake CAMARA operator.
// The app opens a session and gets an authorization URL; the device follows it over "mobile
// data" (the fake reads its line from the sandbox header), the operator sends it back to mnv's
// callback, which answers the sealed session; the backend verifies it, and mnv asks the
// operator's /verify with the session's single-use token.
func TestCAMARAConsumer(t *testing.T) {
	s, fake := startCAMARASuite(t)
	c, err := s.CreateClient(context.Background(), 10, "--features", "VERIFY")
	if err != nil {
		t.Fatal(err)
	}
	// Operators are enabled per client: this one may use the operator's network API.
	if out, err := s.Mnvctl(context.Background(), "client", "operators", c.ID, camaraOperator+":NETWORK_API"); err != nil {
		t.Fatalf("enable the operator: %v %s", err, out)
	}
	token := sdkToken(t, s, c)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	// authorizeAs opens a session of client c (with its SDK token) and has the device on line
	// msisdn ("" off the mobile network) follow its authorization URL; it returns the callback
	// path the operator sent it to. authorize is c's.
	authorizeAs := func(t *testing.T, c harness.Client, token, msisdn string) (camaraSession, string) {
		t.Helper()
		r := callSuite(t, s, "POST", "/v1/api/sdk/session", headers{"X-Sdk-Token": token, "X-Client-Id": c.ID},
			`{"platform":"ANDROID","operatorId":"`+camaraOperator+`"}`)
		if r.status != http.StatusOK {
			t.Fatalf("session: %d %s", r.status, r.raw)
		}
		var sess camaraSession
		r.decode(t, &sess)
		if sess.Status != "AUTHORIZATION_PENDING" || sess.AuthorizationURL == nil || sess.EncryptedMobileNumber != nil {
			t.Fatalf("session %s", r.raw)
		}
		u, _ := url.Parse(*sess.AuthorizationURL)
		if q := u.Query(); q.Get("prompt") != "none" || q.Get("code_challenge_method") != "S256" || q.Get("state") == "" ||
			q.Get("redirect_uri") != s.GatewayURL+"/v1/api/sdk/session/callback" || !strings.HasPrefix(*sess.AuthorizationURL, fake.URL+"/authorize?") {
			t.Fatalf("authorization URL %s", *sess.AuthorizationURL)
		}
		req, _ := http.NewRequest("GET", *sess.AuthorizationURL, nil)
		if msisdn != "" {
			req.Header.Set(sandboxHeader, msisdn)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, s.GatewayURL+"/v1/api/sdk/session/callback?") {
			t.Fatalf("authorize: %d to %q", resp.StatusCode, loc)
		}
		return sess, strings.TrimPrefix(loc, s.GatewayURL)
	}
	authorize := func(t *testing.T, msisdn string) (camaraSession, string) { return authorizeAs(t, c, token, msisdn) }
	// complete follows the callback and returns the sealed session.
	complete := func(t *testing.T, callback string) session {
		t.Helper()
		r := callSuite(t, s, "GET", callback, nil, "")
		if r.status != http.StatusOK {
			t.Fatalf("callback: %d %s", r.status, r.raw)
		}
		var out session
		r.decode(t, &out)
		if out.EncryptedMobileNumber == nil || out.OperatorID == nil || *out.OperatorID != camaraOperator {
			t.Fatalf("callback answered %s", r.raw)
		}
		return out
	}
	verifyAs := func(t *testing.T, c harness.Client, number, blob string) response {
		t.Helper()
		return callSuite(t, s, "POST", "/v1/api/verify", keyOf(c), fmt.Sprintf(
			`{"mobileNumber":%q,"encryptedMobileNumber":%q,"operatorId":%q,"serviceType":"NETWORK_API"}`, number, blob, camaraOperator))
	}
	verifyNetwork := func(t *testing.T, number, blob string) response { return verifyAs(t, c, number, blob) }
	decided := func(t *testing.T, r response, status, reason string, charged int64) verification {
		t.Helper()
		if r.status != http.StatusOK {
			t.Fatalf("verify: %d %s", r.status, r.raw)
		}
		var v verification
		r.decode(t, &v)
		if v.Status != status || v.Reason != reason || v.Charged != charged || v.ServiceType != "NETWORK_API" || v.OperatorID != camaraOperator {
			t.Fatalf("verify answered %s, want %s/%s charged %d", r.raw, status, reason, charged)
		}
		return v
	}

	t.Run("VERIFIED, and the blob and the state used twice", func(t *testing.T) {
		n := nextNumber()
		before, calls := balanceOf(t, s, c), fake.APICalls()
		sess, callback := authorize(t, n)
		got := complete(t, callback)
		if got.SessionID != sess.SessionID || got.Status != "CAPTURED" {
			t.Fatalf("callback session %+v, opened %+v", got, sess.session)
		}
		// The callback is single use: its state is spent.
		if r := callSuite(t, s, "GET", callback, nil, ""); r.status != http.StatusBadRequest || r.code() != "INVALID_ARGUMENT" {
			t.Errorf("second callback: %d %s", r.status, r.raw)
		}
		decided(t, verifyNetwork(t, n, *got.EncryptedMobileNumber), "VERIFIED", "NUMBER_MATCH", 1)
		// The token is single use, and so is the blob: the second verify never reaches the
		// operator and costs nothing.
		if r := verifyNetwork(t, n, *got.EncryptedMobileNumber); r.status != http.StatusConflict || r.code() != "ALREADY_USED" {
			t.Errorf("second verify: %d %s", r.status, r.raw)
		}
		if b := balanceOf(t, s, c); b != before-1 {
			t.Errorf("balance %d, want %d", b, before-1)
		}
		if n := fake.APICalls() - calls; n != 1 {
			t.Errorf("the operator's API was called %d times, want 1", n)
		}
	})

	t.Run("NOT_VERIFIED", func(t *testing.T) {
		before := balanceOf(t, s, c)
		_, callback := authorize(t, nextNumber())
		got := complete(t, callback)
		decided(t, verifyNetwork(t, nextNumber(), *got.EncryptedMobileNumber), "NOT_VERIFIED", "NUMBER_MISMATCH", 1)
		if b := balanceOf(t, s, c); b != before-1 {
			t.Errorf("balance %d, want %d", b, before-1)
		}
	})

	t.Run("wrong state", func(t *testing.T) {
		_, callback := authorize(t, nextNumber())
		u, _ := url.Parse(callback)
		q := u.Query()
		for _, bad := range []string{"", "forged", q.Get("state") + "x"} {
			r := callSuite(t, s, "GET", "/v1/api/sdk/session/callback?"+url.Values{"state": {bad}, "code": {q.Get("code")}}.Encode(), nil, "")
			if r.status != http.StatusBadRequest || r.code() != "INVALID_ARGUMENT" || r.env.Data != nil && string(r.env.Data) != "null" {
				t.Errorf("state %q: %d %s", bad, r.status, r.raw)
			}
		}
		// The real state still completes the session: a forged one spent nothing.
		complete(t, callback)
	})

	t.Run("off the mobile network: UNDETERMINED, free", func(t *testing.T) {
		before := balanceOf(t, s, c)
		_, callback := authorize(t, "")
		if !strings.Contains(callback, "error=login_required") {
			t.Fatalf("callback %s", callback)
		}
		got := complete(t, callback)
		if got.Status != "NO_NETWORK_IDENTITY" {
			t.Errorf("status %s", got.Status)
		}
		decided(t, verifyNetwork(t, nextNumber(), *got.EncryptedMobileNumber), "UNDETERMINED", "NO_NETWORK_IDENTITY", 0)
		if b := balanceOf(t, s, c); b != before {
			t.Errorf("balance %d, want %d", b, before)
		}
	})

	t.Run("operator times out: 503, nothing charged, retryable", func(t *testing.T) {
		n := nextNumber()
		fake.SetBehaviour(n, sandboxcamara.Behaviour{Delay: 3 * time.Second})
		before := balanceOf(t, s, c)
		_, callback := authorize(t, n)
		got := complete(t, callback)
		if r := verifyNetwork(t, n, *got.EncryptedMobileNumber); r.status != http.StatusServiceUnavailable || r.code() != "UNAVAILABLE" {
			t.Fatalf("verify against a slow operator: %d %s", r.status, r.raw)
		}
		if b := balanceOf(t, s, c); b != before {
			t.Errorf("balance %d after a timeout, want %d", b, before)
		}
		// A 5xx is the same, and the session is still unused: once the operator answers, the
		// same blob verifies.
		fake.SetBehaviour(n, sandboxcamara.Behaviour{Status5xx: 502})
		if r := verifyNetwork(t, n, *got.EncryptedMobileNumber); r.status != http.StatusServiceUnavailable {
			t.Fatalf("verify against a failing operator: %d %s", r.status, r.raw)
		}
		fake.SetBehaviour(n, sandboxcamara.Behaviour{})
		decided(t, verifyNetwork(t, n, *got.EncryptedMobileNumber), "VERIFIED", "NUMBER_MATCH", 1)
		if b := balanceOf(t, s, c); b != before-1 {
			t.Errorf("balance %d, want %d", b, before-1)
		}
	})

	t.Run("operator answers 403: UNDETERMINED, free", func(t *testing.T) {
		n := nextNumber()
		fake.SetBehaviour(n, sandboxcamara.Behaviour{NotAuthenticatedByMobileNetwork: true})
		before := balanceOf(t, s, c)
		_, callback := authorize(t, n)
		got := complete(t, callback)
		decided(t, verifyNetwork(t, n, *got.EncryptedMobileNumber), "UNDETERMINED", "USER_NOT_AUTHENTICATED_BY_MOBILE_NETWORK", 0)
		if b := balanceOf(t, s, c); b != before {
			t.Errorf("balance %d, want %d", b, before)
		}
	})

	t.Run("refused for balance, retried after a top-up: the operator's answer, charged once", func(t *testing.T) {
		// The refused verify spent the operator's single-use token: the retry gets the answer
		// the operator gave then, not EXPIRED, and the operator is not asked again.
		ctx := context.Background()
		poor, err := s.CreateClient(ctx, 0, "--features", "VERIFY")
		if err != nil {
			t.Fatal(err)
		}
		if out, err := s.Mnvctl(ctx, "client", "operators", poor.ID, camaraOperator+":NETWORK_API"); err != nil {
			t.Fatalf("enable the operator: %v %s", err, out)
		}
		n := nextNumber()
		_, callback := authorizeAs(t, poor, sdkToken(t, s, poor), n)
		got := complete(t, callback)
		calls := fake.APICalls()
		if r := verifyAs(t, poor, n, *got.EncryptedMobileNumber); r.status != http.StatusPaymentRequired || r.code() != "INSUFFICIENT_BALANCE" {
			t.Fatalf("verify without balance: %d %s", r.status, r.raw)
		}
		if out, err := s.Mnvctl(ctx, "client", "top-up", poor.ID, "--amount", "5", "--reference", "h4-retry"); err != nil {
			t.Fatalf("top-up: %v %s", err, out)
		}
		r := verifyAs(t, poor, n, *got.EncryptedMobileNumber)
		if r.status != http.StatusOK {
			t.Fatalf("retry: %d %s", r.status, r.raw)
		}
		var v verification
		r.decode(t, &v)
		if v.Status != "VERIFIED" || v.Reason != "NUMBER_MATCH" || v.Charged != 1 || v.ServiceType != "NETWORK_API" {
			t.Fatalf("retry answered %s", r.raw)
		}
		if b := balanceOf(t, s, poor); b != 4 {
			t.Errorf("balance %d, want 4 (charged once)", b)
		}
		if n := fake.APICalls() - calls; n != 1 {
			t.Errorf("the operator's /verify was called %d times, want 1", n)
		}
		// The refused attempt is not a verification; the retry is the one kept.
		var kept struct {
			TotalItems int `json:"totalItems"`
		}
		if r := callSuite(t, s, "GET", "/v1/api/verifications?size=10", keyOf(poor), ""); r.status != http.StatusOK {
			t.Errorf("history: %d %s", r.status, r.raw)
		} else if r.decode(t, &kept); kept.TotalItems != 1 {
			t.Errorf("%d verifications kept, want 1: %s", kept.TotalItems, r.raw)
		}
	})

	t.Run("a browser capture: the callback sends the browser back to its page", func(t *testing.T) {
		const shop = "https://shop.example"
		if r := callSuite(t, s, "PUT", "/v1/api/me/web-origins", meOf(c), `{"origins":["`+shop+`"]}`); r.status != http.StatusOK {
			t.Fatalf("web origins: %d %s", r.status, r.raw)
		}
		r := callSuite(t, s, "POST", "/v1/api/opportunity", keyOf(c), `{"serviceCode":"VERIFY","metadataId":"order-9"}`)
		var tr struct {
			TransactionID string `json:"transactionId"`
		}
		r.decode(t, &tr)
		page, verifier := shop+"/checkout/step-2", "the page's verifier, kept in its tab"
		sum := sha256.Sum256([]byte(verifier))
		capture := "/v1/api/web/transactions/" + tr.TransactionID + "/capture?" + url.Values{"operatorId": {camaraOperator}, "returnUrl": {page},
			"codeChallenge": {base64.RawURLEncoding.EncodeToString(sum[:])}}.Encode()
		r = callSuite(t, s, "POST", capture, headers{"Origin": shop}, "")
		var captured struct {
			Status           string  `json:"status"`
			AuthorizationURL *string `json:"authorizationUrl"`
		}
		r.decode(t, &captured)
		if r.status != http.StatusOK || captured.Status != "AUTHORIZATION_PENDING" || captured.AuthorizationURL == nil {
			t.Fatalf("capture: %d %s", r.status, r.raw)
		}
		n := nextNumber()
		req, _ := http.NewRequest("GET", *captured.AuthorizationURL, nil)
		req.Header.Set(sandboxHeader, n)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// The browser at mnv's callback: sent back to its page with the transaction and a
		// one-time code in the fragment, and no Referer for the page.
		resp, err = noRedirect.Get(resp.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		back, fragment, _ := strings.Cut(resp.Header.Get("Location"), "#")
		f, _ := url.ParseQuery(fragment)
		if resp.StatusCode != http.StatusSeeOther || back != page || f.Get("mnv_transaction") != tr.TransactionID || f.Get("mnv_code") == "" ||
			resp.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Fatalf("callback: %d to %q (Referrer-Policy %q)", resp.StatusCode, resp.Header.Get("Location"), resp.Header.Get("Referrer-Policy"))
		}
		// Not captured until the page completes it, with the code and its verifier.
		var before session
		st := callSuite(t, s, "GET", "/v1/api/opportunity/"+tr.TransactionID, keyOf(c), "")
		if st.decode(t, &before); before.Status != "AUTHORIZATION_PENDING" || before.EncryptedMobileNumber != nil {
			t.Fatalf("before the completion the backend reads %s", st.raw)
		}
		complete := "/v1/api/web/transactions/" + tr.TransactionID + "/complete"
		if r := callSuite(t, s, "POST", complete, headers{"Origin": shop}, `{"code":"`+f.Get("mnv_code")+`","codeVerifier":"another"}`); r.status != http.StatusBadRequest {
			t.Fatalf("completion with another verifier: %d %s", r.status, r.raw)
		}
		r = callSuite(t, s, "POST", complete, headers{"Origin": shop}, `{"code":"`+f.Get("mnv_code")+`","codeVerifier":"`+verifier+`"}`)
		var read session
		r.decode(t, &read)
		if r.status != http.StatusOK || read.Status != "CAPTURED" || read.EncryptedMobileNumber == nil {
			t.Fatalf("the page completes: %d %s", r.status, r.raw)
		}
		decided(t, verifyNetwork(t, n, *read.EncryptedMobileNumber), "VERIFIED", "NUMBER_MATCH", 1)
	})

	t.Run("a NETWORK_API blob is not a header-enrichment one", func(t *testing.T) {
		_, callback := authorize(t, nextNumber())
		got := complete(t, callback)
		r := callSuite(t, s, "POST", "/v1/api/verify", keyOf(c), fmt.Sprintf(
			`{"mobileNumber":%q,"encryptedMobileNumber":%q,"operatorId":%q,"serviceType":"HEADER_ENRICHMENT"}`, nextNumber(), *got.EncryptedMobileNumber, camaraOperator))
		if r.status != http.StatusBadRequest {
			t.Errorf("verify as header enrichment: %d %s", r.status, r.raw)
		}
	})
}
