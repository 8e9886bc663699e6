package people

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/google/uuid"
	"golang.org/x/oauth2"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/freetext"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// Single sign-on: a client's people sign in through the client's own OpenID Connect provider
// (the authorization code flow with PKCE, a nonce and a state bound to the browser by a cookie;
// go-oidc checks the ID token's signature, issuer, audience and expiry). A person who signs in
// this way is the client's alone: found by (client, issuer, subject), never by e-mail, so a
// client's provider can never speak for a person of another client. Their role is the claim's,
// read again at every sign-in; a claim that maps to no role is refused.

// SSO is a client's provider settings.
type SSO struct {
	ClientID     string
	Issuer       string
	OIDCClientID string
	// Secret is sealed in the store, open here; "" for a public client.
	Secret       string
	SealedSecret []byte
	RoleClaim    string
	AdminValues  []string
	MemberValues []string
	// Scopes are asked beside openid, email and profile.
	Scopes    []string
	UpdatedAt time.Time
}

// SSOStore is what single sign-on needs of the storage (part of Store).
type SSOStore interface {
	SSO(ctx context.Context, clientID string) (SSO, error)
	PutSSO(ctx context.Context, s SSO) (SSO, error)
	DeleteSSO(ctx context.Context, clientID string) error
	// PersonBySSO finds the person of a client's provider's subject (by its key's fingerprint).
	PersonBySSO(ctx context.Context, key []byte) (Person, error)
	InsertSSOPerson(ctx context.Context, p Person, key []byte, clientID string) error
	UpdateProfile(ctx context.Context, personID string, sealed []byte) error
	// EndSSOSessions ends the sessions of the people a client's provider signed in.
	EndSSOSessions(ctx context.Context, clientID string) error
}

// RedirectURI is where a provider sends the browser back: register it there.
func (s *Service) RedirectURI() string {
	return strings.TrimSuffix(s.cfg.Origin, "/") + "/v1/api/console/sso/callback"
}

var (
	claimRule = freetext.Rule{Max: 100}
	valueRule = freetext.Rule{Max: 200}
	oidcRule  = freetext.Rule{Max: 200}
	// errSSOOff answers a sign-in with a client that has no provider, or none at all: the same
	// answer, so it tells nothing about which clients exist.
	errSSOOff = fault.New(fault.NotFound, "single sign-on is not set up for this client")
)

// checkIssuer holds an issuer to https, or http on a loopback address (a provider on the
// machine, for development and tests).
func checkIssuer(issuer string) error {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fault.Invalid("issuer", "must be the provider's issuer URL")
	}
	if u.Scheme == "https" {
		return nil
	}
	if ip := net.ParseIP(u.Hostname()); u.Scheme == "http" && (u.Hostname() == "localhost" || ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fault.Invalid("issuer", "must be https (http only on a loopback address)")
}

// httpClient reaches providers: bounded, so a slow provider cannot hold a request.
var httpClient = &http.Client{Timeout: 10 * time.Second}

func (s *Service) provider(ctx context.Context, issuer string) (*oidc.Provider, error) {
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, httpClient), issuer)
	if err != nil {
		return nil, fault.Invalid("issuer", "the provider's discovery document could not be read: %v", err)
	}
	return p, nil
}

// SSOSettings reads a client's provider; fault.ErrNotFound when it has none.
func (s *Service) SSOSettings(ctx context.Context, clientID string) (SSO, error) {
	x, err := s.st.SSO(ctx, clientID)
	x.SealedSecret = nil
	return x, err
}

// HasSSOSecret reports whether a client's provider has a client secret kept.
func (s *Service) HasSSOSecret(ctx context.Context, clientID string) bool {
	x, err := s.st.SSO(ctx, clientID)
	return err == nil && x.SealedSecret != nil
}

// SetSSO checks and keeps a client's provider. secret nil keeps the kept one.
func (s *Service) SetSSO(ctx context.Context, in SSO, secret *string) (SSO, error) {
	in.Issuer = strings.TrimSuffix(strings.TrimSpace(in.Issuer), "/")
	if err := checkIssuer(in.Issuer); err != nil {
		return SSO{}, err
	}
	if err := oidcRule.Check("oidcClientId", in.OIDCClientID); err != nil {
		return SSO{}, err
	}
	if err := claimRule.Check("roleClaim", in.RoleClaim); err != nil {
		return SSO{}, err
	}
	for _, vs := range []struct {
		field  string
		values []string
	}{{"adminValues", in.AdminValues}, {"memberValues", in.MemberValues}} {
		if len(vs.values) > 20 {
			return SSO{}, fault.Invalid(vs.field, "must hold at most 20 values")
		}
		for _, v := range vs.values {
			if err := valueRule.Check(vs.field, v); err != nil {
				return SSO{}, err
			}
		}
	}
	if len(in.Scopes) > 10 {
		return SSO{}, fault.Invalid("scopes", "must hold at most 10 scopes")
	}
	for _, sc := range in.Scopes {
		if sc == "" || len(sc) > 100 || strings.ContainsFunc(sc, func(r rune) bool { return r <= ' ' || r == '"' || r == '\\' || r > '~' }) {
			return SSO{}, fault.Invalid("scopes", "each scope is 1 to 100 printable ASCII characters, no space, quote or backslash")
		}
	}
	if len(in.AdminValues)+len(in.MemberValues) == 0 {
		return SSO{}, fault.Invalid("adminValues", "name at least one value of the claim that gives a role")
	}
	if secret != nil && len(*secret) > 500 {
		return SSO{}, fault.Invalid("clientSecret", "must be at most 500 characters")
	}
	// The provider must answer before anything is kept.
	if _, err := s.provider(ctx, in.Issuer); err != nil {
		return SSO{}, err
	}
	var out SSO
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		old, err := st.SSO(ctx, in.ClientID)
		switch {
		case secret != nil && *secret != "":
			in.SealedSecret = s.keyring.Seal([]byte(*secret), []byte("accounts.sso_providers:"+in.ClientID))
		case secret != nil:
			in.SealedSecret = nil
		case err == nil:
			in.SealedSecret = old.SealedSecret
		case !errors.Is(err, fault.ErrNotFound):
			return err
		}
		out, err = st.PutSSO(ctx, in)
		return err
	})
	out.SealedSecret = nil
	return out, err
}

// DeleteSSO turns a client's provider off; the people it signed in lose their sessions.
func (s *Service) DeleteSSO(ctx context.Context, clientID string) error {
	return s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		if err := st.DeleteSSO(ctx, clientID); err != nil {
			return err
		}
		return st.EndSSOSessions(ctx, clientID)
	})
}

// ssoFlow is what a sign-in keeps between its two halves.
type ssoFlow struct {
	Nonce    string `json:"nonce"`
	Verifier string `json:"verifier"`
	// Binding is the SHA-256 of the cookie that binds the flow to the browser that began it.
	Binding []byte `json:"binding"`
	// A step-up (StartSSOStepUp) names the session it steps up, its person, when it left (the
	// provider's auth_time must not be older) and the console page to come back to; a sign-in
	// names none.
	StepUp *ssoStepUp `json:"stepUp,omitempty"`
}

type ssoStepUp struct {
	SessionID string    `json:"session"`
	PersonID  string    `json:"person"`
	Started   time.Time `json:"started"`
	ReturnTo  string    `json:"returnTo"`
}

// ssoFlowTTL is how long a person has at their provider.
const ssoFlowTTL = 10 * time.Minute

// SSOStart is a sign-in begun: where to send the browser, and the cookie that binds the flow
// to it.
type SSOStart struct {
	AuthorizationURL string
	Binding          string
	MaxAge           time.Duration
}

func (s *Service) oauth(ctx context.Context, x SSO) (*oidc.Provider, *oauth2.Config, error) {
	p, err := s.provider(ctx, x.Issuer)
	if err != nil {
		return nil, nil, err
	}
	return p, &oauth2.Config{
		ClientID: x.OIDCClientID, ClientSecret: x.Secret, Endpoint: p.Endpoint(), RedirectURL: s.RedirectURI(),
		Scopes: append([]string{oidc.ScopeOpenID, "email", "profile"}, x.Scopes...),
	}, nil
}

func (s *Service) openSSO(ctx context.Context, clientID string) (SSO, error) {
	x, err := s.st.SSO(ctx, clientID)
	if errors.Is(err, fault.ErrNotFound) {
		return x, errSSOOff
	}
	if err != nil {
		return x, err
	}
	if x.SealedSecret != nil {
		b, err := s.keyring.Open(x.SealedSecret, []byte("accounts.sso_providers:"+clientID))
		if err != nil {
			return x, err
		}
		x.Secret = string(b)
	}
	return x, nil
}

func random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// StartSSO begins a sign-in with clientID's provider.
func (s *Service) StartSSO(ctx context.Context, clientID string) (SSOStart, error) {
	if _, err := uuid.Parse(clientID); err != nil {
		return SSOStart{}, fault.Invalid("clientId", "must be a client id (UUID)")
	}
	x, err := s.openSSO(ctx, clientID)
	if err != nil {
		return SSOStart{}, err
	}
	_, conf, err := s.oauth(ctx, x)
	if err != nil {
		return SSOStart{}, err
	}
	return s.leave(ctx, clientID, conf, nil)
}

// leave keeps a flow (a sign-in, or a step-up when up is set) and answers where to send the
// browser and the cookie that binds the flow to it.
func (s *Service) leave(ctx context.Context, clientID string, conf *oauth2.Config, up *ssoStepUp, opts ...oauth2.AuthCodeOption) (SSOStart, error) {
	binding := random(32)
	sum := sha256.Sum256([]byte(binding))
	flow := ssoFlow{Nonce: random(24), Verifier: oauth2.GenerateVerifier(), Binding: sum[:], StepUp: up}
	b, _ := json.Marshal(flow)
	state := uuid.NewString()
	if err := s.st.InsertCeremony(ctx, Ceremony{ID: state, Purpose: PurposeSSO, Data: b, Subject: clientID}, ssoFlowTTL); err != nil {
		return SSOStart{}, err
	}
	opts = append(opts, oidc.Nonce(flow.Nonce), oauth2.S256ChallengeOption(flow.Verifier))
	return SSOStart{AuthorizationURL: conf.AuthCodeURL(state, opts...), Binding: binding, MaxAge: ssoFlowTTL}, nil
}

// PurposeSSO is a single sign-on between the browser's leaving and its return.
const PurposeSSO = "sso"

// ErrSSO is any failed return from a provider: the browser learns only that it failed; the
// reason is logged.
var ErrSSO = errors.New("single sign-on failed")

// FinishSSO completes a sign-in when the provider sends the browser back with code and state;
// binding is the flow's cookie. Any failure wraps ErrSSO with its reason.
// A step-up's return signs nobody in: Signed holds only Next, the page to go back to.
func (s *Service) FinishSSO(ctx context.Context, code, state, providerError, binding string, meta Meta) (Signed, error) {
	next := "" // a refused step-up goes back to its page
	fail := func(format string, args ...any) (Signed, error) {
		return Signed{Next: next}, fmt.Errorf("%w: "+format, append([]any{ErrSSO}, args...)...)
	}
	for _, f := range []struct {
		name, value string
		max         int
	}{{"code", code, 2048}, {"state", state, 100}, {"error", providerError, 200}} {
		if len(f.value) > f.max {
			return Signed{}, fault.Invalid(f.name, "must be at most %d characters", f.max)
		}
	}
	if _, err := uuid.Parse(state); err != nil {
		return fail("no state")
	}
	c, err := s.st.TakeCeremony(ctx, state, PurposeSSO)
	if errors.Is(err, fault.ErrNotFound) {
		return fail("an unknown, used or expired state")
	}
	if err != nil {
		return Signed{}, err
	}
	var flow ssoFlow
	if err := json.Unmarshal(c.Data, &flow); err != nil {
		return Signed{}, err
	}
	if flow.StepUp != nil {
		next = flow.StepUp.ReturnTo + "?step-up=failed"
	}
	sum := sha256.Sum256([]byte(binding))
	if binding == "" || subtle.ConstantTimeCompare(sum[:], flow.Binding) != 1 {
		return fail("the browser that came back is not the one that left")
	}
	if providerError != "" {
		return fail("the provider answered %q", clip(providerError, 100))
	}
	clientID := c.Subject
	x, err := s.openSSO(ctx, clientID)
	if err != nil {
		return fail("%v", err)
	}
	p, conf, err := s.oauth(ctx, x)
	if err != nil {
		return fail("%v", err)
	}
	octx := oidc.ClientContext(ctx, httpClient)
	tok, err := conf.Exchange(octx, code, oauth2.VerifierOption(flow.Verifier))
	if err != nil {
		return fail("the code exchange: %v", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return fail("no ID token")
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: x.OIDCClientID}).Verify(octx, raw)
	if err != nil {
		return fail("the ID token: %v", err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(flow.Nonce)) != 1 {
		return fail("the ID token's nonce")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return fail("the ID token's claims: %v", err)
	}
	key := s.fp.Sum("sso:" + clientID + "\x00" + idt.Issuer + "\x00" + idt.Subject)
	if flow.StepUp != nil {
		if err := s.finishStepUp(ctx, clientID, key, claims, *flow.StepUp, meta); err != nil {
			if !errors.Is(err, ErrSSO) {
				err = fmt.Errorf("%w: step-up: %w", ErrSSO, err)
			}
			return Signed{Next: next}, err
		}
		return Signed{Next: flow.StepUp.ReturnTo}, nil
	}
	role, ok := roleOf(claims[x.RoleClaim], x.AdminValues, x.MemberValues)
	if !ok {
		return fail("the claim %q gives no role", x.RoleClaim)
	}
	email, _ := claims["email"].(string)
	name, _ := claims["name"].(string)
	var out Signed
	err = s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		person, err := st.PersonBySSO(ctx, key)
		switch {
		case errors.Is(err, fault.ErrNotFound):
			person = Person{ID: uuid.NewString(), Email: email, Name: name, Handle: make([]byte, 32)}
			_, _ = rand.Read(person.Handle)
			person.Sealed = s.seal(person.ID, profile{Email: email, Name: name})
			if err := st.InsertSSOPerson(ctx, person, key, clientID); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			// The provider's profile is the truth: kept as it says now.
			person.Email, person.Name = email, name
			if err := st.UpdateProfile(ctx, person.ID, s.seal(person.ID, profile{Email: email, Name: name})); err != nil {
				return err
			}
		}
		m := Membership{ClientID: clientID, PersonID: person.ID, Role: role}
		if err := st.AddMembership(ctx, m); err != nil {
			return err
		}
		if err := st.SetRole(ctx, clientID, person.ID, role); err != nil {
			return err
		}
		if m, err = st.Membership(ctx, clientID, person.ID, false); err != nil {
			return err
		}
		// The provider has just authenticated the person: the session counts as stepped up.
		if out, err = s.begin(ctx, st, person, m, true, meta); err != nil {
			return err
		}
		return st.InsertAudit(ctx, audit(clientID, person.ID, "SsoSignIn", "", 200, meta))
	})
	return out, err
}

// StepUpSkew is how far the provider's clock may be from ours when its auth_time is read.
const StepUpSkew = time.Minute

// errNotSSOPerson answers a single sign-on step-up asked by a person who has passkeys.
var errNotSSOPerson = fault.New(fault.Conflict, "you sign in with a passkey: step up with it (POST /v1/api/console/step-up/options)")

// StartSSOStepUp begins a step-up of p's session through its client's provider, for a person
// who signs in with it: the provider is asked to authenticate them again (prompt=login,
// max_age=0), and FinishSSO marks the session stepped up when the same person comes back
// freshly signed in. returnTo is the console page to come back to.
func (s *Service) StartSSOStepUp(ctx context.Context, p principal.Principal, returnTo string) (SSOStart, error) {
	returnTo, err := consolePage(returnTo)
	if err != nil {
		return SSOStart{}, err
	}
	sso, err := s.st.IsSSOPerson(ctx, p.UserID)
	if err != nil {
		return SSOStart{}, err
	}
	if !sso {
		return SSOStart{}, errNotSSOPerson
	}
	x, err := s.openSSO(ctx, p.ClientID)
	if err != nil {
		return SSOStart{}, err
	}
	_, conf, err := s.oauth(ctx, x)
	if err != nil {
		return SSOStart{}, err
	}
	up := &ssoStepUp{SessionID: p.SessionID, PersonID: p.UserID, Started: time.Now(), ReturnTo: returnTo}
	return s.leave(ctx, p.ClientID, conf, up,
		oauth2.SetAuthURLParam("prompt", "login"), oauth2.SetAuthURLParam("max_age", "0"))
}

// consolePage checks where a step-up sends the browser back: only a page of the console, on
// this host, with no query of its own (the gateway holds its redirects to the console too).
func consolePage(p string) (string, error) {
	switch {
	case p == "" || p == "/console":
		return "/console/", nil
	case !strings.HasPrefix(p, "/console/") || strings.ContainsAny(p, "\\?#%") || strings.Contains(p, "//") ||
		strings.Contains(p, "/.") || strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r > '~' }):
		return "", fault.Invalid("returnTo", "must be a path of the console (/console/...)")
	}
	return p, nil
}

// finishStepUp marks the flow's session stepped up when the provider's ID token (already
// verified: signature, issuer, audience, expiry, nonce) names the session's own person (key:
// the fingerprint of client, issuer and subject) and says they signed in after the flow began.
// It never opens a session or makes a person. Every refusal wraps ErrSSO with its reason.
func (s *Service) finishStepUp(ctx context.Context, clientID string, key []byte, claims map[string]any, up ssoStepUp, meta Meta) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: step-up: "+format, append([]any{ErrSSO}, args...)...)
	}
	// auth_time is when the provider authenticated the person (OpenID Connect Core 2, required
	// when max_age is asked). It must follow the flow's start, so it is the login the provider
	// was just asked for, and be within the step-up window.
	at, ok := claims["auth_time"].(float64)
	if !ok {
		return fail("the ID token has no auth_time")
	}
	authTime := time.Unix(int64(at), 0)
	now := time.Now()
	switch {
	case authTime.Before(up.Started.Add(-StepUpSkew)):
		return fail("auth_time %s is before the step-up began (%s)", authTime.UTC().Format(time.RFC3339), up.Started.UTC().Format(time.RFC3339))
	case now.Sub(authTime) > s.cfg.StepUpWindow+StepUpSkew:
		return fail("auth_time %s is older than the step-up window", authTime.UTC().Format(time.RFC3339))
	case authTime.After(now.Add(StepUpSkew)):
		return fail("auth_time %s is in the future", authTime.UTC().Format(time.RFC3339))
	}
	x, err := s.openSSO(ctx, clientID)
	if err != nil {
		return err
	}
	role, ok := roleOf(claims[x.RoleClaim], x.AdminValues, x.MemberValues)
	if !ok {
		return fail("the claim %q gives no role", x.RoleClaim)
	}
	return s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		person, err := st.PersonBySSO(ctx, key)
		switch {
		case errors.Is(err, fault.ErrNotFound):
			return fail("the provider signed in a person who is not the session's")
		case err != nil:
			return err
		case person.ID != up.PersonID:
			return fail("the provider signed in another person than the session's")
		}
		// The provider's claim is the role, at every authentication.
		if err := st.SetRole(ctx, clientID, person.ID, role); err != nil {
			return err
		}
		err = st.StepUp(ctx, clientID, up.SessionID, person.ID, s.cfg.IdleTimeout)
		if errors.Is(err, fault.ErrNotFound) {
			return fail("the session has ended")
		}
		if err != nil {
			return err
		}
		e := audit(clientID, person.ID, "SsoStepUp", "", 200, meta)
		e.SessionID = &up.SessionID
		return st.InsertAudit(ctx, e)
	})
}

// roleOf maps a claim (a string or a list of strings) to a role: ADMIN when it holds one of
// admin, else MEMBER when one of member.
func roleOf(claim any, admin, member []string) (principal.Role, bool) {
	var values []string
	switch v := claim.(type) {
	case string:
		values = []string{v}
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				values = append(values, s)
			}
		}
	}
	has := func(set []string) bool {
		return slices.ContainsFunc(values, func(v string) bool { return slices.Contains(set, v) })
	}
	switch {
	case has(admin):
		return principal.RoleAdmin, true
	case has(member):
		return principal.RoleMember, true
	}
	return "", false
}
