package facade

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/op"
	"go.uber.org/zap"
	"golang.org/x/text/language"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/logging"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/network"
	"github.com/mnvhq/mnv/services/verification/internal/sessions"
	"github.com/mnvhq/mnv/services/verification/internal/verify"
)

// Paths the facade serves (the gateway proxies them): OIDC discovery, the provider's
// endpoints under /oauth2/, and the API under /number-verification/v2/.
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	OAuthPrefix   = "/oauth2/"
	APIPrefix     = "/number-verification/v2/"
	VerifyPath    = APIPrefix + "verify"
	SharePath     = APIPrefix + "device-phone-number"
	// OperatorCallbackPath is where an operator's authorization sends the device back
	// (NETWORK_API): register the issuer + OperatorCallbackPath with each such operator.
	OperatorCallbackPath = OAuthPrefix + "operator/callback"
	authorizePath        = "oauth2/authorize"
	tokenPath            = "oauth2/token"
	keysPath             = "oauth2/keys"
	callbackSuffix       = "/callback"
	maxRequestBody       = 4 << 10
	correlatorLimit      = 256
)

// Verifier decides the verification of a line; verify.Service is one.
type Verifier interface {
	VerifyLine(ctx context.Context, p principal.Principal, r verify.LineRequest) (verify.LineResult, error)
}

// Config sets up the facade.
type Config struct {
	// Issuer is the public base URL clients reach the facade at (through the gateway).
	Issuer string
	// TokenTTL is the life of an access token, at most MaxTokenTTL.
	TokenTTL time.Duration
	// NetworkOf reads what a request showed of its network: the client address and number
	// headers the gateway passed, believed only from the gateway (server.HTTPNetworkOf).
	NetworkOf func(r *http.Request) network.Request
}

// Facade is the facade's HTTP handler.
type Facade struct {
	cfg        Config
	st         Store
	sessions   Sessions
	principals Principals
	verifier   Verifier
	provider   *op.Provider
	// handler routes the provider's endpoints that are served (see New).
	handler http.Handler
	sealer  op.Crypto
	log     *zap.Logger
	now     func() time.Time
}

// Deps are what the facade works with.
type Deps struct {
	Store    Store
	Accounts Accounts
	// Principals gives each API call the client as it is at that call.
	Principals Principals
	Sessions   Sessions
	Verifier   Verifier
	// Keyring seals the facade's keys in the store.
	Keyring *crypto.Keyring
	Log     *zap.Logger
}

// New builds the facade: its keys from the store (made on the first start, sealed with the
// keyring).
func New(ctx context.Context, cfg Config, d Deps) (*Facade, error) {
	if cfg.TokenTTL <= 0 || cfg.TokenTTL > MaxTokenTTL {
		cfg.TokenTTL = MaxTokenTTL
	}
	k, err := loadKeys(ctx, d.Store, d.Keyring)
	if err != nil {
		return nil, err
	}
	issuer := strings.TrimRight(cfg.Issuer, "/")
	s := &storage{
		st: d.Store, accounts: d.Accounts, principals: d.Principals, sessions: d.Sessions, keys: k, tokenTTL: cfg.TokenTTL,
		callback: issuer + "/" + authorizePath + callbackSuffix, now: time.Now,
	}
	// What CAMARA needs of the provider: the authorization and token endpoints, and the keys
	// of the ID tokens it issues for the openid scope. Userinfo, introspection, revocation,
	// end_session and device authorization are left out (nil: neither routed nor named by
	// discovery): a token is good for one API call and nothing else.
	endpoints := op.Endpoints{
		Authorization: op.NewEndpoint(authorizePath),
		Token:         op.NewEndpoint(tokenPath),
		JwksURI:       op.NewEndpoint(keysPath),
	}
	opCfg := &op.Config{
		CryptoKey:          k.sealer,
		CodeMethodS256:     true,
		AuthMethodPost:     true,
		SupportedUILocales: []language.Tag{language.English},
		SupportedScopes:    []string{"openid", ScopeVerify, ScopeShare},
		SupportedClaims:    []string{"sub", "aud", "exp", "iat", "iss", "auth_time", "nonce", "azp"},
	}
	// Codes and access tokens are sealed (AES-256-GCM) with the provider's key: an access
	// token is its row's id, sealed, so a forged one never reaches the database.
	sealer := op.NewAES256GCMCrypto(k.sealer, k.id)
	opts := []op.Option{
		op.WithCrypto(sealer),
		op.WithCustomAuthEndpoint(endpoints.Authorization),
		op.WithCustomTokenEndpoint(endpoints.Token),
		op.WithCustomKeysEndpoint(endpoints.JwksURI),
	}
	if strings.HasPrefix(issuer, "http://") {
		opts = append(opts, op.WithAllowInsecure())
	}
	provider, err := op.NewProvider(opCfg, s, op.StaticIssuer(issuer), opts...)
	if err != nil {
		return nil, err
	}
	// The provider's own router serves every endpoint the library has; the legacy server
	// routes, and discovery names, only the endpoints given. The library's CORS policy is
	// turned off: it lets every origin read every endpoint with the browser's credentials.
	// The facade has none of its own but for the public documents (ServeHTTP).
	handler := op.RegisterLegacyServer(&server{op.NewLegacyServer(provider, endpoints)}, op.AuthorizeCallbackHandler(provider),
		op.WithServerCORSOptions(nil))
	return &Facade{cfg: cfg, st: d.Store, sessions: d.Sessions, principals: d.Principals, verifier: d.Verifier, provider: provider, handler: handler,
		sealer: sealer, log: d.Log, now: time.Now}, nil
}

// ServeHTTP routes a request: the API's two operations, or the provider.
func (f *Facade) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	state := &requestState{net: f.cfg.NetworkOf(r)}
	if r.URL.Path == "/"+authorizePath || r.URL.Path == "/"+tokenPath {
		// The redirect URI the request names, checked against the client's registered URIs.
		state.authorize = r.URL.Path == "/"+authorizePath
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxRequestBody)
		}
		if err := r.ParseForm(); err == nil {
			state.redirectURI = r.Form.Get("redirect_uri")
		}
	}
	r = r.WithContext(context.WithValue(r.Context(), stateKey{}, state))
	switch r.URL.Path {
	case VerifyPath:
		f.serveAPI(w, r, http.MethodPost, ScopeVerify)
	case SharePath:
		f.serveAPI(w, r, http.MethodGet, ScopeShare)
	case OperatorCallbackPath:
		f.operatorCallback(w, r)
	default:
		if strings.HasPrefix(r.URL.Path, APIPrefix) {
			writeError(w, http.StatusNotFound, "NOT_FOUND", "The specified resource is not found.")
			return
		}
		if r.URL.Path == DiscoveryPath || r.URL.Path == "/"+keysPath {
			// Public documents, the same for everyone: any page may read them, with no
			// credentials (the wildcard never admits any). The authorization endpoint is
			// navigated to, and the token endpoint and the API are for the client's server,
			// which holds the secret: no CORS there.
			w.Header().Set("Access-Control-Allow-Origin", "*")
		}
		f.handler.ServeHTTP(w, r)
	}
}

// operatorCallback is where the operator of a NETWORK_API authorization sends the device back:
// the session is claimed by its state (once, before it expires), the operator's code exchanged
// and its token kept sealed with the session (sessions.CompleteCAMARA), and the facade's own
// authorization completed, its code sent to the client's redirect URI. A device the operator
// did not recognise (login_required) still gets the facade's code: its line is then
// UNDETERMINED, as one header enrichment did not identify. An operator that does not answer
// the exchange sends the client temporarily_unavailable. A state that is not a pending
// authorization (unknown, used, expired) names no client to send anything to: 400.
func (f *Facade) operatorCallback(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeOAuthError(w, http.StatusMethodNotAllowed, "invalid_request", "Use GET.")
		return
	}
	q := r.URL.Query()
	c, err := f.sessions.CompleteCAMARA(r.Context(), sessions.Authorization{State: q.Get("state"), Code: q.Get("code"), Error: q.Get("error")})
	switch {
	case err == nil:
		a, err := f.st.CompleteAuthRequest(r.Context(), c.ClientID, c.SessionID, c.Blob)
		if err != nil {
			f.callbackFailed(w, r, err)
			return
		}
		op.AuthResponse(&authRequest{a}, f.provider, w, r)
	case fault.Find(err, fault.Unavailable) != nil && c.SessionID != "":
		a, terr := f.st.TakePendingAuthRequest(r.Context(), c.ClientID, c.SessionID)
		if terr != nil {
			f.callbackFailed(w, r, terr)
			return
		}
		op.AuthRequestError(w, r, &authRequest{a}, errTemporarilyUnavailable(), f.provider)
	default:
		f.callbackFailed(w, r, err)
	}
}

// callbackFailed answers an operator callback that leads to no authorization of the facade.
func (f *Facade) callbackFailed(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case fault.Find(err, fault.InvalidArgument) != nil, errors.Is(err, fault.ErrNotFound):
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", "The state is not a pending authorization.")
	case fault.Find(err, fault.Unavailable) != nil:
		writeOAuthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "Try again.")
	default:
		f.log.Error("camara operator callback failed", zap.Error(err), logging.Request(r.Context()))
		writeOAuthError(w, http.StatusInternalServerError, "server_error", "Server error.")
	}
}

func writeOAuthError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

// correlatorRule is the XCorrelator schema of CAMARA's commons.
var correlatorRule = regexp.MustCompile(`^[a-zA-Z0-9\-_:;./<>{}]{0,256}$`)

// phoneNumberRule and hashRule are the PhoneNumber and HashedPhoneNumber schemas.
var (
	phoneNumberRule = regexp.MustCompile(`^\+[1-9][0-9]{4,14}$`)
	hashRule        = regexp.MustCompile(`^[a-fA-F0-9]{64}$`)
)

// serveAPI answers one of the two operations, in CAMARA's bodies.
func (f *Facade) serveAPI(w http.ResponseWriter, r *http.Request, method, scope string) {
	correlator := ""
	if c := r.Header.Values("x-correlator"); len(c) > 0 {
		if len(c) > 1 || !correlatorRule.MatchString(c[0]) {
			writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Header x-correlator does not match its pattern.")
			return
		}
		correlator = c[0]
		w.Header().Set("x-correlator", correlator)
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "Method "+r.Method+" is not allowed; use "+method+".")
		return
	}
	tok, ok := f.bearer(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request not authenticated due to missing, invalid, or expired credentials.")
		return
	}
	if !slices.Contains(tok.Scopes, scope) {
		writeError(w, http.StatusForbidden, "PERMISSION_DENIED", "Client does not have sufficient permissions to perform this action.")
		return
	}
	req := verify.LineRequest{Blob: tok.Blob, Share: scope == ScopeShare, Correlator: correlator}
	if !req.Share {
		var msg string
		if req.Number, req.NumberSHA256, msg = readVerifyBody(r); msg != "" {
			writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", msg)
			return
		}
	}
	// The client as it is now, not as it was at the token endpoint: a suspension, or a feature
	// or operator taken away since, applies to a token already issued. A suspended or unknown
	// client is refused here, before the token is spent; its features and operators are the
	// verifier's to check, with this principal.
	p, err := f.principals.ClientPrincipal(r.Context(), tok.ClientID)
	switch {
	case errors.Is(err, fault.ErrNotFound):
		writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request not authenticated due to missing, invalid, or expired credentials.")
		return
	case err != nil:
		f.fail(w, r, err)
		return
	case p.Status != principal.StatusActive:
		writeError(w, http.StatusForbidden, "PERMISSION_DENIED", "Client does not have sufficient permissions to perform this action.")
		return
	}
	used, err := f.st.UseToken(r.Context(), tok.ClientID, tok.ID)
	if err != nil {
		f.fail(w, r, err)
		return
	}
	if !used { // another call used it meanwhile
		writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request not authenticated due to missing, invalid, or expired credentials.")
		return
	}
	res, err := f.verifier.VerifyLine(r.Context(), p, req)
	if err != nil {
		f.fail(w, r, err)
		return
	}
	switch res.Verification.Outcome {
	case domain.StatusUndetermined:
		if res.Verification.Reason == domain.ReasonOperatorRefused {
			// The operator's API refused for a reason of its own (its 403 PERMISSION_DENIED).
			writeError(w, http.StatusForbidden, "PERMISSION_DENIED", "Client does not have sufficient permissions to perform this action.")
			return
		}
		writeError(w, http.StatusForbidden, "NUMBER_VERIFICATION.USER_NOT_AUTHENTICATED_BY_MOBILE_NETWORK",
			"Client must authenticate via the mobile network to use this service.")
	case domain.StatusExpired:
		writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request not authenticated due to missing, invalid, or expired credentials.")
	default:
		if req.Share {
			writeJSON(w, http.StatusOK, map[string]any{"devicePhoneNumber": res.LineNumber})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"devicePhoneNumberVerified": res.Verification.Outcome == domain.StatusVerified})
	}
}

// bearer is the unexpired, unused token the Authorization header carries.
func (f *Facade) bearer(r *http.Request) (Token, bool) {
	h := r.Header.Values("Authorization")
	if len(h) != 1 {
		return Token{}, false
	}
	raw, ok := strings.CutPrefix(h[0], "Bearer ")
	if !ok || raw == "" || len(raw) > 1024 {
		return Token{}, false
	}
	// One spelling per token: the token is a JWE whose parts the sealer decodes leniently, so a
	// part whose last character differed only in its unused bits opened as the same token.
	for _, part := range strings.Split(raw, ".") {
		if _, err := base64.RawURLEncoding.Strict().DecodeString(part); err != nil {
			return Token{}, false
		}
	}
	plain, err := f.sealer.Decrypt(raw)
	if err != nil {
		return Token{}, false
	}
	id, _, _ := strings.Cut(plain, ":")
	tok, err := f.st.Token(r.Context(), id)
	if err != nil {
		if !errors.Is(err, fault.ErrNotFound) {
			f.log.Warn("camara token lookup", zap.Error(err))
		}
		return Token{}, false
	}
	return tok, true
}

// readVerifyBody reads a phoneNumberVerify body: exactly one property, phoneNumber or
// hashedPhoneNumber, of its schema. msg is the caller's message when it is not.
func readVerifyBody(r *http.Request) (number, hash, msg string) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxRequestBody))
	if err != nil {
		return "", "", "The request body is too large or could not be read."
	}
	var m map[string]json.RawMessage
	if len(body) == 0 || json.Unmarshal(body, &m) != nil {
		return "", "", "The request body must be a JSON object with phoneNumber or hashedPhoneNumber."
	}
	if len(m) != 1 {
		return "", "", "The request body must have exactly one of phoneNumber and hashedPhoneNumber."
	}
	for k, v := range m {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", "", k + " must be a string."
		}
		switch k {
		case "phoneNumber":
			if !phoneNumberRule.MatchString(s) {
				return "", "", "phoneNumber must be in E.164 form, like +34666777888."
			}
			return s, "", ""
		case "hashedPhoneNumber":
			if !hashRule.MatchString(s) {
				return "", "", "hashedPhoneNumber must be the SHA-256 of the E.164 number, in hexadecimal."
			}
			return "", s, ""
		}
	}
	return "", "", "The request body must have exactly one of phoneNumber and hashedPhoneNumber."
}

// fail answers an error of the rules in CAMARA's vocabulary.
func (f *Facade) fail(w http.ResponseWriter, r *http.Request, err error) {
	var fe *fault.Error
	if errors.As(err, &fe) {
		switch fe.Reason {
		case fault.InvalidArgument:
			writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fe.Msg)
			return
		case fault.FeatureNotEnabled, fault.PermissionDenied:
			writeError(w, http.StatusForbidden, "PERMISSION_DENIED", "Client does not have sufficient permissions to perform this action.")
			return
		case fault.RateLimited:
			if fe.RetryAfter > 0 {
				w.Header().Set("Retry-After", strconvSeconds(fe.RetryAfter))
			}
			writeError(w, http.StatusTooManyRequests, "TOO_MANY_REQUESTS", "Rate limit reached.")
			return
		case fault.InsufficientBalance, fault.BalanceExpired:
			writeError(w, http.StatusTooManyRequests, "QUOTA_EXCEEDED", "Out of resource quota.")
			return
		case fault.Unavailable:
			writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "Service Unavailable.")
			return
		}
	}
	f.log.Error("camara request failed", zap.String("path", r.URL.Path), zap.Error(err))
	writeError(w, http.StatusInternalServerError, "INTERNAL", "Server error.")
}

func strconvSeconds(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}

// writeError writes CAMARA's error body {status, code, message}.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"status": status, "code": code, "message": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
