// Package operatorapi is mnv calling an operator's CAMARA Number Verification API (the
// NETWORK_API method; the API mnv serves itself is package facade):
// the OpenID Connect authorization code flow the device runs over mobile data (the
// authorization URL with prompt=none and PKCE, the code exchange with the operator's client
// authentication), and the calls of the API with the single-use access token: /verify, and
// /device-phone-number for the CAMARA facade when the operator's scopes include it.
//
// The OAuth side is golang.org/x/oauth2 (PKCE, the token request, client_secret_basic), the
// discovery is coreos/go-oidc, and private_key_jwt assertions (RFC 7523) are signed with
// golang-jwt. Nothing here decides an outcome: Verify and Share report what the operator
// answered (package verify maps it to mnv's vocabulary).
package operatorapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
)

// ErrUnavailable wraps every failure to get an answer from the operator: a network error, a
// timeout, a 5xx or 429, an answer that is not the API's. The verification is retryable.
var ErrUnavailable = errors.New("the operator's network API did not answer")

// Client talks to one operator.
type Client struct {
	op       operators.Operator
	cfg      operators.CAMARA
	redirect string
	http     *http.Client
	reg      registration

	mu       sync.Mutex
	endpoint *oauth2.Endpoint // found by discovery, or given
}

// New returns the client of op (which must have CAMARA settings), whose device comes back to
// redirectURI. The HTTP client's timeout bounds every call to the operator.
func New(op operators.Operator, redirectURI string, hc *http.Client) (*Client, error) {
	if op.CAMARA == nil {
		return nil, fmt.Errorf("operatorapi: operator %q has no CAMARA settings", op.ID)
	}
	reg, err := newRegistration(op.ID, "", op.CAMARA.Registration)
	if err != nil {
		return nil, err
	}
	c := &Client{op: op, cfg: *op.CAMARA, redirect: redirectURI, http: hc, reg: reg}
	if c.cfg.DiscoveryURL == "" {
		c.endpoint = &oauth2.Endpoint{AuthURL: c.cfg.AuthorizationEndpoint, TokenURL: c.cfg.TokenEndpoint}
	}
	return c, nil
}

// endpoints returns the operator's authorization and token endpoints, discovering them on
// first use (an operator down at start-up must not stop mnv) and keeping them once found.
func (c *Client) endpoints(ctx context.Context) (oauth2.Endpoint, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.endpoint != nil {
		return *c.endpoint, nil
	}
	p, err := discover(ctx, c.http, c.cfg.DiscoveryURL)
	if err != nil {
		return oauth2.Endpoint{}, err
	}
	e := p.Endpoint()
	c.endpoint = &e
	return e, nil
}

// config is the oauth2 configuration of the operator.
func (c *Client) config(e oauth2.Endpoint) *oauth2.Config {
	cfg := &oauth2.Config{ClientID: c.cfg.ClientID, Endpoint: e, RedirectURL: c.redirect, Scopes: c.cfg.Scopes}
	switch c.cfg.ClientAuth {
	case operators.ClientSecretBasic:
		cfg.ClientSecret = c.cfg.ClientSecret
		cfg.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
	case operators.PrivateKeyJWT:
		// No secret: the client_id goes in the form beside the assertion.
		cfg.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	}
	return cfg
}

// Authorization is the start of one authorization code flow.
type Authorization struct {
	// URL is where the device goes, over mobile data.
	URL string
	// State binds the operator's answer to the session; Verifier is the PKCE secret. Both are
	// kept by mnv only (the state as a hash).
	State, Verifier string
}

// Authorize starts a flow: a fresh state and PKCE verifier, and the authorization URL with
// prompt=none and the S256 challenge.
func (c *Client) Authorize(ctx context.Context) (Authorization, error) {
	e, err := c.endpoints(ctx)
	if err != nil {
		return Authorization{}, err
	}
	a := Authorization{State: NewState(), Verifier: oauth2.GenerateVerifier()}
	a.URL = c.config(e).AuthCodeURL(a.State, oauth2.S256ChallengeOption(a.Verifier), oauth2.SetAuthURLParam("prompt", "none"))
	return a, nil
}

// NewState is a fresh state: 32 random bytes, base64url.
func NewState() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// StateHash is how a state is kept and looked up.
func StateHash(state string) []byte {
	s := sha256.Sum256([]byte(state))
	return s[:]
}

// Token is an access token for the Number Verification API.
type Token struct {
	AccessToken string
	Expiry      time.Time
}

// Exchange trades the code the device brought back for an access token, with the PKCE
// verifier and the operator's client authentication. An operator that refuses the code
// (invalid_grant and the like) is an error that does not wrap ErrUnavailable.
func (c *Client) Exchange(ctx context.Context, code, verifier string) (Token, error) {
	e, err := c.endpoints(ctx)
	if err != nil {
		return Token{}, err
	}
	opts := []oauth2.AuthCodeOption{oauth2.VerifierOption(verifier)}
	if c.cfg.ClientAuth == operators.PrivateKeyJWT {
		params, err := c.reg.assertion(e.TokenURL)
		if err != nil {
			return Token{}, err
		}
		for k := range params {
			opts = append(opts, oauth2.SetAuthURLParam(k, params.Get(k)))
		}
	}
	t, err := c.config(e).Exchange(context.WithValue(ctx, oauth2.HTTPClient, c.http), code, opts...)
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
			return Token{}, fmt.Errorf("operatorapi: token: %s", re.ErrorCode)
		}
		return Token{}, fmt.Errorf("%w: token: %w", ErrUnavailable, err)
	}
	return Token{AccessToken: t.AccessToken, Expiry: t.Expiry}, nil
}

// Answer is what the operator's API answered: Status 200 with Verified (phoneNumberVerify) or
// Number (phoneNumberShare), or an error status with its CAMARA code.
type Answer struct {
	Status   int
	Code     string
	Verified bool
	Number   string
}

// ErrHashUnsupported is the error of a hashed verify with an operator that takes only the
// number itself.
var ErrHashUnsupported = errors.New("operatorapi: the operator does not accept hashedPhoneNumber")

// ErrShareUnsupported is the error of a share with an operator whose authorization mnv does not
// ask the phoneNumberShare scope of.
var ErrShareUnsupported = errors.New("operatorapi: the operator's phoneNumberShare is not used")

// Verify calls the operator's phoneNumberVerify with the single-use token: hashedPhoneNumber
// when the operator accepts it, else phoneNumber. correlator travels as x-correlator. A 5xx, a
// 429, a timeout or an answer that is not the API's is ErrUnavailable; other answers, errors
// included, are an Answer.
func (c *Client) Verify(ctx context.Context, accessToken, e164, correlator string) (Answer, error) {
	if c.cfg.HashedPhoneNumber {
		sum := sha256.Sum256([]byte(e164))
		return c.VerifyHash(ctx, accessToken, hex.EncodeToString(sum[:]), correlator)
	}
	return c.verify(ctx, accessToken, map[string]string{"phoneNumber": e164}, correlator)
}

// VerifyHash calls phoneNumberVerify with a hashedPhoneNumber (SHA-256 of the E.164 number, in
// hexadecimal) when the operator accepts one (ErrHashUnsupported otherwise), as Verify.
func (c *Client) VerifyHash(ctx context.Context, accessToken, sha256Hex, correlator string) (Answer, error) {
	if !c.cfg.HashedPhoneNumber {
		return Answer{}, ErrHashUnsupported
	}
	return c.verify(ctx, accessToken, map[string]string{"hashedPhoneNumber": strings.ToLower(sha256Hex)}, correlator)
}

func (c *Client) verify(ctx context.Context, accessToken string, body map[string]string, correlator string) (Answer, error) {
	b, _ := json.Marshal(body)
	a, raw, err := c.call(ctx, http.MethodPost, "/verify", accessToken, b, correlator)
	if err != nil || a.Status != http.StatusOK {
		return a, err
	}
	var ok struct {
		Verified *bool `json:"devicePhoneNumberVerified"`
	}
	if err := json.Unmarshal(raw, &ok); err != nil || ok.Verified == nil {
		return Answer{}, fmt.Errorf("%w: a 200 without devicePhoneNumberVerified", ErrUnavailable)
	}
	a.Verified = *ok.Verified
	return a, nil
}

// Shares reports whether mnv asks the operator for phoneNumberShare: its registry scopes name
// the operation's scope, so the operator's tokens may call it.
func (c *Client) Shares() bool { return slices.Contains(c.cfg.Scopes, ScopeShare) }

// ScopeShare is the scope of phoneNumberShare.
const ScopeShare = "number-verification:device-phone-number:read"

// Share calls the operator's phoneNumberShare with the single-use token (ErrShareUnsupported
// unless Shares), as Verify: a 200 is an Answer with the line's Number.
func (c *Client) Share(ctx context.Context, accessToken, correlator string) (Answer, error) {
	if !c.Shares() {
		return Answer{}, ErrShareUnsupported
	}
	a, raw, err := c.call(ctx, http.MethodGet, "/device-phone-number", accessToken, nil, correlator)
	if err != nil || a.Status != http.StatusOK {
		return a, err
	}
	var ok struct {
		Number string `json:"devicePhoneNumber"`
	}
	// The operator knows its subscriber's number: its shape is checked, not the library's idea
	// of which numbers exist.
	if json.Unmarshal(raw, &ok) != nil || !phone.IsE164Shape(ok.Number) {
		return Answer{}, fmt.Errorf("%w: a 200 without a devicePhoneNumber", ErrUnavailable)
	}
	a.Number = ok.Number
	return a, nil
}

// call makes one call of the Number Verification API. A 5xx, a 429, a timeout or an unreadable
// answer is ErrUnavailable; any other answer is an Answer with its status (and, for an error,
// its CAMARA code) and the body.
func (c *Client) call(ctx context.Context, method, path, accessToken string, body []byte, correlator string) (Answer, []byte, error) {
	a, err := callAPI(ctx, c.http, method, c.cfg.APIRoot+"/number-verification/v2"+path, accessToken, body, correlator)
	if err != nil {
		return Answer{}, nil, err
	}
	return Answer{Status: a.status, Code: a.code}, a.raw, nil
}

// Clients are the clients of a registry's NETWORK_API operators, by operator id.
type Clients map[string]*Client

// NewClients builds the client of every operator of ops that has CAMARA settings.
func NewClients(ops []operators.Operator, redirectURI string, hc *http.Client) (Clients, error) {
	out := Clients{}
	for _, op := range ops {
		if op.CAMARA == nil {
			continue
		}
		c, err := New(op, redirectURI, hc)
		if err != nil {
			return nil, err
		}
		out[op.ID] = c
	}
	return out, nil
}

// ErrNoClient is the error of an operator without a CAMARA client.
var ErrNoClient = errors.New("operatorapi: the operator has no network API settings")

// Has reports whether operatorID has a client.
func (cs Clients) Has(operatorID string) bool { return cs[operatorID] != nil }

// Authorize starts an authorization code flow with operatorID (Client.Authorize).
func (cs Clients) Authorize(ctx context.Context, operatorID string) (Authorization, error) {
	c := cs[operatorID]
	if c == nil {
		return Authorization{}, ErrNoClient
	}
	return c.Authorize(ctx)
}

// Exchange trades a code of operatorID for a token (Client.Exchange).
func (cs Clients) Exchange(ctx context.Context, operatorID, code, verifier string) (Token, error) {
	c := cs[operatorID]
	if c == nil {
		return Token{}, ErrNoClient
	}
	return c.Exchange(ctx, code, verifier)
}

// TakesHash reports whether operatorID's /verify accepts hashedPhoneNumber.
func (cs Clients) TakesHash(operatorID string) bool {
	return cs[operatorID] != nil && cs[operatorID].cfg.HashedPhoneNumber
}

// Shares reports whether operatorID's phoneNumberShare is used (Client.Shares).
func (cs Clients) Shares(operatorID string) bool {
	return cs[operatorID] != nil && cs[operatorID].Shares()
}

// VerifyHash calls operatorID's /verify with a hashed number (Client.VerifyHash).
func (cs Clients) VerifyHash(ctx context.Context, operatorID, accessToken, sha256Hex, correlator string) (Answer, error) {
	c := cs[operatorID]
	if c == nil {
		return Answer{}, ErrNoClient
	}
	return c.VerifyHash(ctx, accessToken, sha256Hex, correlator)
}

// ShareNumber calls operatorID's /device-phone-number (Client.Share).
func (cs Clients) ShareNumber(ctx context.Context, operatorID, accessToken, correlator string) (Answer, error) {
	c := cs[operatorID]
	if c == nil {
		return Answer{}, ErrNoClient
	}
	return c.Share(ctx, accessToken, correlator)
}

// VerifyNumber calls operatorID's /verify (Client.Verify).
func (cs Clients) VerifyNumber(ctx context.Context, operatorID, accessToken, e164, correlator string) (Answer, error) {
	c := cs[operatorID]
	if c == nil {
		return Answer{}, ErrNoClient
	}
	return c.Verify(ctx, accessToken, e164, correlator)
}
