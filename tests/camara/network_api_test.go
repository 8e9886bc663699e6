package camara_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/testkit/sandboxcamara"
	"github.com/mnvhq/mnv/tests/harness"
)

// The facade identifying the device's line through an operator's own CAMARA API (NETWORK_API),
// through the real processes, with the fake operator as the outside operator: the device opens
// mnv's authorization endpoint, goes to the operator's, comes back to mnv's callback, and the
// client's code and token are mnv's as ever; mnv's /verify asks the operator's with the
// operator's single-use token.

const (
	// networkOperator is the registry's operator reached through its CAMARA API; its devices
	// come from networkAddr (loopback, not 127.0.0.1: that one is the sandbox's).
	networkOperator = "camara-test"
	networkAddr     = "127.0.0.2"
	operatorClient  = "mnv-camara-test"
)

// operator is the fake CAMARA operator of the suite.
var operator *sandboxcamara.Fake

// startOperator starts the fake operator and writes a registry (in a folder of its own) with
// the sandbox first and the operator behind it: header enrichment on 127.0.0.2 (whose header
// the gateway does not pass, so it never identifies a line) and NETWORK_API through the fake.
func startOperator() (*sandboxcamara.Fake, string, error) {
	secret := crypto.NewSecret()
	op, err := sandboxcamara.Start("127.0.0.1:0", sandboxcamara.Options{Clients: []sandboxcamara.Client{{ID: operatorClient, Secret: secret}}})
	if err != nil {
		return nil, "", err
	}
	dir, err := os.MkdirTemp("", "mnv-camara-registry-")
	if err != nil {
		_ = op.Close()
		return nil, "", err
	}
	registry := fmt.Sprintf(`operators:
  - id: sandbox
    name: mnv sandbox
    country: ZZ
    mccMnc: ["001-01"]
    methods: [HEADER_ENRICHMENT]
    sandbox: true
    headerEnrichment:
      trustedRanges: ["127.0.0.1/32", "::1/128"]
      numberHeader: X-Mnv-Sandbox-Msisdn
  - id: %s
    name: CAMARA test operator
    country: GB
    methods: [HEADER_ENRICHMENT, NETWORK_API]
    headerEnrichment:
      trustedRanges: ["%s/32"]
      numberHeader: X-Camara-Test-Msisdn
    camara:
      discoveryUrl: %s
      apiRoot: %s
      clientId: %s
      clientAuth: client_secret_basic
      clientSecretFile: operator.secret
      scopes: [openid, %q, %q]
      hashedPhoneNumber: true
`, networkOperator, networkAddr, op.DiscoveryURL(), op.URL, operatorClient, scopeVerify, scopeShare)
	for name, body := range map[string]string{"operators.yaml": registry, "operator.secret": secret + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			_ = op.Close()
			return nil, "", err
		}
	}
	return op, filepath.Join(dir, "operators.yaml"), nil
}

// onOperator is a device on the operator's network: its requests come from networkAddr.
var onOperator = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.ParseIP(networkAddr)}, Timeout: 5 * time.Second,
	}).DialContext},
}

// networkClient is a client that enabled the operator's NETWORK_API alone.
func networkClient(t *testing.T, balance int64) harness.Client {
	t.Helper()
	c := newClient(t, balance, "VERIFY,NUMBER_SHARE")
	if out, err := suite.Mnvctl(context.Background(), "client", "operators", c.ID, networkOperator+":NETWORK_API"); err != nil {
		t.Fatalf("operators: %v %s", err, out)
	}
	return c
}

// toOperator opens the authorization endpoint from the operator's network and returns where
// mnv sent the device: the operator's authorization URL.
func toOperator(t *testing.T, c harness.Client, scope string) *url.URL {
	t.Helper()
	q := url.Values{
		"response_type": {"code"}, "client_id": {c.ID}, "redirect_uri": {redirectURI},
		"scope": {"openid " + scope}, "state": {"st-42"}, "prompt": {"none"},
	}
	resp, err := onOperator.Get(suite.GatewayURL + "/oauth2/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	u, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil || !strings.HasPrefix(u.String(), operator.URL+"/authorize?") {
		t.Fatalf("authorize: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return u
}

// backToMnv has the device on line follow the operator's authorization URL and returns the
// callback URL the operator sent it back to, unfollowed.
func backToMnv(t *testing.T, opURL *url.URL, line string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, opURL.String(), nil)
	req.Header.Set(sandboxHeader, line)
	resp, err := onOperator.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back := resp.Header.Get("Location")
	if !strings.HasPrefix(back, suite.GatewayURL+"/oauth2/operator/callback?") {
		t.Fatalf("the operator sent the device to %q", back)
	}
	return back
}

// callback follows the operator's redirect into mnv: the client's code, or mnv's answer.
func callback(t *testing.T, back string) (code string, status int) {
	t.Helper()
	resp, err := onOperator.Get(back)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound {
		return "", resp.StatusCode
	}
	u, _ := url.Parse(loc)
	if !strings.HasPrefix(loc, redirectURI) || u.Query().Get("state") != "st-42" || u.Query().Get("code") == "" {
		t.Fatalf("mnv sent the device to %q", loc)
	}
	return u.Query().Get("code"), resp.StatusCode
}

func TestNetworkAPI(t *testing.T) {
	t.Run("the device goes to its operator, with prompt=none, PKCE and mnv's callback", func(t *testing.T) {
		u := toOperator(t, networkClient(t, 10), scopeVerify)
		if q := u.Query(); q.Get("prompt") != "none" || q.Get("code_challenge_method") != "S256" || q.Get("client_id") != operatorClient ||
			q.Get("redirect_uri") != suite.GatewayURL+"/oauth2/operator/callback" || q.Get("state") == "" || q.Get("state") == "st-42" {
			t.Fatalf("operator authorization URL %s", u)
		}
	})
	t.Run("a client without the operator: not sent there, and refused the operator", func(t *testing.T) {
		c := newClient(t, 10, "VERIFY,SANDBOX") // the default set: the sandbox alone
		q := url.Values{"response_type": {"code"}, "client_id": {c.ID}, "redirect_uri": {redirectURI}, "scope": {"openid " + scopeVerify}, "state": {"s"}}
		resp, err := onOperator.Get(suite.GatewayURL + "/oauth2/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || strings.HasPrefix(loc, operator.URL) {
			t.Fatalf("authorize: %d to %q", resp.StatusCode, loc)
		}
		calls := operator.APICalls()
		tok := tokenOf(t, c, authorizeFrom(t, onOperator, c, scopeVerify, "+447700900555"))
		wantError(t, verify(t, tok, `{"phoneNumber":"+447700900555"}`), http.StatusForbidden, "PERMISSION_DENIED")
		if operator.APICalls() != calls {
			t.Error("the operator was asked")
		}
	})

	t.Run("verify: a match, charged once, then the token used twice", func(t *testing.T) {
		c := networkClient(t, 10)
		n, calls := nextNumber(), operator.APICalls()
		tok := tokenOf(t, c, authorizeFrom(t, onOperator, c, scopeVerify, n))
		a := verify(t, tok, fmt.Sprintf(`{"phoneNumber":%q}`, n))
		if a.status != http.StatusOK || a.body["devicePhoneNumberVerified"] != true || a.header.Get("x-correlator") != "b4333c46-49c0-4f62-80d7-f0ef930f1c46" {
			t.Fatalf("%d %v %s", a.status, a.header, a.raw)
		}
		wantError(t, verify(t, tok, fmt.Sprintf(`{"phoneNumber":%q}`, n)), http.StatusUnauthorized, "UNAUTHENTICATED")
		if got := operator.APICalls() - calls; got != 1 || operator.LastCorrelator() != "b4333c46-49c0-4f62-80d7-f0ef930f1c46" {
			t.Errorf("the operator was asked %d times (last x-correlator %q), want once with the client's", got, operator.LastCorrelator())
		}
		if b := balance(t, c); b != 9 {
			t.Errorf("balance %d, want 9", b)
		}
		h := history(t, c)
		if len(h) != 1 || h[0]["status"] != "VERIFIED" || h[0]["serviceType"] != "NETWORK_API" || h[0]["operatorId"] != networkOperator {
			t.Fatalf("history %v", h)
		}
	})
	t.Run("verify: a mismatch, and a hashed number", func(t *testing.T) {
		c := networkClient(t, 10)
		n := nextNumber()
		if a := verify(t, tokenOf(t, c, authorizeFrom(t, onOperator, c, scopeVerify, n)), fmt.Sprintf(`{"phoneNumber":%q}`, nextNumber())); a.status != http.StatusOK || a.body["devicePhoneNumberVerified"] != false {
			t.Fatalf("mismatch: %d %s", a.status, a.raw)
		}
		if a := verify(t, tokenOf(t, c, authorizeFrom(t, onOperator, c, scopeVerify, n)), fmt.Sprintf(`{"hashedPhoneNumber":%q}`, hashOf(n))); a.status != http.StatusOK || a.body["devicePhoneNumberVerified"] != true {
			t.Fatalf("hashed: %d %s", a.status, a.raw)
		}
		if b := balance(t, c); b != 8 {
			t.Errorf("balance %d, want 8: both charged", b)
		}
	})
	t.Run("share: the operator's phoneNumberShare, at its price", func(t *testing.T) {
		c := networkClient(t, 10)
		n := nextNumber()
		a := share(t, tokenOf(t, c, authorizeFrom(t, onOperator, c, scopeShare, n)))
		if a.status != http.StatusOK || a.body["devicePhoneNumber"] != n || len(a.body) != 1 {
			t.Fatalf("%d %s", a.status, a.raw)
		}
		if b := balance(t, c); b != 7 {
			t.Errorf("balance %d, want 7 (VERIFICATION/NUMBER_SHARE=3)", b)
		}
	})

	t.Run("a wrong state, and a state replayed", func(t *testing.T) {
		c := networkClient(t, 10)
		back := backToMnv(t, toOperator(t, c, scopeVerify), nextNumber())
		u, _ := url.Parse(back)
		q := u.Query()
		q.Set("state", "forged-state")
		u.RawQuery = q.Encode()
		if _, status := callback(t, u.String()); status != http.StatusBadRequest {
			t.Errorf("a wrong state: %d", status)
		}
		code, _ := callback(t, back)
		if _, status := callback(t, back); status != http.StatusBadRequest {
			t.Errorf("the state replayed: %d", status)
		}
		if tokenOf(t, c, code) == "" {
			t.Fatal("no token for the real code")
		}
	})
	t.Run("a code of another client", func(t *testing.T) {
		a, b := networkClient(t, 10), networkClient(t, 10)
		code := authorizeFrom(t, onOperator, a, scopeVerify, nextNumber())
		if r := exchange(t, b.ID, b.Secret, code); r.status != http.StatusBadRequest || r.body["error"] != "invalid_grant" {
			t.Fatalf("another client's code: %d %v", r.status, r.body)
		}
		if tokenOf(t, a, code) == "" {
			t.Fatal("own code after the attempt")
		}
	})

	for _, tc := range []struct {
		name      string
		behaviour sandboxcamara.Behaviour
		status    int
		code      string
		history   int
	}{
		{"the operator answers 403: nothing charged", sandboxcamara.Behaviour{NotAuthenticatedByMobileNetwork: true},
			http.StatusForbidden, "NUMBER_VERIFICATION.USER_NOT_AUTHENTICATED_BY_MOBILE_NETWORK", 1},
		{"the operator times out: 503, nothing charged, nothing kept", sandboxcamara.Behaviour{Delay: 3 * time.Second},
			http.StatusServiceUnavailable, "UNAVAILABLE", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := networkClient(t, 10)
			n := nextNumber()
			operator.SetBehaviour(n, tc.behaviour)
			tok := tokenOf(t, c, authorizeFrom(t, onOperator, c, scopeVerify, n))
			wantError(t, verify(t, tok, fmt.Sprintf(`{"phoneNumber":%q}`, n)), tc.status, tc.code)
			if b := balance(t, c); b != 10 {
				t.Errorf("balance %d, want 10", b)
			}
			if h := history(t, c); len(h) != tc.history {
				t.Errorf("history %v, want %d", h, tc.history)
			}
		})
	}
}
