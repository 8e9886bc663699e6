// Package camara_test drives mnv's CAMARA facade (mnv as a CAMARA Number Verification
// provider) through the real binaries: the device's authorization over the sandbox operator's
// header enrichment, or through an operator's own CAMARA API (network_api_test.go, the fake
// operator as the outside one), the client's code exchange with its client secret, and the two
// operations.
// Every scenario of CAMARA's own test definitions (code/Test_definitions/
// number-verification-phoneNumberVerify.feature and -phoneNumberShare.feature, v2.1) is a
// subtest named after its id, followed by attacker cases.
package camara_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mnvhq/mnv/tests/harness"
)

var suite *harness.Suite

// tokenTTL is short, so that the expired-token scenarios wait seconds, not five minutes.
const tokenTTL = 3 * time.Second

const (
	sandboxHeader = "X-Mnv-Sandbox-Msisdn"
	redirectURI   = "http://127.0.0.1:7788/camara/callback"
	origin        = "http://127.0.0.1:7788"
	scopeVerify   = "number-verification:verify"
	scopeShare    = "number-verification:device-phone-number:read"
)

func TestMain(m *testing.M) {
	harness.ExitIfShort("camara")
	// The registry: the sandbox (header enrichment on loopback), and behind it an operator
	// reached through its CAMARA API (the fake), whose devices come from 127.0.0.2 alone.
	op, registry, err := startOperator()
	if err != nil {
		fmt.Fprintln(os.Stderr, "camara:", err)
		os.Exit(1)
	}
	s, err := harness.Start(context.Background(), harness.Options{
		Env: []string{
			"MNV_CAMARA_TOKEN_TTL=" + tokenTTL.String(), "MNV_IP_RATE=0", "MNV_AUTH_FAILURE_RATE=0",
			"MNV_NUMBER_ATTEMPTS_PER_HOUR=100000", "MNV_PRICES=VERIFICATION=1,VERIFICATION/NUMBER_SHARE=3",
		},
		ProcessEnv: map[string][]string{"verification": {"MNV_OPERATORS_FILE=" + registry, "MNV_NETWORK_API_TIMEOUT=1s"}},
	})
	if err != nil {
		_ = op.Close()
		fmt.Fprintln(os.Stderr, "camara:", err)
		os.Exit(1)
	}
	suite, operator = s, op
	// The facade's callback is known now: register it with the operator.
	op.AddRedirectURI(operatorClient, s.GatewayURL+"/oauth2/operator/callback")
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "camara: process logs are in %s\n", s.LogDir)
	}
	s.Stop()
	_ = op.Close()
	os.RemoveAll(filepath.Dir(registry))
	os.Exit(code)
}

var numberSeq atomic.Int64

func nextNumber() string { return fmt.Sprintf("+97155%07d", 2000000+numberSeq.Add(1)) }

// noRedirects is a client that shows redirects instead of following them.
var noRedirects = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// newClient creates a client with features that registered the test's redirect URI.
func newClient(t *testing.T, balance int64, features string) harness.Client {
	t.Helper()
	ctx := context.Background()
	c, err := suite.CreateClient(ctx, balance, "--features", features)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := suite.Mnvctl(ctx, "client", "redirect-uris", c.ID, redirectURI); err != nil {
		t.Fatalf("redirect URIs: %v %s", err, out)
	}
	return c
}

// authorize runs the device's part: it opens the authorization URL with the operator's number
// header (none: the device is not on mobile data) and follows the provider's redirects to the
// client's redirect URI, whose code it returns.
func authorize(t *testing.T, c harness.Client, scope, number string) string {
	t.Helper()
	return authorizeFrom(t, noRedirects, c, scope, number)
}

// authorizeFrom is authorize for a device whose requests hc makes (its address).
func authorizeFrom(t *testing.T, hc *http.Client, c harness.Client, scope, number string) string {
	t.Helper()
	q := url.Values{
		"response_type": {"code"}, "client_id": {c.ID}, "redirect_uri": {redirectURI},
		"scope": {"openid " + scope}, "state": {"st-42"}, "prompt": {"none"},
	}
	next := suite.GatewayURL + "/oauth2/authorize?" + q.Encode()
	for range 4 {
		req, _ := http.NewRequest(http.MethodGet, next, nil)
		if number != "" {
			req.Header.Set(sandboxHeader, number)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound {
			t.Fatalf("authorize %s: %d %s", next, resp.StatusCode, body)
		}
		next = resp.Header.Get("Location")
		if strings.HasPrefix(next, redirectURI) {
			u, _ := url.Parse(next)
			if u.Query().Get("state") != "st-42" || u.Query().Get("code") == "" {
				t.Fatalf("redirect %s", next)
			}
			return u.Query().Get("code")
		}
		if strings.HasPrefix(next, "/") {
			next = suite.GatewayURL + next
		}
	}
	t.Fatalf("authorization never reached the redirect URI (last %s)", next)
	return ""
}

type tokenAnswer struct {
	status int
	body   map[string]any
}

// exchange trades a code at the token endpoint, the client authenticating with basic auth.
func exchange(t *testing.T, clientID, secret, code string) tokenAnswer {
	t.Helper()
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}}
	req, _ := http.NewRequest(http.MethodPost, suite.GatewayURL+"/oauth2/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(secret))
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out tokenAnswer
	out.status = resp.StatusCode
	_ = json.NewDecoder(resp.Body).Decode(&out.body)
	return out
}

// token runs the whole flow and returns the access token.
func token(t *testing.T, c harness.Client, scope, number string) string {
	t.Helper()
	return tokenOf(t, c, authorize(t, c, scope, number))
}

// tokenOf exchanges code and checks the token answer.
func tokenOf(t *testing.T, c harness.Client, code string) string {
	t.Helper()
	a := exchange(t, c.ID, c.Secret, code)
	tok, _ := a.body["access_token"].(string)
	if a.status != http.StatusOK || tok == "" {
		t.Fatalf("token: %d %v", a.status, a.body)
	}
	if _, ok := a.body["refresh_token"]; ok {
		t.Fatalf("a refresh token was issued: %v", a.body)
	}
	if exp, _ := a.body["expires_in"].(float64); exp <= 0 || exp > 300 {
		t.Fatalf("expires_in %v", a.body["expires_in"])
	}
	return tok
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (a answer) code() string { s, _ := a.body["code"].(string); return s }

// api calls an operation with a bearer token ("" for none), a correlator and a body.
func api(t *testing.T, method, path, bearer, correlator, body string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, suite.GatewayURL+"/number-verification/v2"+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if correlator != "" {
		req.Header.Set("x-correlator", correlator)
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

func verify(t *testing.T, bearer, body string) answer {
	return api(t, http.MethodPost, "/verify", bearer, "b4333c46-49c0-4f62-80d7-f0ef930f1c46", body)
}

func share(t *testing.T, bearer string) answer {
	return api(t, http.MethodGet, "/device-phone-number", bearer, "b4333c46-49c0-4f62-80d7-f0ef930f1c46", "")
}

// wantError checks CAMARA's error body: the status twice, the code, and a message.
func wantError(t *testing.T, a answer, status int, code string) {
	t.Helper()
	if a.status != status || a.code() != code || a.body["status"] != float64(status) {
		t.Fatalf("want %d %s, got %d %s", status, code, a.status, a.raw)
	}
	if m, _ := a.body["message"].(string); m == "" {
		t.Fatalf("no message: %s", a.raw)
	}
	if len(a.body) != 3 {
		t.Fatalf("error body has more than status, code, message: %s", a.raw)
	}
}

func hashOf(n string) string {
	s := sha256.Sum256([]byte(n))
	return hex.EncodeToString(s[:])
}

// history is the client's verifications, newest first, as the REST API lists them.
func history(t *testing.T, c harness.Client) []map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, suite.GatewayURL+"/v1/api/verifications?limit=100", nil)
	req.Header.Set("X-Api-Key", c.APIKey)
	req.Header.Set("X-Client-Id", c.ID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Data struct {
			Items []map[string]any `json:"items"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("verifications: %d %v", resp.StatusCode, err)
	}
	return env.Data.Items
}

func balance(t *testing.T, c harness.Client) int64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, suite.GatewayURL+"/v1/api/clients", nil)
	req.Header.Set("X-Api-Key", c.APIKey)
	req.Header.Set("X-Client-Id", c.ID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Data struct {
			Balance int64 `json:"balance"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatal(err)
	}
	return env.Data.Balance
}

func TestPhoneNumberVerify(t *testing.T) {
	c := newClient(t, 1000, "VERIFY,SANDBOX")
	valid := func(t *testing.T, n string) string { return token(t, c, scopeVerify, n) }

	t.Run("phone_number_verify_01_generic_success_scenario", func(t *testing.T) {
		n := nextNumber()
		a := verify(t, valid(t, n), fmt.Sprintf(`{"phoneNumber":%q}`, n))
		if a.status != http.StatusOK || a.header.Get("Content-Type") != "application/json" ||
			a.header.Get("x-correlator") != "b4333c46-49c0-4f62-80d7-f0ef930f1c46" {
			t.Fatalf("%d %v %s", a.status, a.header, a.raw)
		}
		if _, ok := a.body["devicePhoneNumberVerified"].(bool); !ok || len(a.body) != 1 {
			t.Fatalf("body not a NumberVerificationMatchResponse: %s", a.raw)
		}
	})
	for _, tc := range []struct {
		id   string
		body func(line string) string
		want bool
	}{
		{"phone_number_verify.02_validate_phone_number_success_true", func(l string) string { return fmt.Sprintf(`{"phoneNumber":%q}`, l) }, true},
		{"phone_number_verify.03_validate_phone_number_success_false", func(string) string { return fmt.Sprintf(`{"phoneNumber":%q}`, nextNumber()) }, false},
		{"phone_number_verify.04_validate_hashed_phone_number_success_true", func(l string) string { return fmt.Sprintf(`{"hashedPhoneNumber":%q}`, hashOf(l)) }, true},
		{"phone_number_verify.05_validate_hashed_phone_number_success_false", func(string) string { return fmt.Sprintf(`{"hashedPhoneNumber":%q}`, hashOf(nextNumber())) }, false},
	} {
		t.Run(tc.id, func(t *testing.T) {
			n := nextNumber()
			a := verify(t, valid(t, n), tc.body(n))
			if a.status != http.StatusOK || a.body["devicePhoneNumberVerified"] != tc.want {
				t.Fatalf("%d %s", a.status, a.raw)
			}
		})
	}
	for _, tc := range []struct{ id, body string }{
		{"phone_number_verify_400.1_no_request_body", ""},
		{"phone_number_verify_400.2_empty_request_body", "{}"},
		{"phone_number_verify_400.3_invalid_request_non_existing_property", `{"additional_property":"foo_value"}`},
		{"phone_number_verify_400.4_both_phone_number_and_hashed_in_request", fmt.Sprintf(`{"phoneNumber":"+34666777888","hashedPhoneNumber":%q}`, hashOf("+34666777888"))},
		{"phone_number_verify_C02.01_phone_number_not_schema_compliant", `{"phoneNumber":"0034666777888"}`},
	} {
		t.Run(tc.id, func(t *testing.T) {
			tok := valid(t, nextNumber())
			wantError(t, verify(t, tok, tc.body), http.StatusBadRequest, "INVALID_ARGUMENT")
			// A refused body does not spend the token.
			if a := verify(t, tok, `{"phoneNumber":"+34666777888"}`); a.status != http.StatusOK {
				t.Fatalf("token spent by a refused body: %d %s", a.status, a.raw)
			}
		})
	}
	t.Run("phone_number_verify_401.1_no_authorization_header", func(t *testing.T) {
		wantError(t, verify(t, "", `{"phoneNumber":"+34666777888"}`), http.StatusUnauthorized, "UNAUTHENTICATED")
	})
	t.Run("phone_number_verify_401.2_expired_access_token", func(t *testing.T) {
		tok := valid(t, nextNumber())
		time.Sleep(tokenTTL + 500*time.Millisecond)
		wantError(t, verify(t, tok, `{"phoneNumber":"+34666777888"}`), http.StatusUnauthorized, "UNAUTHENTICATED")
	})
	t.Run("phone_number_verify_401.3_invalid_access_token", func(t *testing.T) {
		tok := valid(t, nextNumber())
		wantError(t, verify(t, tampered(tok), `{"phoneNumber":"+34666777888"}`), http.StatusUnauthorized, "UNAUTHENTICATED")
		wantError(t, verify(t, "not-a-token", `{"phoneNumber":"+34666777888"}`), http.StatusUnauthorized, "UNAUTHENTICATED")
		// The same token spelled otherwise (a bit its last character does not use flipped) is
		// not a way to use it twice.
		tok = valid(t, nextNumber())
		if respelled := respell(tok); respelled != tok {
			wantError(t, verify(t, respelled, `{"phoneNumber":"+34666777888"}`), http.StatusUnauthorized, "UNAUTHENTICATED")
		}
		if a := verify(t, tok, `{"phoneNumber":"+34666777888"}`); a.status != http.StatusOK {
			t.Fatalf("the token itself: %d %s", a.status, a.raw)
		}
	})
	t.Run("phoneNumberVerify_403.1_invalid_token_permissions", func(t *testing.T) {
		cs := newClient(t, 100, "VERIFY,SANDBOX,NUMBER_SHARE")
		wantError(t, verify(t, token(t, cs, scopeShare, nextNumber()), `{"phoneNumber":"+34666777888"}`), http.StatusForbidden, "PERMISSION_DENIED")
	})
	t.Run("phoneNumberVerify_403.2_not_authenticated_using_network_or_sim_based_authentication", func(t *testing.T) {
		before := balance(t, c)
		wantError(t, verify(t, valid(t, ""), `{"phoneNumber":"+34666777888"}`), http.StatusForbidden,
			"NUMBER_VERIFICATION.USER_NOT_AUTHENTICATED_BY_MOBILE_NETWORK")
		if after := balance(t, c); after != before {
			t.Fatalf("an unauthenticated line was charged: %d → %d", before, after)
		}
	})
}

func TestPhoneNumberShare(t *testing.T) {
	c := newClient(t, 1000, "VERIFY,SANDBOX,NUMBER_SHARE")
	valid := func(t *testing.T, n string) string { return token(t, c, scopeShare, n) }

	t.Run("phone_number_share_01_generic_success_scenario", func(t *testing.T) {
		a := share(t, valid(t, nextNumber()))
		if a.status != http.StatusOK || a.header.Get("Content-Type") != "application/json" ||
			a.header.Get("x-correlator") != "b4333c46-49c0-4f62-80d7-f0ef930f1c46" {
			t.Fatalf("%d %v %s", a.status, a.header, a.raw)
		}
		if n, ok := a.body["devicePhoneNumber"].(string); !ok || len(a.body) != 1 || !strings.HasPrefix(n, "+") {
			t.Fatalf("body not a NumberVerificationShareResponse: %s", a.raw)
		}
	})
	t.Run("phone_number_share_02_success_scenario", func(t *testing.T) {
		n := nextNumber()
		before := balance(t, c)
		if a := share(t, valid(t, n)); a.status != http.StatusOK || a.body["devicePhoneNumber"] != n {
			t.Fatalf("%d %s", a.status, a.raw)
		}
		// Charged at its own price (VERIFICATION/NUMBER_SHARE=3), and kept as a verification.
		if after := balance(t, c); before-after != 3 {
			t.Fatalf("share charged %d, want 3", before-after)
		}
		if h := history(t, c); len(h) == 0 || h[0]["status"] != "VERIFIED" {
			t.Fatalf("history %v", h)
		}
	})
	t.Run("phone_number_verify_401.1_no_authorization_header", func(t *testing.T) {
		wantError(t, share(t, ""), http.StatusUnauthorized, "UNAUTHENTICATED")
	})
	t.Run("phone_number_verify_401.2_expired_access_token", func(t *testing.T) {
		tok := valid(t, nextNumber())
		time.Sleep(tokenTTL + 500*time.Millisecond)
		wantError(t, share(t, tok), http.StatusUnauthorized, "UNAUTHENTICATED")
	})
	t.Run("phone_number_verify_401.3_invalid_access_token", func(t *testing.T) {
		wantError(t, share(t, "Zm9vYmFy"), http.StatusUnauthorized, "UNAUTHENTICATED")
	})
	t.Run("phoneNumberShare_403.1_invalid_token_permissions", func(t *testing.T) {
		wantError(t, share(t, token(t, c, scopeVerify, nextNumber())), http.StatusForbidden, "PERMISSION_DENIED")
	})
	t.Run("phoneNumberShare_403.2_not_authenticated_using_network_or_sim_based_authentication", func(t *testing.T) {
		wantError(t, share(t, valid(t, "")), http.StatusForbidden, "NUMBER_VERIFICATION.USER_NOT_AUTHENTICATED_BY_MOBILE_NETWORK")
	})
}

// TestVerifyIsAVerification: a CAMARA verify is kept, charged and listed like any other.
func TestVerifyIsAVerification(t *testing.T) {
	c := newClient(t, 10, "VERIFY,SANDBOX")
	n := nextNumber()
	if a := verify(t, token(t, c, scopeVerify, n), fmt.Sprintf(`{"phoneNumber":%q}`, n)); a.body["devicePhoneNumberVerified"] != true {
		t.Fatalf("%d %s", a.status, a.raw)
	}
	if b := balance(t, c); b != 9 {
		t.Fatalf("balance %d after one verify, want 9", b)
	}
	h := history(t, c)
	if len(h) != 1 || h[0]["status"] != "VERIFIED" || h[0]["operatorId"] != "sandbox" || h[0]["serviceType"] != "HEADER_ENRICHMENT" {
		t.Fatalf("history %v", h)
	}
	// A client without NUMBER_SHARE may not share, whatever scope it asked for.
	wantError(t, share(t, token(t, c, scopeShare, nextNumber())), http.StatusForbidden, "PERMISSION_DENIED")
}

// TestTokensFollowTheClient: an access token keeps no copy of its client's rights. A client
// suspended, or with a feature or the operator taken away after it got the token, is refused at
// the API call (403 PERMISSION_DENIED, nothing charged, nothing kept) with the token it holds;
// once restored, it verifies again.
func TestTokensFollowTheClient(t *testing.T) {
	tests := []struct {
		name, features, scope string
		// offNetwork: the device was not on mobile data, so the verify would be free
		// (UNDETERMINED): no refused charge stands in for the check.
		offNetwork bool
		// take and restore are mnvctl arguments after "client VERB CLIENT_ID".
		take, restore []string
	}{
		{"suspended", "VERIFY,SANDBOX", scopeVerify, false, []string{"suspend"}, []string{"activate"}},
		{"suspended, off the mobile network", "VERIFY,SANDBOX", scopeVerify, true, []string{"suspend"}, []string{"activate"}},
		{"VERIFY taken away", "VERIFY,SANDBOX", scopeVerify, false, []string{"features", "SANDBOX"}, []string{"features", "VERIFY,SANDBOX"}},
		{"NUMBER_SHARE taken away", "VERIFY,SANDBOX,NUMBER_SHARE", scopeShare, false, []string{"features", "VERIFY,SANDBOX"}, []string{"features", "VERIFY,SANDBOX,NUMBER_SHARE"}},
		{"the sandbox operator taken away", "VERIFY,SANDBOX", scopeVerify, false, []string{"operators", "--none"}, []string{"operators", "--clear"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, 100, tt.features)
			mnvctl := func(args []string) {
				t.Helper()
				if out, err := suite.Mnvctl(context.Background(), append([]string{"client", args[0], c.ID}, args[1:]...)...); err != nil {
					t.Fatalf("mnvctl %v: %v %s", args, err, out)
				}
				// The change reaches verification's principal cache within a second of its
				// commit (the bound tests/principals holds it to).
				time.Sleep(time.Second)
			}
			call := func(tok string) answer {
				n := nextNumber()
				if tt.scope == scopeShare {
					return share(t, tok)
				}
				return verify(t, tok, fmt.Sprintf(`{"phoneNumber":%q}`, n))
			}
			line := nextNumber()
			if tt.offNetwork {
				line = ""
			}
			tok := token(t, c, tt.scope, line)
			mnvctl(tt.take)
			wantError(t, call(tok), http.StatusForbidden, "PERMISSION_DENIED")
			mnvctl(tt.restore)
			if b := balance(t, c); b != 100 {
				t.Fatalf("balance %d after the refusal, want 100", b)
			}
			if h := history(t, c); len(h) != 0 {
				t.Fatalf("a refused call was kept: %v", h)
			}
			if a := call(token(t, c, tt.scope, nextNumber())); a.status != http.StatusOK {
				t.Fatalf("restored: %d %s", a.status, a.raw)
			}
		})
	}
}

func TestAttacks(t *testing.T) {
	a := newClient(t, 100, "VERIFY,SANDBOX")
	b := newClient(t, 100, "VERIFY,SANDBOX")

	t.Run("a token used twice", func(t *testing.T) {
		n := nextNumber()
		tok := token(t, a, scopeVerify, n)
		if r := verify(t, tok, fmt.Sprintf(`{"phoneNumber":%q}`, n)); r.status != http.StatusOK {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		wantError(t, verify(t, tok, fmt.Sprintf(`{"phoneNumber":%q}`, n)), http.StatusUnauthorized, "UNAUTHENTICATED")
	})
	t.Run("a code of another client", func(t *testing.T) {
		code := authorize(t, a, scopeVerify, nextNumber())
		if r := exchange(t, b.ID, b.Secret, code); r.status != http.StatusBadRequest || r.body["error"] != "invalid_grant" {
			t.Fatalf("another client's code: %d %v", r.status, r.body)
		}
		// The failed attempt did not spend the code for its client.
		if r := exchange(t, a.ID, a.Secret, code); r.status != http.StatusOK {
			t.Fatalf("own code after the attempt: %d %v", r.status, r.body)
		}
		if h := history(t, b); len(h) != 0 {
			t.Fatalf("the other client has verifications: %v", h)
		}
	})
	t.Run("a code exchanged twice", func(t *testing.T) {
		code := authorize(t, a, scopeVerify, nextNumber())
		if r := exchange(t, a.ID, a.Secret, code); r.status != http.StatusOK {
			t.Fatalf("%d %v", r.status, r.body)
		}
		if r := exchange(t, a.ID, a.Secret, code); r.status != http.StatusBadRequest || r.body["error"] != "invalid_grant" {
			t.Fatalf("second exchange: %d %v", r.status, r.body)
		}
	})
	t.Run("a wrong client secret", func(t *testing.T) {
		code := authorize(t, a, scopeVerify, nextNumber())
		for _, secret := range []string{b.Secret, "mnvsec_wrong", ""} {
			if r := exchange(t, a.ID, secret, code); r.status != http.StatusUnauthorized && r.status != http.StatusBadRequest || r.body["error"] != "invalid_client" {
				t.Fatalf("secret %q: %d %v", secret, r.status, r.body)
			}
		}
	})
	t.Run("a token with the wrong scope", func(t *testing.T) {
		wantError(t, share(t, token(t, a, scopeVerify, nextNumber())), http.StatusForbidden, "PERMISSION_DENIED")
	})
	t.Run("an expired token", func(t *testing.T) {
		tok := token(t, a, scopeVerify, nextNumber())
		time.Sleep(tokenTTL + 500*time.Millisecond)
		wantError(t, verify(t, tok, `{"phoneNumber":"+34666777888"}`), http.StatusUnauthorized, "UNAUTHENTICATED")
	})
	t.Run("a redirect URI off the client's web origins", func(t *testing.T) {
		q := url.Values{"response_type": {"code"}, "client_id": {a.ID}, "redirect_uri": {"https://evil.example/cb"},
			"scope": {"openid " + scopeVerify}, "state": {"s"}}
		resp, err := noRedirects.Get(suite.GatewayURL + "/oauth2/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusFound && strings.HasPrefix(resp.Header.Get("Location"), "https://evil.example") {
			t.Fatalf("redirected to a foreign URI: %s", resp.Header.Get("Location"))
		}
	})
	t.Run("number headers straight to the facade are not believed", func(t *testing.T) {
		// Past the gateway, without its token: the facade takes the socket address alone.
		q := url.Values{"response_type": {"code"}, "client_id": {a.ID}, "redirect_uri": {redirectURI},
			"scope": {"openid " + scopeVerify}, "state": {"st-42"}}
		req, _ := http.NewRequest(http.MethodGet, "http://"+suite.CAMARAAddr+"/oauth2/authorize?"+q.Encode(), nil)
		req.Header.Set("X-Mnv-Client-Ip", "127.0.0.1")
		req.Header.Set("X-Mnv-Hdr-X-Mnv-Sandbox-Msisdn", "+971551234567")
		req.Header.Set("X-Mnv-Caller-Token", "forged")
		resp, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cb, err := noRedirects.Get("http://" + suite.CAMARAAddr + resp.Header.Get("Location")[len(suite.GatewayURL):])
		if err != nil {
			t.Fatal(err)
		}
		cb.Body.Close()
		u, _ := url.Parse(cb.Header.Get("Location"))
		tok := exchange(t, a.ID, a.Secret, u.Query().Get("code")).body["access_token"].(string)
		wantError(t, verify(t, tok, `{"phoneNumber":"+971551234567"}`), http.StatusForbidden,
			"NUMBER_VERIFICATION.USER_NOT_AUTHENTICATED_BY_MOBILE_NETWORK")
	})
	t.Run("a malformed x-correlator", func(t *testing.T) {
		r := api(t, http.MethodPost, "/verify", token(t, a, scopeVerify, nextNumber()), "bad correlator!", `{"phoneNumber":"+34666777888"}`)
		wantError(t, r, http.StatusBadRequest, "INVALID_ARGUMENT")
	})
}

// TestDiscovery: the provider's metadata names its endpoints on the gateway, the code flow,
// and the CAMARA scopes; the endpoints CAMARA has no use for are neither named nor served.
func TestDiscovery(t *testing.T) {
	resp, err := http.Get(suite.GatewayURL + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	if d["issuer"] != suite.GatewayURL || d["authorization_endpoint"] != suite.GatewayURL+"/oauth2/authorize" ||
		d["token_endpoint"] != suite.GatewayURL+"/oauth2/token" || d["jwks_uri"] != suite.GatewayURL+"/oauth2/keys" {
		t.Fatalf("discovery %v", d)
	}
	scopes := fmt.Sprint(d["scopes_supported"])
	if !strings.Contains(scopes, scopeVerify) || !strings.Contains(scopes, scopeShare) {
		t.Fatalf("scopes %v", d["scopes_supported"])
	}
	if g := fmt.Sprint(d["grant_types_supported"]); g != "[authorization_code]" {
		t.Fatalf("grant types %s", g)
	}
	for _, key := range []string{"userinfo_endpoint", "introspection_endpoint", "revocation_endpoint", "end_session_endpoint", "device_authorization_endpoint"} {
		if v, ok := d[key]; ok {
			t.Errorf("discovery names %s: %v", key, v)
		}
	}
	// A client holding a token gets nothing from the library's other endpoints: they are not
	// there.
	tok := token(t, newClient(t, 10, "VERIFY,SANDBOX"), scopeVerify, nextNumber())
	for _, path := range []string{"/oauth2/userinfo", "/oauth2/introspect", "/oauth2/revoke", "/oauth2/end_session", "/oauth2/device_authorization"} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			req, _ := http.NewRequest(method, suite.GatewayURL+path, strings.NewReader(url.Values{"token": {tok}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := noRedirects.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s %s: %d, want 404", method, path, resp.StatusCode)
			}
		}
	}
	// The token is still good for its one call.
	if a := verify(t, tok, `{"phoneNumber":"+34666777888"}`); a.status != http.StatusOK {
		t.Fatalf("the token after the tries: %d %s", a.status, a.raw)
	}
}

// tampered is tok with its middle character changed: another token, never the same one spelled
// differently.
func tampered(tok string) string {
	b := []byte(tok)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// respell is tok with the lowest bit of its last character flipped: base64url of a 16-byte GCM
// tag uses only the top two bits of that character, so a lenient decoder reads the same token.
func respell(tok string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, tok[len(tok)-1])
	if i < 0 {
		return tok
	}
	return tok[:len(tok)-1] + string(alphabet[i^1])
}
