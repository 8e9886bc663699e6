package operatorapi_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mnvhq/mnv/services/platform/testkit/sandboxcamara"
	"github.com/mnvhq/mnv/services/verification/internal/operatorapi"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
)

const redirect = "https://mnv.example/v1/api/sdk/session/callback"

func pemOf(t *testing.T, key any) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// setup starts a fake operator knowing three clients (a secret one, an RSA-key one and an
// EC-key one) and returns it with the operator settings of each.
func setup(t *testing.T) (*sandboxcamara.Fake, map[string]operators.Operator) {
	t.Helper()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f, err := sandboxcamara.Start("127.0.0.1:0", sandboxcamara.Options{Clients: []sandboxcamara.Client{
		{ID: "basic", Secret: "s3cret", RedirectURIs: []string{redirect}},
		{ID: "rsa", PublicKey: &rsaKey.PublicKey, RedirectURIs: []string{redirect}},
		{ID: "ec", PublicKey: &ecKey.PublicKey, RedirectURIs: []string{redirect}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	op := func(c operators.CAMARA) operators.Operator {
		c.DiscoveryURL, c.APIRoot, c.Scopes = f.DiscoveryURL(), f.URL, operators.DefaultScopes
		return operators.Operator{ID: "op-" + c.ClientID, Methods: []operators.Method{operators.MethodNetworkAPI}, CAMARA: &c}
	}
	return f, map[string]operators.Operator{
		"basic": op(operators.CAMARA{Registration: operators.Registration{ClientID: "basic", ClientAuth: operators.ClientSecretBasic, ClientSecret: "s3cret"}}),
		"rsa":   op(operators.CAMARA{Registration: operators.Registration{ClientID: "rsa", ClientAuth: operators.PrivateKeyJWT, PrivateKeyPEM: pemOf(t, rsaKey), KeyID: "k1"}}),
		"ec":    op(operators.CAMARA{Registration: operators.Registration{ClientID: "ec", ClientAuth: operators.PrivateKeyJWT, PrivateKeyPEM: pemOf(t, ecKey)}, HashedPhoneNumber: true}),
		"wrong": op(operators.CAMARA{Registration: operators.Registration{ClientID: "basic", ClientAuth: operators.ClientSecretBasic, ClientSecret: "nope"}}),
	}
}

// device follows the authorization URL as a phone on the line msisdn ("" off the mobile
// network) and returns the query the operator sent it back with.
func device(t *testing.T, authURL, msisdn string) url.Values {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, authURL, nil)
	if msisdn != "" {
		req.Header.Set(sandboxcamara.DefaultMSISDNHeader, msisdn)
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize: status %d", resp.StatusCode)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Scheme+"://"+loc.Host+loc.Path != redirect {
		t.Fatalf("authorize: redirected to %q", resp.Header.Get("Location"))
	}
	return loc.Query()
}

func TestFlowAgainstTheFakeOperator(t *testing.T) {
	fake, ops := setup(t)
	hc := &http.Client{Timeout: 2 * time.Second}
	ctx := context.Background()
	for _, name := range []string{"basic", "rsa", "ec"} {
		t.Run(name, func(t *testing.T) {
			c, err := operatorapi.New(ops[name], redirect, hc)
			if err != nil {
				t.Fatal(err)
			}
			a, err := c.Authorize(ctx)
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(a.URL)
			q := u.Query()
			if q.Get("prompt") != "none" || q.Get("code_challenge_method") != "S256" || q.Get("state") != a.State ||
				q.Get("redirect_uri") != redirect || q.Get("scope") != "openid number-verification:verify" {
				t.Fatalf("authorization URL %s", a.URL)
			}
			back := device(t, a.URL, "+447700900123")
			if back.Get("state") != a.State || back.Get("code") == "" {
				t.Fatalf("came back with %v", back)
			}
			// A wrong verifier is refused, and burns the code (single use).
			if _, err := c.Exchange(ctx, back.Get("code"), "wrong-verifier-wrong-verifier-wrong-verifier-0"); err == nil || errors.Is(err, operatorapi.ErrUnavailable) {
				t.Fatalf("exchange with a wrong verifier: %v", err)
			}
			if _, err := c.Exchange(ctx, back.Get("code"), a.Verifier); err == nil {
				t.Fatal("a code was exchanged twice")
			}
			a, _ = c.Authorize(ctx)
			back = device(t, a.URL, "+447700900123")
			tok, err := c.Exchange(ctx, back.Get("code"), a.Verifier)
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Until(tok.Expiry); d <= 0 || d > 300*time.Second {
				t.Errorf("token expiry in %v", d)
			}
			ans, err := c.Verify(ctx, tok.AccessToken, "+447700900123", "corr-1")
			if err != nil || ans != (operatorapi.Answer{Status: 200, Verified: true}) {
				t.Fatalf("verify = %+v, %v", ans, err)
			}
			// Single use: the second call is 401 UNAUTHENTICATED.
			ans, err = c.Verify(ctx, tok.AccessToken, "+447700900123", "corr-2")
			if err != nil || ans.Status != 401 || ans.Code != "UNAUTHENTICATED" {
				t.Fatalf("second verify = %+v, %v", ans, err)
			}
			// A mismatch.
			a, _ = c.Authorize(ctx)
			back = device(t, a.URL, "+447700900123")
			tok, _ = c.Exchange(ctx, back.Get("code"), a.Verifier)
			ans, err = c.Verify(ctx, tok.AccessToken, "+447700900999", "")
			if err != nil || ans != (operatorapi.Answer{Status: 200, Verified: false}) {
				t.Fatalf("mismatch = %+v, %v", ans, err)
			}
		})
	}
	t.Run("off the mobile network", func(t *testing.T) {
		c, _ := operatorapi.New(ops["basic"], redirect, hc)
		a, _ := c.Authorize(ctx)
		if back := device(t, a.URL, ""); back.Get("error") != "login_required" || back.Get("state") != a.State || back.Get("code") != "" {
			t.Fatalf("came back with %v", back)
		}
	})
	t.Run("wrong client secret", func(t *testing.T) {
		c, _ := operatorapi.New(ops["wrong"], redirect, hc)
		a, _ := c.Authorize(ctx)
		back := device(t, a.URL, "+447700900123")
		if _, err := c.Exchange(ctx, back.Get("code"), a.Verifier); err == nil {
			t.Fatal("exchanged with a wrong secret")
		}
	})
	t.Run("operator answers", func(t *testing.T) {
		c, _ := operatorapi.New(ops["basic"], redirect, &http.Client{Timeout: 300 * time.Millisecond})
		token := func(msisdn string) string {
			a, _ := c.Authorize(ctx)
			tok, err := c.Exchange(ctx, device(t, a.URL, msisdn).Get("code"), a.Verifier)
			if err != nil {
				t.Fatal(err)
			}
			return tok.AccessToken
		}
		fake.SetBehaviour("+447700900201", sandboxcamara.Behaviour{Status5xx: 503})
		fake.SetBehaviour("+447700900202", sandboxcamara.Behaviour{Delay: time.Second})
		fake.SetBehaviour("+447700900203", sandboxcamara.Behaviour{NotAuthenticatedByMobileNetwork: true})
		tok := token("+447700900201")
		if _, err := c.Verify(ctx, tok, "+447700900201", ""); !errors.Is(err, operatorapi.ErrUnavailable) {
			t.Errorf("5xx: %v", err)
		}
		fake.SetBehaviour("+447700900201", sandboxcamara.Behaviour{})
		if ans, err := c.Verify(ctx, tok, "+447700900201", ""); err != nil || !ans.Verified {
			t.Errorf("after a 5xx the token still works: %+v, %v", ans, err)
		}
		if _, err := c.Verify(ctx, token("+447700900202"), "+447700900202", ""); !errors.Is(err, operatorapi.ErrUnavailable) {
			t.Errorf("timeout: %v", err)
		}
		ans, err := c.Verify(ctx, token("+447700900203"), "+447700900203", "")
		if err != nil || ans.Status != 403 || ans.Code != "NUMBER_VERIFICATION.USER_NOT_AUTHENTICATED_BY_MOBILE_NETWORK" {
			t.Errorf("403: %+v, %v", ans, err)
		}
	})
	t.Run("operator down", func(t *testing.T) {
		op := ops["basic"]
		cc := *op.CAMARA
		cc.DiscoveryURL = "http://127.0.0.1:1/.well-known/openid-configuration"
		op.CAMARA = &cc
		c, _ := operatorapi.New(op, redirect, hc)
		if _, err := c.Authorize(ctx); !errors.Is(err, operatorapi.ErrUnavailable) {
			t.Errorf("discovery of an operator that is down: %v", err)
		}
	})
}

// TestShareAndHash: phoneNumberShare and a hashed verify, each only with an operator that offers
// it (its scopes name phoneNumberShare; it accepts hashedPhoneNumber), refused before any call
// otherwise, so no token is spent.
func TestShareAndHash(t *testing.T) {
	fake, ops := setup(t)
	hc := &http.Client{Timeout: 2 * time.Second}
	ctx := context.Background()
	withShare := ops["ec"] // takes hashed numbers
	cc := *withShare.CAMARA
	cc.Scopes = []string{"openid", "number-verification:verify", operatorapi.ScopeShare}
	withShare.CAMARA = &cc
	token := func(t *testing.T, c *operatorapi.Client, msisdn string) string {
		t.Helper()
		a, err := c.Authorize(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := c.Exchange(ctx, device(t, a.URL, msisdn).Get("code"), a.Verifier)
		if err != nil {
			t.Fatal(err)
		}
		return tok.AccessToken
	}
	sharing, err := operatorapi.New(withShare, redirect, hc)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := operatorapi.New(ops["basic"], redirect, hc)
	if !sharing.Shares() || plain.Shares() {
		t.Fatalf("Shares: %v and %v", sharing.Shares(), plain.Shares())
	}
	const line = "+447700900301"
	sum := sha256.Sum256([]byte(line))
	hash := hex.EncodeToString(sum[:])

	calls := fake.APICalls()
	if ans, err := sharing.Share(ctx, token(t, sharing, line), "c-1"); err != nil || ans != (operatorapi.Answer{Status: 200, Number: line}) {
		t.Errorf("share = %+v, %v", ans, err)
	}
	if ans, err := sharing.VerifyHash(ctx, token(t, sharing, line), strings.ToUpper(hash), "c-2"); err != nil || ans != (operatorapi.Answer{Status: 200, Verified: true}) {
		t.Errorf("hashed verify = %+v, %v", ans, err)
	}
	if n := fake.APICalls() - calls; n != 2 {
		t.Errorf("the operator was called %d times, want 2", n)
	}
	tok := token(t, plain, line)
	if _, err := plain.Share(ctx, tok, ""); !errors.Is(err, operatorapi.ErrShareUnsupported) {
		t.Errorf("share with an operator that does not share: %v", err)
	}
	if _, err := plain.VerifyHash(ctx, tok, hash, ""); !errors.Is(err, operatorapi.ErrHashUnsupported) {
		t.Errorf("hash with an operator that takes numbers only: %v", err)
	}
	// Neither spent the token.
	if ans, err := plain.Verify(ctx, tok, line, ""); err != nil || !ans.Verified {
		t.Errorf("the token after the refusals: %+v, %v", ans, err)
	}
}
