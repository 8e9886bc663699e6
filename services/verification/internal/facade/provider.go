// Package facade is mnv as a CAMARA Number Verification provider: the OpenID provider in front
// of the API (zitadel/oidc's op, its storage in the verification schema through the Store port)
// and the API's two operations, phoneNumberVerify and phoneNumberShare, answered in CAMARA's
// own bodies. The device opens the authorization endpoint over mobile data; the line is
// identified there (package network, as for a capture) into a capture session of its own, whose
// sealed blob the code, then the access token, carries. Each API call verifies that session
// through package verify, so it is a verification like any other: recorded, limited per
// number, charged, and completed with its event.
//
// When header enrichment does not identify the line and the device's operator is one whose
// network API the client enabled (NETWORK_API), the session waits for that operator instead
// (package sessions, as an SDK session): the device is sent to the operator's authorization
// endpoint and comes back to OperatorCallbackPath, where the operator's code is exchanged, its
// single-use token kept sealed with the session, and only then the facade's own code issued.
// The API call then asks the operator's API with that token (package verify).
package facade

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/uuid"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/verification/internal/network"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
	"github.com/mnvhq/mnv/services/verification/internal/sessions"
)

// The CAMARA scopes of the two operations.
const (
	ScopeVerify = "number-verification:verify"
	ScopeShare  = "number-verification:device-phone-number:read"
)

// MaxTokenTTL is the longest an access token lives (CAMARA: at most 300 s).
const MaxTokenTTL = 300 * time.Second

// AuthRequest is an authorization request, from the device's visit of the authorization
// endpoint to the exchange of its code.
type AuthRequest struct {
	ID, ClientID, RedirectURI, State, Nonce string
	Scopes                                  []string
	ResponseMode                            string
	CodeChallenge, CodeChallengeMethod      string
	// SessionID and Blob are the capture session the line was identified into. Blob is empty
	// while the session waits for its operator's authorization (NETWORK_API).
	SessionID, Blob string
	CreatedAt       time.Time
	ExpiresAt       time.Time
}

// Token is an access token: one call of the API within its life.
type Token struct {
	ID, ClientID, SessionID, Blob string
	Scopes                        []string
	// Features and Operators are the client's when it authenticated at the token endpoint, a
	// record (the columns are NOT NULL for the version before): the call is decided with the
	// client's principal of its own time (Principals).
	Features  []string
	Operators principal.Operators
	ExpiresAt time.Time
}

// Store is what the provider keeps in the service's schema. What the provider's library hands
// back by id alone (a request's, a token's) the store finds the client of itself; the rest names
// the client (docs/operations.md#past-one-postgresql).
type Store interface {
	InsertAuthRequest(ctx context.Context, a AuthRequest) error
	// AuthRequest reads an unexpired request (fault.ErrNotFound otherwise), as does the next.
	AuthRequest(ctx context.Context, id string) (AuthRequest, error)
	// AuthRequestByCode reads a client's request by its code: the token endpoint knows the
	// client, which authenticated before its code is looked up.
	AuthRequestByCode(ctx context.Context, clientID string, codeHash []byte) (AuthRequest, error)
	SaveCode(ctx context.Context, id string, codeHash []byte) error
	// TakeAuthRequest deletes a client's unexpired request and returns it: the one exchange of
	// its code.
	TakeAuthRequest(ctx context.Context, clientID, id string) (AuthRequest, error)
	DeleteAuthRequest(ctx context.Context, id string) error
	// CompleteAuthRequest gives the client's unexpired request waiting for the operator's
	// authorization of session sessionID its blob, once, and returns it; TakePendingAuthRequest
	// deletes such a request and returns it (fault.ErrNotFound, both, when there is none).
	CompleteAuthRequest(ctx context.Context, clientID, sessionID, blob string) (AuthRequest, error)
	TakePendingAuthRequest(ctx context.Context, clientID, sessionID string) (AuthRequest, error)
	InsertToken(ctx context.Context, t Token) error
	// Token reads an unexpired, unused token (fault.ErrNotFound otherwise).
	Token(ctx context.Context, id string) (Token, error)
	// UseToken marks a client's unexpired token used; false when it was used or expired
	// already.
	UseToken(ctx context.Context, clientID, id string) (bool, error)
	// ProviderKeys reads the sealed keys (fault.ErrNotFound before the first start);
	// InsertProviderKeys writes them unless another replica did first.
	ProviderKeys(ctx context.Context) (keyID string, sealed []byte, err error)
	InsertProviderKeys(ctx context.Context, keyID string, sealed []byte) error
}

// Accounts authenticates clients and tells whether a redirect URI is one they registered;
// accountsclient.Client is one.
type Accounts interface {
	AuthenticateClientSecret(ctx context.Context, clientID, secret string) (principal.Principal, error)
	AllowsRedirectURI(ctx context.Context, clientID, uri string) (allowed, registered bool, err error)
}

// Principals reads a client's principal of now, by its id: principalcache.Cache (in front of
// accounts' GetClientPrincipal) is one.
type Principals interface {
	ClientPrincipal(ctx context.Context, clientID string) (principal.Principal, error)
}

// Sessions opens the capture session of an authorization, and completes one that waited for
// its operator's authorization; sessions.Service is one.
type Sessions interface {
	OpenCAMARA(ctx context.Context, clientID string, n network.Request, access sessions.ClientAccess) (sessions.Capture, error)
	CompleteCAMARA(ctx context.Context, a sessions.Authorization) (sessions.Capture, error)
}

// keys are the provider's: the ID-token signing key and the key that seals codes and tokens.
type keys struct {
	id     string
	signer *rsa.PrivateKey
	sealer [32]byte
}

type sealedKeys struct {
	RSA    []byte `json:"rsa"`
	Sealer []byte `json:"sealer"`
}

const keysAD = "verification.camara_keys:provider"

// loadKeys reads the provider's keys, making them on the first start.
func loadKeys(ctx context.Context, st Store, ring *crypto.Keyring) (keys, error) {
	id, sealed, err := st.ProviderKeys(ctx)
	if errors.Is(err, fault.ErrNotFound) {
		k, gerr := rsa.GenerateKey(rand.Reader, 2048)
		if gerr != nil {
			return keys{}, gerr
		}
		var s sealedKeys
		s.RSA = x509.MarshalPKCS1PrivateKey(k)
		s.Sealer = make([]byte, 32)
		if _, err := rand.Read(s.Sealer); err != nil {
			return keys{}, err
		}
		plain, _ := json.Marshal(s)
		if ierr := st.InsertProviderKeys(ctx, uuid.NewString(), ring.Seal(plain, []byte(keysAD))); ierr != nil {
			return keys{}, ierr
		}
		id, sealed, err = st.ProviderKeys(ctx)
	}
	if err != nil {
		return keys{}, fmt.Errorf("camara provider keys: %w", err)
	}
	plain, err := ring.Open(sealed, []byte(keysAD))
	if err != nil {
		return keys{}, fmt.Errorf("camara provider keys do not open with MNV_DATA_KEYS: %w", err)
	}
	var s sealedKeys
	if err := json.Unmarshal(plain, &s); err != nil || len(s.Sealer) != 32 {
		return keys{}, errors.New("camara provider keys: malformed")
	}
	k, err := x509.ParsePKCS1PrivateKey(s.RSA)
	if err != nil {
		return keys{}, fmt.Errorf("camara provider keys: %w", err)
	}
	out := keys{id: id, signer: k}
	copy(out.sealer[:], s.Sealer)
	return out, nil
}

// storage is the provider's op.Storage over Store and accounts.
type storage struct {
	st         Store
	accounts   Accounts
	principals Principals
	sessions   Sessions
	keys       keys
	tokenTTL   time.Duration
	callback   string
	now        func() time.Time
}

var _ op.Storage = (*storage)(nil)

// requestState is what the facade's middleware learns of a request for the storage: the
// network it came through, the redirect URI it names, and the client that authenticated; and
// what the storage tells the provider back: the operator's authorization URL the device goes
// to instead of the login step (client.LoginURL).
type requestState struct {
	net         network.Request
	redirectURI string
	// authorize is a request of the authorization endpoint.
	authorize   bool
	principal   *principal.Principal
	operatorURL string
}

type stateKey struct{}

func stateOf(ctx context.Context) *requestState {
	s, _ := ctx.Value(stateKey{}).(*requestState)
	if s == nil {
		return &requestState{}
	}
	return s
}

func codeHash(code string) []byte {
	h := sha256.Sum256([]byte(code))
	return h[:]
}

// notFound is the op's "no such thing": an unknown code or request is invalid_grant.
type notFound struct{ error }

func (notFound) IsNotFound() {}

func lookup(a AuthRequest, err error) (op.AuthRequest, error) {
	if errors.Is(err, fault.ErrNotFound) {
		return nil, oidc.ErrInvalidGrant().WithDescription("unknown or expired authorization").WithParent(notFound{err})
	}
	if err != nil {
		return nil, err
	}
	return &authRequest{a}, nil
}

// CreateAuthRequest identifies the line the device's request came through and opens its
// capture session; the request is done at once (no login page): the network is the login. Or,
// when the session waits for its operator's network API, the device is sent there (LoginURL)
// and the request is done when the operator sends it back (Facade.operatorCallback).
func (s *storage) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	if _, err := uuid.Parse(req.ClientID); err != nil {
		return nil, oidc.ErrInvalidClient()
	}
	c, err := s.sessions.OpenCAMARA(ctx, req.ClientID, stateOf(ctx).net, s.access(req.ClientID))
	if errors.Is(err, fault.ErrUnavailable) {
		return nil, errTemporarilyUnavailable()
	}
	if err != nil {
		return nil, err
	}
	a := AuthRequest{
		ID: uuid.NewString(), ClientID: req.ClientID, RedirectURI: req.RedirectURI, State: req.State, Nonce: req.Nonce,
		Scopes: req.Scopes, ResponseMode: string(req.ResponseMode), CodeChallenge: req.CodeChallenge,
		CodeChallengeMethod: string(req.CodeChallengeMethod), SessionID: c.SessionID, Blob: c.Blob,
		CreatedAt: s.now(), ExpiresAt: c.ExpiresAt,
	}
	if err := s.st.InsertAuthRequest(ctx, a); err != nil {
		return nil, err
	}
	stateOf(ctx).operatorURL = c.AuthorizationURL
	return &authRequest{a}, nil
}

// access is what clientID may use, asked of accounts: an unknown client may use nothing.
func (s *storage) access(clientID string) sessions.ClientAccess {
	return func(ctx context.Context) (operators.Client, error) {
		p, err := s.principals.ClientPrincipal(ctx, clientID)
		if errors.Is(err, fault.ErrNotFound) || err == nil && p.Status != principal.StatusActive {
			return operators.Client{}, nil
		}
		if err != nil {
			return operators.Client{}, err
		}
		return operators.ClientOf(p), nil
	}
}

// errTemporarilyUnavailable is OAuth's answer when a backend (accounts, the operator) does not
// answer: the client may try again.
func errTemporarilyUnavailable() *oidc.Error {
	return &oidc.Error{ErrorType: "temporarily_unavailable", Description: "The authorization server is temporarily unavailable; try again."}
}

func (s *storage) AuthRequestByID(ctx context.Context, id string) (op.AuthRequest, error) {
	if _, err := uuid.Parse(id); err != nil {
		return nil, oidc.ErrInvalidRequest().WithDescription("unknown authorization")
	}
	return lookup(s.st.AuthRequest(ctx, id))
}

// AuthRequestByCode reads the request of a code for the token endpoint, which authenticated
// the client first (AuthorizeClientIDSecret): a code is looked up among that client's, so a
// code of another client is as unknown as a forged one.
func (s *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	p := stateOf(ctx).principal
	if p == nil {
		return lookup(AuthRequest{}, fault.ErrNotFound)
	}
	return lookup(s.st.AuthRequestByCode(ctx, p.ClientID, codeHash(code)))
}

func (s *storage) SaveAuthCode(ctx context.Context, id, code string) error {
	return s.st.SaveCode(ctx, id, codeHash(code))
}

func (s *storage) DeleteAuthRequest(ctx context.Context, id string) error {
	return s.st.DeleteAuthRequest(ctx, id)
}

// CreateAccessToken exchanges an authorization's code, once: the request is taken (deleted)
// here, after the client proved itself, so a second exchange of the code, concurrent or not,
// finds nothing. The token lives at most the token TTL and never past its session.
func (s *storage) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	ar, ok := req.(*authRequest)
	if !ok {
		return "", time.Time{}, oidc.ErrUnsupportedGrantType()
	}
	p := stateOf(ctx).principal
	if p == nil || p.ClientID != ar.ClientID {
		return "", time.Time{}, oidc.ErrInvalidClient()
	}
	a, err := s.st.TakeAuthRequest(ctx, ar.ClientID, ar.ID)
	if errors.Is(err, fault.ErrNotFound) {
		return "", time.Time{}, oidc.ErrInvalidGrant().WithDescription("the code was used or has expired")
	}
	if err != nil {
		return "", time.Time{}, err
	}
	exp := s.now().Add(s.tokenTTL)
	if a.ExpiresAt.Before(exp) {
		exp = a.ExpiresAt
	}
	t := Token{
		ID: uuid.NewString(), ClientID: a.ClientID, SessionID: a.SessionID, Blob: a.Blob,
		Scopes:   slices.DeleteFunc(slices.Clone(a.Scopes), func(sc string) bool { return sc != ScopeVerify && sc != ScopeShare }),
		Features: p.Features, Operators: p.Operators, ExpiresAt: exp,
	}
	if err := s.st.InsertToken(ctx, t); err != nil {
		return "", time.Time{}, err
	}
	return t.ID, exp, nil
}

// CreateAccessAndRefreshTokens is never reached: no client has the refresh_token grant.
func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, oidc.ErrUnsupportedGrantType().WithDescription("no refresh tokens")
}

func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

func (s *storage) TerminateSession(context.Context, string, string) error { return nil }

// RevokeToken is never reached: tokens are single use and short-lived, and revocation is not
// served.
func (s *storage) RevokeToken(context.Context, string, string, string) *oidc.Error {
	return oidc.ErrInvalidRequest().WithDescription("tokens are single use and short-lived; revocation is not offered")
}

func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

type signingKey struct{ k keys }

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.k.signer }
func (k signingKey) ID() string                                  { return k.k.id }

type publicKey struct{ k keys }

func (k publicKey) ID() string                         { return k.k.id }
func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.k.signer.PublicKey }

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) { return signingKey{s.keys}, nil }
func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}
func (s *storage) KeySet(context.Context) ([]op.Key, error) { return []op.Key{publicKey{s.keys}}, nil }

// GetClientByClientID describes a client to the provider. Its redirect URIs are the one the
// request names when accounts finds it among the client's registered URIs, the whole string
// compared (RFC 9700, section 2.1; an http loopback IP literal on any port, RFC 8252, section
// 7.3): an origin names a site, and a code sent to any page of it is a code given to whoever
// controls that page. On the authorization endpoint a URI that is not one is refused here, with
// the reason; on the token endpoint the library then finds the code's URI is not the client's.
func (s *storage) GetClientByClientID(ctx context.Context, clientID string) (op.Client, error) {
	if _, err := uuid.Parse(clientID); err != nil {
		// An OAuth error, not a bare one: the authorization endpoint would answer a bare error
		// 500 (and log it as the server's), though anyone can send any client id. The token
		// endpoint answers invalid_client whatever this says.
		return nil, oidc.ErrInvalidRequest().WithDescription("unknown client_id").WithParent(notFound{errors.New("unknown client")})
	}
	st := stateOf(ctx)
	c := &client{id: clientID, callback: s.callback, req: st}
	if st.redirectURI == "" {
		return c, nil
	}
	allowed, registered, err := s.accounts.AllowsRedirectURI(ctx, clientID, st.redirectURI)
	switch {
	case err != nil:
		return nil, err
	case allowed:
		// accounts registers http only on a loopback host.
		c.redirects, c.dev = []string{st.redirectURI}, strings.HasPrefix(st.redirectURI, "http://")
	case st.authorize && !registered:
		// A client that has not registered its URIs yet (or none at all: an unknown client id
		// reads the same) is told what to do.
		return nil, oidc.ErrInvalidRequestRedirectURI().WithDescription(
			"no redirect URI is registered for this client_id; the client's ADMIN key registers them with PUT /v1/api/me/redirect-uris")
	case st.authorize:
		return nil, oidc.ErrInvalidRequestRedirectURI().WithDescription(
			"redirect_uri is not one the client registered: it must be one of them exactly, path and query included")
	}
	return c, nil
}

// AuthorizeClientIDSecret checks the client's secret with accounts (the first-key route's
// check) and keeps the client's principal for the token it will get.
func (s *storage) AuthorizeClientIDSecret(ctx context.Context, clientID, secret string) error {
	p, err := s.accounts.AuthenticateClientSecret(ctx, clientID, secret)
	if err != nil {
		return err
	}
	if p.Status != principal.StatusActive {
		return errors.New("client is not active")
	}
	stateOf(ctx).principal = &p
	return nil
}

// SetUserinfoFromScopes gives the ID token its subject: the library builds the token's claims
// from this userinfo and takes its subject over the request's, so one left empty would issue an
// ID token without sub, which a relying party refuses whole. The subject is the capture session
// of the flow (authRequest.GetSubject): never the number, no claim of a scope is added.
func (s *storage) SetUserinfoFromScopes(_ context.Context, u *oidc.UserInfo, subject, _ string, _ []string) error {
	if subject == "" {
		return errors.New("an authorization without a session has no subject")
	}
	u.Subject = subject
	return nil
}

// SetUserinfoFromToken and SetIntrospectionFromToken are never reached: neither endpoint is
// served (op.Storage wants them all the same).
func (s *storage) SetUserinfoFromToken(context.Context, *oidc.UserInfo, string, string, string) error {
	return errors.New("userinfo is not offered")
}

func (s *storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errors.New("introspection is not offered")
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("private_key_jwt is not offered")
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("the JWT profile grant is not offered")
}

func (s *storage) Health(context.Context) error { return nil }

// client is a client as the provider sees it: confidential (client_secret_basic or _post),
// the code flow only, opaque access tokens.
type client struct {
	id        string
	redirects []string
	dev       bool
	callback  string
	// req is the request the client was read in: an authorization that waits for its
	// operator sets the operator's URL there.
	req *requestState
}

func (c *client) GetID() string                       { return c.id }
func (c *client) RedirectURIs() []string              { return c.redirects }
func (c *client) PostLogoutRedirectURIs() []string    { return nil }
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c *client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) GrantTypes() []oidc.GrantType { return []oidc.GrantType{oidc.GrantTypeCode} }

// LoginURL sends the device straight to the callback: the authorization was done when the line
// was identified. An authorization that waits for its operator sends the device to the
// operator's authorization endpoint.
func (c *client) LoginURL(id string) string {
	if c.req != nil && c.req.operatorURL != "" {
		return c.req.operatorURL
	}
	return c.callback + "?id=" + url.QueryEscape(id)
}
func (c *client) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeBearer }
func (c *client) IDTokenLifetime() time.Duration      { return 5 * time.Minute }
func (c *client) DevMode() bool                       { return c.dev }
func (c *client) IsScopeAllowed(scope string) bool {
	return scope == ScopeVerify || scope == ScopeShare
}
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *client) ClockSkew() time.Duration             { return 0 }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// authRequest is an AuthRequest as the provider reads it. Its subject is the capture session:
// an ID token never carries the number.
type authRequest struct{ AuthRequest }

func (a *authRequest) GetID() string          { return a.ID }
func (a *authRequest) GetACR() string         { return "" }
func (a *authRequest) GetAMR() []string       { return nil }
func (a *authRequest) GetAudience() []string  { return []string{a.ClientID} }
func (a *authRequest) GetAuthTime() time.Time { return a.CreatedAt }
func (a *authRequest) GetClientID() string    { return a.ClientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge {
	if a.CodeChallenge == "" {
		return nil
	}
	return &oidc.CodeChallenge{Challenge: a.CodeChallenge, Method: oidc.CodeChallengeMethod(a.CodeChallengeMethod)}
}
func (a *authRequest) GetNonce() string                   { return a.Nonce }
func (a *authRequest) GetRedirectURI() string             { return a.RedirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType { return oidc.ResponseTypeCode }
func (a *authRequest) GetResponseMode() oidc.ResponseMode { return oidc.ResponseMode(a.ResponseMode) }
func (a *authRequest) GetScopes() []string                { return a.Scopes }
func (a *authRequest) GetState() string                   { return a.State }
func (a *authRequest) GetSubject() string                 { return a.SessionID }
func (a *authRequest) Done() bool                         { return a.Blob != "" }

// server is the provider as the legacy server routes it, with discovery trimmed to what is
// served: the code flow with client_secret_basic or _post, and no introspection or revocation.
type server struct{ *op.LegacyServer }

func (s *server) Discovery(ctx context.Context, r *op.Request[struct{}]) (*op.Response, error) {
	resp, err := s.LegacyServer.Discovery(ctx, r)
	if err != nil {
		return nil, err
	}
	d, ok := resp.Data.(*oidc.DiscoveryConfiguration)
	if !ok {
		return nil, fmt.Errorf("discovery: unexpected %T", resp.Data)
	}
	// The library names every grant and response type it knows, and the auth methods of the
	// endpoints left out; a client reads them as offers.
	d.GrantTypesSupported = []oidc.GrantType{oidc.GrantTypeCode}
	d.ResponseTypesSupported = []string{string(oidc.ResponseTypeCode)}
	// Every client is confidential: "none" (a public client) is never accepted.
	d.TokenEndpointAuthMethodsSupported = []oidc.AuthMethod{oidc.AuthMethodBasic, oidc.AuthMethodPost}
	d.IntrospectionEndpointAuthMethodsSupported, d.IntrospectionEndpointAuthSigningAlgValuesSupported = nil, nil
	d.RevocationEndpointAuthMethodsSupported, d.RevocationEndpointAuthSigningAlgValuesSupported = nil, nil
	return resp, nil
}

// Authorize refuses a PKCE challenge of any method but S256, the only one discovery offers (the
// library takes plain, which is also what a challenge without a method means), and keeps of the
// scopes requested only those it grants: openid and the API's. The library would keep the
// userinfo scopes and offline_access and echo them back as granted, though no claim of theirs
// and no refresh token is ever issued. Both run after the redirect URI was found to be the
// client's, so a refusal goes back to it.
func (s *server) Authorize(ctx context.Context, r *op.ClientRequest[oidc.AuthRequest]) (*op.Redirect, error) {
	if r.Data.CodeChallenge != "" && r.Data.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return nil, oidc.ErrInvalidRequest().WithDescription("code_challenge_method must be S256")
	}
	r.Data.Scopes = slices.DeleteFunc(r.Data.Scopes, func(sc string) bool {
		return sc != oidc.ScopeOpenID && sc != ScopeVerify && sc != ScopeShare
	})
	return s.LegacyServer.Authorize(ctx, r)
}

// CodeExchange binds a code issued for a PKCE challenge to its verifier: the library checks the
// verifier only for public clients or when one is sent, so a confidential client's stolen code
// would be exchanged without it. A verifier for a code issued without a challenge is refused
// too (the downgrade). The refusal comes before the exchange and does not spend the code.
func (s *server) CodeExchange(ctx context.Context, r *op.ClientRequest[oidc.AccessTokenRequest]) (*op.Response, error) {
	a, err := op.AuthRequestByCode(ctx, s.Provider().Storage(), r.Data.Code)
	if err != nil {
		return nil, err
	}
	if err := op.AuthorizeCodeChallenge(r.Data.CodeVerifier, a.GetCodeChallenge()); err != nil {
		return nil, err
	}
	return s.LegacyServer.CodeExchange(ctx, r)
}

// JWTProfile refuses the JWT bearer grant, which the token endpoint would otherwise try: only
// the authorization code is exchanged here.
func (s *server) JWTProfile(context.Context, *op.Request[oidc.JWTProfileGrantRequest]) (*op.Response, error) {
	return nil, oidc.ErrUnsupportedGrantType().WithDescription("only authorization_code is offered")
}
