package operatorapi

import (
	"bytes"
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/golang-jwt/jwt/v5"

	"github.com/mnvhq/mnv/services/verification/internal/operators"
)

// This file is what the Number Verification client (operatorapi.go) and the swap client
// (swap.go) share: mnv's client registration at the operator (its authentication, the
// private_key_jwt key parsed once), the discovery of the operator's endpoints, and one call of a
// CAMARA API with a bearer token. What an answer means stays with each client.

// registration is mnv's client at one operator's authorization server, as a camara or swap
// block registers it.
type registration struct {
	operators.Registration
	signer any // the private key of private_key_jwt
}

// newRegistration parses the private key of a private_key_jwt registration; block names the
// registry's block in the error.
func newRegistration(opID, block string, r operators.Registration) (registration, error) {
	reg := registration{Registration: r}
	if r.ClientAuth != operators.PrivateKeyJWT {
		return reg, nil
	}
	key, err := parseKey(r.PrivateKeyPEM)
	if err != nil {
		return registration{}, fmt.Errorf("operatorapi: operator %q: %sprivateKeyFile: %w", opID, block, err)
	}
	reg.signer = key
	return reg, nil
}

func parseKey(p []byte) (any, error) {
	if k, err := jwt.ParseRSAPrivateKeyFromPEM(p); err == nil {
		return k, nil
	}
	if k, err := jwt.ParseECPrivateKeyFromPEM(p); err == nil {
		return k, nil
	}
	return nil, errors.New("neither an RSA nor an EC private key")
}

// assertionType is RFC 7523's client_assertion_type of a JWT client authentication.
const assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// assertion is the form parameters of a private_key_jwt client authentication at the endpoint
// aud: client_assertion_type and a fresh client_assertion (signAssertion).
func (r registration) assertion(aud string) (url.Values, error) {
	a, err := signAssertion(r.signer, r.ClientID, r.KeyID, aud)
	if err != nil {
		return nil, err
	}
	return url.Values{"client_assertion_type": {assertionType}, "client_assertion": {a}}, nil
}

// signAssertion is a private_key_jwt client assertion (RFC 7523) of clientID for the endpoint
// aud: iss and sub the client id, a fresh jti, one minute of life, signed with key (RS256 for
// an RSA key, ES256 for an EC one) and named kid when keyID is set.
func signAssertion(key any, clientID, keyID, aud string) (string, error) {
	now := time.Now()
	claims := jwt.RegisteredClaims{
		Issuer: clientID, Subject: clientID, Audience: jwt.ClaimStrings{aud}, ID: NewState(),
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Minute)),
	}
	var method jwt.SigningMethod = jwt.SigningMethodES256
	if _, ok := key.(*rsa.PrivateKey); ok {
		method = jwt.SigningMethodRS256
	}
	t := jwt.NewWithClaims(method, claims)
	if keyID != "" {
		t.Header["kid"] = keyID
	}
	s, err := t.SignedString(key)
	if err != nil {
		return "", fmt.Errorf("operatorapi: client assertion: %w", err)
	}
	return s, nil
}

// discovery paths: go-oidc wants the issuer; the registry gives the document's URL.
const wellKnown = "/.well-known/openid-configuration"

// discover reads the operator's OpenID Connect discovery document at discoveryURL. A document
// that cannot be had is ErrUnavailable: the caller asks again on its next use, so an operator
// down at start-up does not stop mnv.
func discover(ctx context.Context, hc *http.Client, discoveryURL string) (*oidc.Provider, error) {
	issuer, ok := cutSuffix(discoveryURL, wellKnown)
	if !ok {
		return nil, fmt.Errorf("%w: discoveryUrl %q does not end in %s", ErrUnavailable, discoveryURL, wellKnown)
	}
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, hc), issuer)
	if err != nil {
		return nil, fmt.Errorf("%w: discovery: %w", ErrUnavailable, err)
	}
	return p, nil
}

func cutSuffix(s, suffix string) (string, bool) {
	if len(s) < len(suffix) || s[len(s)-len(suffix):] != suffix {
		return s, false
	}
	return s[:len(s)-len(suffix)], true
}

// apiAnswer is one answer of a CAMARA API: its status, its body (at most 64 KiB) and, when it
// is not a 200, the CAMARA error code of its body, if any.
type apiAnswer struct {
	status int
	raw    []byte
	code   string
}

// callAPI makes one call of a CAMARA API at url with the access token as its bearer: body, when
// not nil, as JSON, and correlator as x-correlator. No answer (a network error, a timeout, an
// unreadable body), a 5xx or a 429 is an error wrapping ErrUnavailable; the answer is then
// whatever was read (a 5xx's status and code). Any other answer, errors included, is no error.
func callAPI(ctx context.Context, hc *http.Client, method, url, accessToken string, body []byte, correlator string) (apiAnswer, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return apiAnswer{}, fmt.Errorf("operatorapi: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+accessToken)
	if correlator != "" {
		req.Header.Set("x-correlator", correlator)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return apiAnswer{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return apiAnswer{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	a := apiAnswer{status: resp.StatusCode, raw: raw}
	if a.status != http.StatusOK {
		var e struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(raw, &e) // a 4xx without the CAMARA body keeps its status alone
		a.code = e.Code
	}
	if a.status >= 500 || a.status == http.StatusTooManyRequests {
		return a, fmt.Errorf("%w: status %d %s", ErrUnavailable, a.status, a.code)
	}
	return a, nil
}
