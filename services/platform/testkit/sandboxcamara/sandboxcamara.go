// Package sandboxcamara is a stand-in mobile operator that speaks CAMARA Number Verification
// (API v2) behind OpenID Connect: the tests' fake operator, and at run time the sandbox-camara
// operator of `make run` (cmd/mnv starts it), so the NETWORK_API flow can be walked locally. An
// operator is an outside system: this is the local stand-in mnv's NETWORK_API method talks to.
// No service binary links it (tests/deps checks that).
//
// It serves:
//   - OIDC discovery (/.well-known/openid-configuration);
//   - an authorization endpoint (/authorize) for the authorization code flow with prompt=none
//     and PKCE S256: the "line" of the device is the number in the MSISDN header (by default
//     X-Mnv-Sandbox-Msisdn, which the sandbox sets); without it the device is sent back to the
//     redirect URI with error=login_required, as an operator does when the request did not come
//     over its mobile network;
//   - a token endpoint (/token) checking the client (client_secret_basic or private_key_jwt),
//     the single-use code, the redirect URI and the PKCE verifier; its access tokens live at most
//     300 s, are single use and come without a refresh token;
//   - {apiRoot}/number-verification/v2/verify and /device-phone-number per the API definition:
//     errors as {status, code, message}, x-correlator echoed;
//   - for backend calls (swap.go): a CIBA backchannel authentication endpoint (/bc-authorize)
//     with the CIBA grant at the token endpoint (pending for a set number of polls, slow_down
//     when asked), the client credentials grant, and the SIM Swap (v2) and Device Swap (v1)
//     APIs' check and retrieve-date.
//
// Behaviour knobs (SetBehaviour) make a line's calls slow, fail with a 5xx, or be refused with
// 403 NUMBER_VERIFICATION.USER_NOT_AUTHENTICATED_BY_MOBILE_NETWORK; SetLine and SetCIBA set what
// the swap APIs and the backchannel flow answer.
package sandboxcamara

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// DefaultMSISDNHeader is the header the fake reads the device's line from: the sandbox header.
const DefaultMSISDNHeader = "X-Mnv-Sandbox-Msisdn"

// Scopes of the Number Verification API.
const (
	ScopeVerify = "number-verification:verify"
	ScopeShare  = "number-verification:device-phone-number:read"
)

// Client is a client registered at the fake operator.
type Client struct {
	ID string
	// Secret authenticates the client with client_secret_basic; empty: not allowed.
	Secret string
	// PublicKey checks the client's private_key_jwt assertions; nil: not allowed.
	PublicKey crypto.PublicKey
	// RedirectURIs are the registered redirect URIs; a redirect_uri must be one of them exactly.
	RedirectURIs []string
}

// Behaviour is what the fake does for one line (or every line).
type Behaviour struct {
	// Delay is waited before answering the Number Verification API.
	Delay time.Duration
	// Status5xx, when set, is the status the Number Verification API answers (503, 500…); the
	// token is not consumed.
	Status5xx int
	// NotAuthenticatedByMobileNetwork answers the API with 403
	// NUMBER_VERIFICATION.USER_NOT_AUTHENTICATED_BY_MOBILE_NETWORK.
	NotAuthenticatedByMobileNetwork bool
}

// Options configure a fake operator.
type Options struct {
	Clients []Client
	// MSISDNHeader is the header the authorization endpoint reads the line from.
	MSISDNHeader string
	// TokenTTL is the access tokens' lifetime; 0 or more than 300 s is 300 s.
	TokenTTL time.Duration
}

// Fake is a running fake operator.
type Fake struct {
	// URL is its base URL: the issuer, and the API root.
	URL string

	srv  *http.Server
	lis  net.Listener
	opts Options
	now  func() time.Time

	mu        sync.Mutex
	clients   map[string]Client
	codes     map[string]*grant
	tokens    map[string]*grant
	jtis      map[string]time.Time
	behaviour map[string]Behaviour // by MSISDN; "" for every line
	calls     int
	lastCorr  string

	// The backend flows (swap.go).
	lines    map[string]Line // by MSISDN; "" for every line without its own
	ciba     CIBA
	cibaReqs map[string]*cibaRequest
	polls    []time.Time
	swapHits int
}

type grant struct {
	clientID, redirectURI, challenge, msisdn string
	scopes                                   []string
	expires                                  time.Time
	// reusable marks a token of the backend grants (CIBA, client credentials): good for any
	// number of calls until it expires, as those grants' tokens are.
	reusable bool
}

// Start serves a fake operator on addr ("127.0.0.1:0" for any free port).
func Start(addr string, opts Options) (*Fake, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("sandboxcamara: %w", err)
	}
	f := New("http://"+lis.Addr().String(), opts)
	f.lis = lis
	f.srv = &http.Server{Handler: f.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = f.srv.Serve(lis) }()
	return f, nil
}

// New returns a fake operator whose base URL is baseURL, not yet serving: serve Handler.
func New(baseURL string, opts Options) *Fake {
	if opts.MSISDNHeader == "" {
		opts.MSISDNHeader = DefaultMSISDNHeader
	}
	if opts.TokenTTL <= 0 || opts.TokenTTL > 300*time.Second {
		opts.TokenTTL = 300 * time.Second
	}
	f := &Fake{
		URL: strings.TrimSuffix(baseURL, "/"), opts: opts, now: time.Now, clients: map[string]Client{},
		codes: map[string]*grant{}, tokens: map[string]*grant{}, jtis: map[string]time.Time{}, behaviour: map[string]Behaviour{},
		lines: map[string]Line{}, cibaReqs: map[string]*cibaRequest{},
	}
	for _, c := range opts.Clients {
		f.clients[c.ID] = c
	}
	return f
}

// Addr is the address the fake listens on (Start only).
func (f *Fake) Addr() string { return f.lis.Addr().String() }

// Close stops the fake.
func (f *Fake) Close() error {
	if f.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return f.srv.Shutdown(ctx)
}

// AddRedirectURI registers one more redirect URI for a client (the gateway's address is often
// known only after the fake started).
func (f *Fake) AddRedirectURI(clientID, uri string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.clients[clientID]
	c.RedirectURIs = append(slices.Clone(c.RedirectURIs), uri)
	f.clients[clientID] = c
}

// SetBehaviour sets what the API does for the line msisdn ("" for every line without its own).
func (f *Fake) SetBehaviour(msisdn string, b Behaviour) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.behaviour[msisdn] = b
}

// APICalls is how many Number Verification API calls the fake answered.
func (f *Fake) APICalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// LastCorrelator is the x-correlator of the last Number Verification API call ("" for none).
func (f *Fake) LastCorrelator() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastCorr
}

// DiscoveryURL is the fake's OpenID Connect discovery document.
func (f *Fake) DiscoveryURL() string { return f.URL + "/.well-known/openid-configuration" }

// Handler serves the fake's routes.
func (f *Fake) Handler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /.well-known/openid-configuration", f.discovery)
	m.HandleFunc("GET /authorize", f.authorize)
	m.HandleFunc("POST /token", f.token)
	m.HandleFunc("POST /number-verification/v2/verify", f.api(ScopeVerify, f.verify))
	m.HandleFunc("GET /number-verification/v2/device-phone-number", f.api(ScopeShare, f.share))
	f.swapRoutes(m)
	return m
}

func (f *Fake) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                f.URL,
		"authorization_endpoint":                f.URL + "/authorize",
		"token_endpoint":                        f.URL + "/token",
		"jwks_uri":                              f.URL + "/jwks",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"scopes_supported": []string{
			"openid", ScopeVerify, ScopeShare, ScopeSIMSwapCheck, ScopeSIMSwapDate, ScopeDeviceSwapCheck, ScopeDeviceSwapDate,
		},
		"grant_types_supported":                      []string{"authorization_code", GrantCIBA, "client_credentials"},
		"backchannel_authentication_endpoint":        f.URL + "/bc-authorize",
		"backchannel_token_delivery_modes_supported": []string{"poll"},
		"token_endpoint_auth_methods_supported":      []string{"client_secret_basic", "private_key_jwt"},
		"code_challenge_methods_supported":           []string{"S256"},
		"prompt_values_supported":                    []string{"none"},
	})
}

// authorize is the authorization endpoint. Errors before the redirect URI is known good are
// answered to the device (400); after, they go back to the redirect URI, as OAuth says.
func (f *Fake) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f.mu.Lock()
	c, ok := f.clients[q.Get("client_id")]
	f.mu.Unlock()
	redirect := q.Get("redirect_uri")
	if !ok || !slices.Contains(c.RedirectURIs, redirect) {
		http.Error(w, "unknown client or unregistered redirect_uri", http.StatusBadRequest)
		return
	}
	back := func(params url.Values) {
		params.Set("state", q.Get("state"))
		u, _ := url.Parse(redirect)
		v := u.Query()
		for k, vs := range params {
			v[k] = vs
		}
		u.RawQuery = v.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound) //nolint:gosec // G710: a registered redirect_uri, checked above
	}
	scopes := strings.Fields(q.Get("scope"))
	switch {
	case q.Get("response_type") != "code":
		back(url.Values{"error": {"unsupported_response_type"}})
		return
	case !slices.Contains(scopes, "openid"):
		back(url.Values{"error": {"invalid_scope"}, "error_description": {"openid is required"}})
		return
	case q.Get("prompt") != "none":
		back(url.Values{"error": {"invalid_request"}, "error_description": {"Number Verification needs prompt=none"}})
		return
	case q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43:
		back(url.Values{"error": {"invalid_request"}, "error_description": {"PKCE with S256 is required"}})
		return
	}
	msisdn := r.Header.Get(f.opts.MSISDNHeader)
	if !phonePattern.MatchString(msisdn) {
		back(url.Values{"error": {"login_required"}, "error_description": {"the request did not come over the mobile network"}})
		return
	}
	code := random()
	f.mu.Lock()
	f.codes[code] = &grant{
		clientID: c.ID, redirectURI: redirect, challenge: q.Get("code_challenge"), msisdn: msisdn,
		scopes: scopes, expires: f.now().Add(time.Minute),
	}
	f.mu.Unlock()
	back(url.Values{"code": {code}})
}

// token is the token endpoint: the authorization code grant here, the CIBA and client
// credentials grants in swap.go.
func (f *Fake) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "malformed form")
		return
	}
	clientID, err := f.authenticate(r, f.URL+"/token")
	if err != nil {
		oauthError(w, http.StatusUnauthorized, "invalid_client", err.Error())
		return
	}
	switch r.PostForm.Get("grant_type") {
	case GrantCIBA:
		f.cibaToken(w, r, clientID)
		return
	case "client_credentials":
		f.clientCredentials(w, r, clientID)
		return
	}
	if r.PostForm.Get("grant_type") != "authorization_code" {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "authorization_code only")
		return
	}
	code := r.PostForm.Get("code")
	f.mu.Lock()
	g, ok := f.codes[code]
	delete(f.codes, code) // single use, whatever happens next
	f.mu.Unlock()
	switch {
	case !ok || f.now().After(g.expires) || g.clientID != clientID:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown, used or expired code")
		return
	case r.PostForm.Get("redirect_uri") != g.redirectURI:
		oauthError(w, http.StatusBadRequest, "invalid_grant", "redirect_uri does not match")
		return
	}
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	if subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(g.challenge)) != 1 {
		oauthError(w, http.StatusBadRequest, "invalid_grant", "PKCE verification failed")
		return
	}
	tok := random()
	t := *g
	t.expires = f.now().Add(f.opts.TokenTTL)
	f.mu.Lock()
	f.tokens[tok] = &t
	f.mu.Unlock()
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": tok, "token_type": "Bearer", "expires_in": int(f.opts.TokenTTL / time.Second),
		"scope": strings.Join(g.scopes, " "),
	})
}

// authenticate checks the client of a request: client_secret_basic, or private_key_jwt whose
// assertion names one of aud as its audience.
func (f *Fake) authenticate(r *http.Request, aud ...string) (string, error) {
	if id, secret, ok := r.BasicAuth(); ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
		f.mu.Lock()
		c, known := f.clients[id]
		f.mu.Unlock()
		if !known || c.Secret == "" || subtle.ConstantTimeCompare([]byte(secret), []byte(c.Secret)) != 1 {
			return "", errors.New("client authentication failed")
		}
		return id, nil
	}
	if r.PostForm.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
		return "", errors.New("no client authentication")
	}
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(r.PostForm.Get("client_assertion"), &claims, func(t *jwt.Token) (any, error) {
		iss, _ := t.Claims.GetIssuer()
		f.mu.Lock()
		c, known := f.clients[iss]
		f.mu.Unlock()
		if !known || c.PublicKey == nil {
			return nil, errors.New("unknown client")
		}
		return c.PublicKey, nil
	}, jwt.WithValidMethods([]string{"RS256", "PS256", "ES256"}), jwt.WithAudience(aud...),
		jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithTimeFunc(f.now))
	switch {
	case err != nil:
		return "", fmt.Errorf("client assertion: %w", err)
	case claims.Subject != claims.Issuer:
		return "", errors.New("client assertion: sub must be the client id")
	case claims.ID == "":
		return "", errors.New("client assertion: jti is required")
	case claims.ExpiresAt.Sub(f.now()) > 10*time.Minute:
		return "", errors.New("client assertion: lives too long")
	}
	if cid := r.PostForm.Get("client_id"); cid != "" && cid != claims.Issuer {
		return "", errors.New("client assertion: client_id does not match")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, seen := f.jtis[claims.ID]; seen {
		return "", errors.New("client assertion: jti replayed")
	}
	f.jtis[claims.ID] = claims.ExpiresAt.Time
	return claims.Issuer, nil
}

var (
	phonePattern      = regexp.MustCompile(`^\+[1-9][0-9]{4,14}$`)
	hashedPattern     = regexp.MustCompile(`^[a-fA-F0-9]{64}$`)
	correlatorPattern = regexp.MustCompile(`^[a-zA-Z0-9-_:;./<>{}]{0,256}$`)
)

// api authenticates a Number Verification call: x-correlator, the bearer token (known, unexpired,
// unused, with scope), the line's behaviour. A call that reaches the operation uses the token up.
func (f *Fake) api(scope string, op func(w http.ResponseWriter, r *http.Request, msisdn string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// The body is read first: the server then notices a client that goes away (a timeout)
		// and cancels the request, which must not use the token up.
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4096))
		if err != nil {
			camaraError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Client specified an invalid argument, request body or query param.")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		corr := r.Header.Get("x-correlator")
		if !correlatorPattern.MatchString(corr) {
			camaraError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "x-correlator does not match its pattern")
			return
		}
		if corr != "" {
			w.Header().Set("x-correlator", corr)
		}
		f.mu.Lock()
		f.calls++
		f.lastCorr = corr
		f.mu.Unlock()
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		f.mu.Lock()
		g, known := f.tokens[tok]
		f.mu.Unlock()
		if !ok || !known || f.now().After(g.expires) {
			camaraError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request not authenticated due to missing, invalid, or expired credentials. A new authentication is required.")
			return
		}
		if !slices.Contains(g.scopes, scope) {
			camaraError(w, http.StatusForbidden, "PERMISSION_DENIED", "Client does not have sufficient permissions to perform this action.")
			return
		}
		f.mu.Lock()
		b, own := f.behaviour[g.msisdn]
		if !own {
			b = f.behaviour[""]
		}
		f.mu.Unlock()
		if b.Delay > 0 {
			select {
			case <-time.After(b.Delay):
			case <-r.Context().Done():
				return
			}
		}
		if r.Context().Err() != nil {
			return
		}
		if b.Status5xx != 0 {
			camaraError(w, b.Status5xx, "UNAVAILABLE", "Service Unavailable.")
			return
		}
		f.mu.Lock()
		_, still := f.tokens[tok]
		delete(f.tokens, tok) // single use
		f.mu.Unlock()
		if !still {
			camaraError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request not authenticated due to missing, invalid, or expired credentials. A new authentication is required.")
			return
		}
		if b.NotAuthenticatedByMobileNetwork {
			camaraError(w, http.StatusForbidden, "NUMBER_VERIFICATION.USER_NOT_AUTHENTICATED_BY_MOBILE_NETWORK", "Client must authenticate via the mobile network to use this service")
			return
		}
		op(w, r, g.msisdn)
	}
}

// verify is phoneNumberVerify: exactly one of phoneNumber and hashedPhoneNumber, nothing else.
func (f *Fake) verify(w http.ResponseWriter, r *http.Request, msisdn string) {
	var body map[string]json.RawMessage
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
	if err := dec.Decode(&body); err != nil || len(body) != 1 {
		camaraError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Client specified an invalid argument, request body or query param.")
		return
	}
	var value string
	for k, raw := range body {
		if json.Unmarshal(raw, &value) != nil {
			camaraError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Client specified an invalid argument, request body or query param.")
			return
		}
		switch {
		case k == "phoneNumber" && phonePattern.MatchString(value):
			writeJSON(w, http.StatusOK, map[string]bool{"devicePhoneNumberVerified": value == msisdn})
		case k == "hashedPhoneNumber" && hashedPattern.MatchString(value):
			sum := sha256.Sum256([]byte(msisdn))
			writeJSON(w, http.StatusOK, map[string]bool{"devicePhoneNumberVerified": strings.EqualFold(value, hex.EncodeToString(sum[:]))})
		default:
			camaraError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Client specified an invalid argument, request body or query param.")
		}
	}
}

// share is phoneNumberShare.
func (f *Fake) share(w http.ResponseWriter, _ *http.Request, msisdn string) {
	writeJSON(w, http.StatusOK, map[string]string{"devicePhoneNumber": msisdn})
}

func camaraError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]any{"status": status, "code": code, "message": message})
}

func oauthError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
