// Package people is the console's people: persons who sign in with passkeys (WebAuthn, through
// go-webauthn), their places in clients, invitations, sessions, step-up and the audit log of what
// they did (docs/api-decisions.md#console). No passwords anywhere. It sees its storage through
// Store and Tx, never pgx or gRPC.
package people

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"
	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/freetext"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// Config is what the console's sign-in needs to know.
type Config struct {
	// Origin is where the console is served (scheme://host[:port]): the WebAuthn relying
	// party's origin, its host the relying party id, and the base of invitation links.
	Origin string
	// IdleTimeout ends a session unused that long; MaxAge ends it however used.
	IdleTimeout, MaxAge time.Duration
	// StepUpWindow is how long a passkey assertion lets a session do what can hurt.
	StepUpWindow time.Duration
	// InvitationTTL is how long an invitation's link works.
	InvitationTTL time.Duration
}

// DefaultConfig is the configuration of a console on make run's address.
func DefaultConfig() Config {
	return Config{
		Origin: "http://localhost:8080", IdleTimeout: 30 * time.Minute, MaxAge: 12 * time.Hour,
		StepUpWindow: 5 * time.Minute, InvitationTTL: 72 * time.Hour,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	u, err := url.Parse(c.Origin)
	switch {
	case err != nil || u.Host == "" || u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "":
		errs = append(errs, errors.New("MNV_CONSOLE_ORIGIN: must be scheme://host[:port]"))
	case u.Scheme != "https" && !(u.Scheme == "http" && u.Hostname() == "localhost"):
		// WebAuthn runs only in a secure context, and its relying party id is a domain: http
		// only on localhost, never an IP address.
		errs = append(errs, errors.New("MNV_CONSOLE_ORIGIN: must be https, or http://localhost for development"))
	}
	// Seconds are allowed: shorter is only stricter, and a test of the expiry in a browser
	// waits for it (tests/browser).
	if c.IdleTimeout < time.Second || c.MaxAge < c.IdleTimeout || c.MaxAge > 30*24*time.Hour {
		errs = append(errs, errors.New("MNV_CONSOLE_SESSION_IDLE / MNV_CONSOLE_SESSION_MAX: 1s <= idle <= max <= 720h"))
	}
	if c.StepUpWindow < 30*time.Second || c.StepUpWindow > time.Hour {
		errs = append(errs, errors.New("MNV_CONSOLE_STEP_UP_WINDOW: must be between 30s and 1h"))
	}
	if c.InvitationTTL < 5*time.Minute || c.InvitationTTL > 30*24*time.Hour {
		errs = append(errs, errors.New("MNV_CONSOLE_INVITATION_TTL: must be between 5m and 720h"))
	}
	return errors.Join(errs...)
}

// ceremonyTTL is how long a WebAuthn ceremony waits for its second call: the options ask the
// browser for five minutes too.
const ceremonyTTL = 5 * time.Minute

// Meta is where a request came from, for sessions and the audit log.
type Meta struct {
	ClientAddress string
	UserAgent     string
	// PriorSession is the secret of the session the browser had when it opened a new one: that
	// one ends, so the browser is never left with two identities (one behind a replaced cookie).
	PriorSession string
}

// Service is the console's people.
type Service struct {
	st      Store
	tx      Tx
	fp      *crypto.Fingerprinter
	keyring *crypto.Keyring
	wa      *webauthn.WebAuthn
	cfg     Config
}

// New returns the service.
func New(st Store, tx Tx, fp *crypto.Fingerprinter, keyring *crypto.Keyring, cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	u, _ := url.Parse(cfg.Origin)
	wa, err := webauthn.New(&webauthn.Config{
		RPID: u.Hostname(), RPDisplayName: "mnv console", RPOrigins: []string{strings.TrimSuffix(cfg.Origin, "/")},
		Timeouts: webauthn.TimeoutsConfig{
			Login:        webauthn.TimeoutConfig{Enforce: true, Timeout: ceremonyTTL, TimeoutUVD: ceremonyTTL},
			Registration: webauthn.TimeoutConfig{Enforce: true, Timeout: ceremonyTTL, TimeoutUVD: ceremonyTTL},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("webauthn: %w", err)
	}
	return &Service{st: st, tx: tx, fp: fp, keyring: keyring, wa: wa, cfg: cfg}, nil
}

// The request fields' rules (people.proto's field options hold the same bounds).
var (
	tokenRule      = freetext.Rule{Max: 200}
	credentialRule = freetext.Rule{Max: 16384, Controls: true}
	nameRule       = freetext.Rule{Max: 100}
)

// checkCeremony checks the fields of a ceremony's second call, before anything is looked up.
func checkCeremony(id, credentialJSON string) error {
	if u, err := uuid.Parse(id); err != nil || u.String() != strings.ToLower(id) {
		return fault.Invalid("ceremonyId", "must be the ceremony's id (a UUID)")
	}
	return credentialRule.Check("credentialJson", credentialJSON)
}

// Errors of the console's people, in the API's words.
var (
	// ErrCeremony answers a passkey that does not prove what was asked: an unknown, used or
	// expired ceremony, another passkey, a signature that does not verify. One answer for all.
	ErrCeremony = fault.New(fault.Unauthenticated, "the passkey could not be verified: start again")
	// ErrInvitation answers a token of no usable invitation: unknown, used, withdrawn or expired.
	ErrInvitation = fault.New(fault.NotFound, "this invitation does not exist, was used, withdrawn or has expired")
	errLastAdmin  = fault.New(fault.Conflict, "the client's last ADMIN cannot lose the role or leave")
	errNoClient   = fault.New(fault.PermissionDenied, "this person belongs to no client")
	errMember     = fault.New(fault.Conflict, "this person is a member of the client already")
)

// user is a person as go-webauthn sees them.
type user struct {
	p     Person
	creds []webauthn.Credential
}

func (u *user) WebAuthnID() []byte                         { return u.p.Handle }
func (u *user) WebAuthnName() string                       { return u.p.Email }
func (u *user) WebAuthnDisplayName() string                { return displayName(u.p) }
func (u *user) WebAuthnCredentials() []webauthn.Credential { return u.creds }

func displayName(p Person) string {
	if p.Name != "" {
		return p.Name
	}
	return p.Email
}

// profile is what a person's sealed column holds.
type profile struct {
	Email string `json:"email"`
	Name  string `json:"name"`
}

func (s *Service) seal(id string, pr profile) []byte {
	b, _ := json.Marshal(pr)
	return s.keyring.Seal(b, []byte("accounts.people:"+id))
}

func (s *Service) open(p Person) (Person, error) {
	b, err := s.keyring.Open(p.Sealed, []byte("accounts.people:"+p.ID))
	if err != nil {
		return p, fmt.Errorf("open person %s: %w", p.ID, err)
	}
	var pr profile
	if err := json.Unmarshal(b, &pr); err != nil {
		return p, err
	}
	p.Email, p.Name = pr.Email, pr.Name
	return p, nil
}

// NormalEmail is the form an address is compared in.
func NormalEmail(e string) string { return strings.ToLower(strings.TrimSpace(e)) }

func (s *Service) emailFP(e string) []byte { return s.fp.Sum("email:" + NormalEmail(e)) }

// userByID reads the person of id and their passkeys.
func (s *Service) userByID(ctx context.Context, st Store, id string) (*user, error) {
	person, err := st.PersonByID(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.loadUser(ctx, st, person)
}

// register checks a registration ceremony's answer for u (go-webauthn checks its user handle
// is u's) and keeps the new passkey, named name.
func (s *Service) register(ctx context.Context, st Store, u *user, data webauthn.SessionData, parsed *protocol.ParsedCredentialCreationData, name string) (Passkey, error) {
	cred, err := s.wa.CreateCredential(u, data, parsed)
	if err != nil {
		return Passkey{}, ErrCeremony
	}
	b, err := json.Marshal(cred)
	if err != nil {
		return Passkey{}, err
	}
	k := Passkey{ID: uuid.NewString(), PersonID: u.p.ID, CredentialID: cred.ID, Credential: b, Name: name, CreatedAt: time.Now()}
	return k, st.InsertPasskey(ctx, k)
}

// loadUser reads a person and their passkeys.
func (s *Service) loadUser(ctx context.Context, st Store, p Person) (*user, error) {
	p, err := s.open(p)
	if err != nil {
		return nil, err
	}
	keys, err := st.Passkeys(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	u := &user{p: p}
	for _, k := range keys {
		var c webauthn.Credential
		if err := json.Unmarshal(k.Credential, &c); err != nil {
			return nil, fmt.Errorf("passkey %s: %w", k.ID, err)
		}
		u.creds = append(u.creds, c)
	}
	return u, nil
}

// Ceremony answers are the options as WebAuthn's JSON and the ceremony's id.
type Options struct {
	CeremonyID string
	JSON       string
}

func (s *Service) keep(ctx context.Context, st Store, purpose, subject string, options any, data *webauthn.SessionData) (Options, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return Options{}, err
	}
	o, err := json.Marshal(options)
	if err != nil {
		return Options{}, err
	}
	c := Ceremony{ID: uuid.NewString(), Purpose: purpose, Data: b, Subject: subject}
	if err := st.InsertCeremony(ctx, c, ceremonyTTL); err != nil {
		return Options{}, err
	}
	return Options{CeremonyID: c.ID, JSON: string(o)}, nil
}

func (s *Service) take(ctx context.Context, st Store, id, purpose, subject string) (webauthn.SessionData, error) {
	var data webauthn.SessionData
	if _, err := uuid.Parse(id); err != nil {
		return data, ErrCeremony
	}
	c, err := st.TakeCeremony(ctx, id, purpose)
	if errors.Is(err, fault.ErrNotFound) || err == nil && c.Subject != subject {
		return data, ErrCeremony
	}
	if err != nil {
		return data, err
	}
	return data, json.Unmarshal(c.Data, &data)
}

// StartSignIn begins a sign-in with any passkey of the site.
func (s *Service) StartSignIn(ctx context.Context) (Options, error) {
	opts, data, err := s.wa.BeginDiscoverableLogin(webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		return Options{}, fmt.Errorf("begin sign-in: %w", err)
	}
	return s.keep(ctx, s.st, PurposeSignIn, "", opts, data)
}

// Signed is a new session: its secret (the cookie's value, shown once) and what it is.
type Signed struct {
	Token      string
	MaxAge     time.Duration
	Person     Person
	Membership Membership
	// Next is set instead of a session when a single sign-on step-up came back (FinishSSO): the
	// console page to send the browser to, with ?step-up=failed when it was refused.
	Next string
}

// SignIn finishes a sign-in: the assertion must verify, with user verification, for a passkey
// of a person who belongs to clientID ("" for their first client).
func (s *Service) SignIn(ctx context.Context, ceremonyID, credentialJSON, clientID string, meta Meta) (Signed, error) {
	if err := checkCeremony(ceremonyID, credentialJSON); err != nil {
		return Signed{}, err
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes([]byte(credentialJSON))
	if err != nil {
		return Signed{}, ErrCeremony
	}
	var out Signed
	err = s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		data, err := s.take(ctx, st, ceremonyID, PurposeSignIn, "")
		if err != nil {
			return err
		}
		var found *user
		handler := func(_, handle []byte) (webauthn.User, error) {
			p, err := st.PersonByHandle(ctx, handle)
			if err != nil {
				return nil, err
			}
			found, err = s.loadUser(ctx, st, p)
			return found, err
		}
		_, cred, err := s.wa.ValidatePasskeyLogin(handler, data, parsed)
		if err != nil || found == nil {
			return ErrCeremony
		}
		if err := s.used(ctx, st, found.p.ID, cred); err != nil {
			return err
		}
		m, err := s.pick(ctx, st, found.p.ID, clientID)
		if err != nil {
			return err
		}
		out, err = s.begin(ctx, st, found.p, m, true, meta)
		if err != nil {
			return err
		}
		return st.InsertAudit(ctx, audit(m.ClientID, found.p.ID, "SignIn", "", 200, meta))
	})
	return out, err
}

// used records an assertion's effect on its passkey; a passkey whose counter went backwards may
// have been cloned, and is refused.
func (s *Service) used(ctx context.Context, st Store, personID string, cred *webauthn.Credential) error {
	if cred.Authenticator.CloneWarning {
		return ErrCeremony
	}
	b, err := json.Marshal(cred)
	if err != nil {
		return err
	}
	return st.UsePasskey(ctx, personID, cred.ID, b)
}

// pick is the membership a session opens in: clientID's, or the person's first.
func (s *Service) pick(ctx context.Context, st Store, personID, clientID string) (Membership, error) {
	if clientID != "" {
		m, err := st.Membership(ctx, clientID, personID, false)
		if errors.Is(err, fault.ErrNotFound) {
			return m, fault.ErrNotFound
		}
		return m, err
	}
	ms, err := st.Memberships(ctx, personID)
	if err != nil {
		return Membership{}, err
	}
	if len(ms) == 0 {
		return Membership{}, errNoClient
	}
	return ms[0], nil
}

// begin opens a session of p in m's client.
func (s *Service) begin(ctx context.Context, st Store, p Person, m Membership, steppedUp bool, meta Meta) (Signed, error) {
	token := clientToken(principal.SessionPrefix, m.ClientID)
	sess := Session{
		ID: uuid.NewString(), ClientID: m.ClientID, PersonID: p.ID, ExpiresAt: time.Now().Add(s.cfg.MaxAge),
		ClientAddress: clip(meta.ClientAddress, 100), UserAgent: clip(meta.UserAgent, 300),
	}
	if _, err := st.InsertSession(ctx, sess, s.fp.Sum(token), steppedUp); err != nil {
		return Signed{}, err
	}
	if clientID, ok := clientOfToken(principal.SessionPrefix, meta.PriorSession); ok {
		// Whoever holds a session's secret may end it: no more is asked.
		if err := st.EndSessionByToken(ctx, clientID, s.fp.Sum(meta.PriorSession)); err != nil {
			return Signed{}, err
		}
	}
	return Signed{Token: token, MaxAge: s.cfg.MaxAge, Person: p, Membership: m}, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

// clientToken is a secret that names its client: prefix, the client id's 32 hex digits, then
// 40 random base62 characters. A session or invitation is then found by (client, fingerprint),
// which keeps its table distributed by client.
func clientToken(prefix, clientID string) string {
	return prefix + strings.ReplaceAll(clientID, "-", "") + strings.TrimPrefix(crypto.NewToken(prefix), prefix)
}

// clientOfToken is the client a well-formed token of prefix names.
func clientOfToken(prefix, token string) (string, bool) {
	if !crypto.WellFormed(prefix, token) || len(token) < len(prefix)+32+32 {
		return "", false
	}
	raw, err := hex.DecodeString(strings.ToLower(token[len(prefix) : len(prefix)+32]))
	if err != nil {
		return "", false
	}
	id, err := uuid.FromBytes(raw)
	if err != nil {
		return "", false
	}
	return id.String(), true
}

// Authenticate resolves a session's secret to its principal and records its use.
func (s *Service) Authenticate(ctx context.Context, token string) (principal.Principal, error) {
	clientID, ok := clientOfToken(principal.SessionPrefix, token)
	if !ok {
		return principal.Principal{}, principal.ErrUnauthenticated
	}
	a, err := s.st.AuthenticateSession(ctx, clientID, s.fp.Sum(token), s.cfg.IdleTimeout, s.cfg.StepUpWindow)
	if errors.Is(err, fault.ErrNotFound) {
		return principal.Principal{}, principal.ErrUnauthenticated
	}
	if err != nil {
		return principal.Principal{}, err
	}
	// The session lasts until the earlier of its idle timeout and its end; a cache (none keeps
	// sessions today) would keep it no longer.
	validFor := time.Until(a.ExpiresAt)
	if s.cfg.IdleTimeout < validFor {
		validFor = s.cfg.IdleTimeout
	}
	return principal.Principal{
		ClientID: a.ClientID, SessionID: a.ID, UserID: a.PersonID, Role: a.Role, Status: a.Status,
		Features: a.Features, Operators: a.Operators, ValidFor: &validFor, StepUpValidFor: a.StepUpValidFor,
	}, nil
}

// Who is the signed-in person of a session: the person, their clients and the session.
type Who struct {
	Person      Person
	Membership  Membership
	Memberships []Membership
	Session     Session
	// SSO is true for a person of a client's provider: they step up there, having no passkey.
	SSO bool
}

// WhoAmI describes p's session.
func (s *Service) WhoAmI(ctx context.Context, p principal.Principal) (Who, error) {
	person, err := s.st.PersonByID(ctx, p.UserID)
	if err != nil {
		return Who{}, err
	}
	if person, err = s.open(person); err != nil {
		return Who{}, err
	}
	ms, err := s.st.Memberships(ctx, p.UserID)
	if err != nil {
		return Who{}, err
	}
	sso, err := s.st.IsSSOPerson(ctx, p.UserID)
	if err != nil {
		return Who{}, err
	}
	w := Who{Person: person, Memberships: ms, SSO: sso}
	for _, m := range ms {
		if m.ClientID == p.ClientID {
			w.Membership = m
		}
	}
	sessions, err := s.st.PersonSessions(ctx, p.UserID, s.cfg.IdleTimeout)
	if err != nil {
		return Who{}, err
	}
	for _, x := range sessions {
		if x.ID == p.SessionID {
			w.Session = x
		}
	}
	return w, nil
}

// Sessions lists p's person's usable sessions.
func (s *Service) Sessions(ctx context.Context, p principal.Principal) ([]Session, error) {
	return s.st.PersonSessions(ctx, p.UserID, s.cfg.IdleTimeout)
}

// SignOut ends p's session.
func (s *Service) SignOut(ctx context.Context, p principal.Principal) error {
	_, err := s.st.EndSession(ctx, p.UserID, p.SessionID)
	if errors.Is(err, fault.ErrNotFound) {
		return nil // ended meanwhile: signed out all the same
	}
	return err
}

// EndSession ends one of p's person's sessions; own tells whether it was p's.
func (s *Service) EndSession(ctx context.Context, p principal.Principal, sessionID string) (own bool, err error) {
	if _, err := uuid.Parse(sessionID); err != nil {
		return false, fault.ErrNotFound
	}
	_, err = s.st.EndSession(ctx, p.UserID, sessionID)
	return sessionID == p.SessionID, err
}

// SignOutEverywhere ends every session of p's person.
func (s *Service) SignOutEverywhere(ctx context.Context, p principal.Principal) (int, error) {
	return s.st.EndSessions(ctx, p.UserID, "")
}

// SwitchClient ends p's session and opens one in clientID, where the person must be a member.
func (s *Service) SwitchClient(ctx context.Context, p principal.Principal, clientID string, meta Meta) (Signed, error) {
	var out Signed
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		m, err := st.Membership(ctx, clientID, p.UserID, false)
		if err != nil {
			return err
		}
		person, err := st.PersonByID(ctx, p.UserID)
		if err != nil {
			return err
		}
		if _, err := st.EndSession(ctx, p.UserID, p.SessionID); err != nil {
			return err
		}
		// A step-up does not move between clients: it was proved for the other one.
		out, err = s.begin(ctx, st, person, m, false, meta)
		return err
	})
	return out, err
}

// StartStepUp begins a step-up with one of p's person's passkeys.
func (s *Service) StartStepUp(ctx context.Context, p principal.Principal) (Options, error) {
	u, err := s.userByID(ctx, s.st, p.UserID)
	if err != nil {
		return Options{}, err
	}
	opts, data, err := s.wa.BeginLogin(u, webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		return Options{}, fmt.Errorf("begin step-up: %w", err)
	}
	return s.keep(ctx, s.st, PurposeStepUp, p.SessionID, opts, data)
}

// StepUp finishes a step-up: the session may do what can hurt for the step-up window.
func (s *Service) StepUp(ctx context.Context, p principal.Principal, ceremonyID, credentialJSON string) (time.Time, error) {
	if err := checkCeremony(ceremonyID, credentialJSON); err != nil {
		return time.Time{}, err
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes([]byte(credentialJSON))
	if err != nil {
		return time.Time{}, ErrCeremony
	}
	err = s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		data, err := s.take(ctx, st, ceremonyID, PurposeStepUp, p.SessionID)
		if err != nil {
			return err
		}
		u, err := s.userByID(ctx, st, p.UserID)
		if err != nil {
			return err
		}
		cred, err := s.wa.ValidateLogin(u, data, parsed)
		if err != nil {
			return ErrCeremony
		}
		if err := s.used(ctx, st, u.p.ID, cred); err != nil {
			return err
		}
		return st.StepUp(ctx, p.ClientID, p.SessionID, p.UserID, s.cfg.IdleTimeout)
	})
	return time.Now().Add(s.cfg.StepUpWindow), err
}

// Invited is a new invitation with its link, shown once.
type Invited struct {
	Invitation Invitation
	Link       string
}

// Invite invites email to clientID with role. invitedBy is the inviting person ("" for the
// operator). A person who is a member already gets a recovery (a new passkey) only from the
// operator, or from an ADMIN of their only client: a passkey added to a person opens every
// client they belong to, which no other client's ADMIN may do.
func (s *Service) Invite(ctx context.Context, clientID, invitedBy, email string, role principal.Role) (Invited, error) {
	email = strings.TrimSpace(email)
	if !plausibleEmail(email) {
		return Invited{}, fault.Invalid("email", "must be an e-mail address")
	}
	if role != principal.RoleAdmin && role != principal.RoleMember {
		return Invited{}, fault.Invalid("role", "must be ADMIN or MEMBER")
	}
	var out Invited
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		inv := Invitation{
			ID: uuid.NewString(), ClientID: clientID, EmailFP: s.emailFP(email), Email: email, Role: role,
			ExpiresAt: time.Now().Add(s.cfg.InvitationTTL),
		}
		if invitedBy != "" {
			inv.InvitedBy = &invitedBy
		}
		person, err := st.PersonByEmail(ctx, inv.EmailFP)
		switch {
		case errors.Is(err, fault.ErrNotFound):
		case err != nil:
			return err
		default:
			if _, err := st.Membership(ctx, clientID, person.ID, false); err == nil {
				ms, err := st.Memberships(ctx, person.ID)
				if err != nil {
					return err
				}
				if invitedBy != "" && len(ms) > 1 {
					return errMember
				}
				inv.Recovery = true
			} else if !errors.Is(err, fault.ErrNotFound) {
				return err
			}
		}
		token := clientToken(principal.InvitationPrefix, clientID)
		inv.EmailSealed = s.keyring.Seal([]byte(email), []byte("accounts.invitations:"+inv.ID))
		if inv, err = st.InsertInvitation(ctx, inv, s.fp.Sum(token)); err != nil {
			return err
		}
		out = Invited{Invitation: inv, Link: strings.TrimSuffix(s.cfg.Origin, "/") + "/console/invite#" + token}
		return nil
	})
	return out, err
}

func plausibleEmail(e string) bool {
	local, domain, ok := strings.Cut(e, "@")
	return ok && local != "" && strings.Contains(domain, ".") && !strings.ContainsAny(e, " \t\r\n<>\"") && len(e) <= 254
}

// Opened is an invitation as its person sees it, with the ceremony to accept it.
type Opened struct {
	Invitation Invitation
	ClientName string
	// Existing: the person exists and is no member yet: they prove one of their passkeys (the
	// options are request options) instead of creating one.
	Existing bool
	Options  Options
}

// invitation finds the usable invitation of token.
func (s *Service) invitation(ctx context.Context, st Store, token string, lock bool) (Invitation, error) {
	clientID, ok := clientOfToken(principal.InvitationPrefix, token)
	if !ok {
		return Invitation{}, ErrInvitation
	}
	inv, err := st.InvitationByToken(ctx, clientID, s.fp.Sum(token), lock)
	if errors.Is(err, fault.ErrNotFound) || err == nil && (inv.AcceptedAt != nil || inv.RevokedAt != nil || !time.Now().Before(inv.ExpiresAt)) {
		return Invitation{}, ErrInvitation
	}
	if err != nil {
		return Invitation{}, err
	}
	b, err := s.keyring.Open(inv.EmailSealed, []byte("accounts.invitations:"+inv.ID))
	if err != nil {
		return Invitation{}, err
	}
	inv.Email = string(b)
	return inv, nil
}

// OpenInvitation reads an invitation and begins its ceremony.
func (s *Service) OpenInvitation(ctx context.Context, token string) (Opened, error) {
	if err := tokenRule.Check("token", token); err != nil {
		return Opened{}, err
	}
	inv, err := s.invitation(ctx, s.st, token, false)
	if err != nil {
		return Opened{}, err
	}
	out := Opened{Invitation: inv}
	person, err := s.st.PersonByEmail(ctx, inv.EmailFP)
	var u *user
	switch {
	case errors.Is(err, fault.ErrNotFound):
		// A new person: the handle is chosen now and kept in the ceremony.
		handle := make([]byte, 32)
		_, _ = rand.Read(handle)
		u = &user{p: Person{Handle: handle, Email: inv.Email}}
	case err != nil:
		return Opened{}, err
	default:
		if u, err = s.loadUser(ctx, s.st, person); err != nil {
			return Opened{}, err
		}
		out.Existing = !inv.Recovery
	}
	var options any
	var data *webauthn.SessionData
	if out.Existing {
		options, data, err = s.wa.BeginLogin(u, webauthn.WithUserVerification(protocol.VerificationRequired))
	} else {
		options, data, err = s.wa.BeginRegistration(u, registrationOptions(u)...)
	}
	if err != nil {
		return Opened{}, fmt.Errorf("begin invitation: %w", err)
	}
	if out.Options, err = s.keep(ctx, s.st, PurposeRegister, inv.ID, options, data); err != nil {
		return Opened{}, err
	}
	out.ClientName, err = s.st.ClientName(ctx, inv.ClientID)
	return out, err
}

// Accept accepts an invitation with the passkey the ceremony asked for, and signs the person in.
func (s *Service) Accept(ctx context.Context, token, ceremonyID, credentialJSON, name string, meta Meta) (Signed, error) {
	if err := tokenRule.Check("token", token); err != nil {
		return Signed{}, err
	}
	if err := checkCeremony(ceremonyID, credentialJSON); err != nil {
		return Signed{}, err
	}
	if name != "" {
		if err := nameRule.Check("name", name); err != nil {
			return Signed{}, err
		}
	}
	var out Signed
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		inv, err := s.invitation(ctx, st, token, true)
		if err != nil {
			return err
		}
		data, err := s.take(ctx, st, ceremonyID, PurposeRegister, inv.ID)
		if err != nil {
			return err
		}
		person, err := st.PersonByEmail(ctx, inv.EmailFP)
		exists := err == nil
		if err != nil && !errors.Is(err, fault.ErrNotFound) {
			return err
		}
		var u *user
		if exists {
			if u, err = s.loadUser(ctx, st, person); err != nil {
				return err
			}
			person = u.p
		} else {
			person = Person{ID: uuid.NewString(), Email: inv.Email, Name: strings.TrimSpace(name), Handle: data.UserID}
			if !bytes.Equal(person.Handle, data.UserID) || len(person.Handle) != 32 {
				return ErrCeremony
			}
			person.Sealed = s.seal(person.ID, profile{Email: person.Email, Name: person.Name})
			if err := st.InsertPerson(ctx, person, inv.EmailFP); err != nil {
				return err
			}
			u = &user{p: person}
		}
		if exists && !inv.Recovery {
			// A person who exists proves one of their passkeys.
			parsed, err := protocol.ParseCredentialRequestResponseBytes([]byte(credentialJSON))
			if err != nil {
				return ErrCeremony
			}
			cred, err := s.wa.ValidateLogin(u, data, parsed)
			if err != nil {
				return ErrCeremony
			}
			if err := s.used(ctx, st, person.ID, cred); err != nil {
				return err
			}
		} else {
			parsed, err := protocol.ParseCredentialCreationResponseBytes([]byte(credentialJSON))
			if err != nil {
				return ErrCeremony
			}
			if _, err := s.register(ctx, st, u, data, parsed, ""); err != nil {
				return err
			}
		}
		m := Membership{ClientID: inv.ClientID, PersonID: person.ID, Role: inv.Role}
		if !inv.Recovery {
			if err := st.AddMembership(ctx, m); err != nil {
				return err
			}
		}
		if m, err = st.Membership(ctx, inv.ClientID, person.ID, false); err != nil {
			return err
		}
		if err := st.AcceptInvitation(ctx, inv.ClientID, inv.ID); err != nil {
			return err
		}
		if out, err = s.begin(ctx, st, person, m, true, meta); err != nil {
			return err
		}
		return st.InsertAudit(ctx, audit(inv.ClientID, person.ID, "AcceptInvitation", inv.ID, 200, meta))
	})
	return out, err
}

// Members lists the client's people.
func (s *Service) Members(ctx context.Context, clientID string) ([]Membership, []Person, error) {
	ms, ps, err := s.st.Members(ctx, clientID)
	if err != nil {
		return nil, nil, err
	}
	for i := range ps {
		if ps[i], err = s.open(ps[i]); err != nil {
			return nil, nil, err
		}
	}
	return ms, ps, nil
}

// member reads one member with their person.
func (s *Service) member(ctx context.Context, st Store, clientID, personID string) (Membership, Person, error) {
	m, err := st.Membership(ctx, clientID, personID, true)
	if err != nil {
		return m, Person{}, err
	}
	p, err := st.PersonByID(ctx, personID)
	if err != nil {
		return m, p, err
	}
	p, err = s.open(p)
	return m, p, err
}

// SetRole changes a member's role; the last ADMIN keeps theirs.
func (s *Service) SetRole(ctx context.Context, clientID, personID string, role principal.Role) (Membership, Person, error) {
	if _, err := uuid.Parse(personID); err != nil {
		return Membership{}, Person{}, fault.ErrNotFound
	}
	if role != principal.RoleAdmin && role != principal.RoleMember {
		return Membership{}, Person{}, fault.Invalid("role", "must be ADMIN or MEMBER")
	}
	var (
		m Membership
		p Person
	)
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		var err error
		if m, p, err = s.member(ctx, st, clientID, personID); err != nil {
			return err
		}
		if m.Role == principal.RoleAdmin && role != principal.RoleAdmin {
			if err := s.keepAnAdmin(ctx, st, clientID); err != nil {
				return err
			}
		}
		m.Role = role
		return st.SetRole(ctx, clientID, personID, role)
	})
	return m, p, err
}

func (s *Service) keepAnAdmin(ctx context.Context, st Store, clientID string) error {
	n, err := st.CountAdmins(ctx, clientID)
	if err != nil {
		return err
	}
	if n <= 1 {
		return errLastAdmin
	}
	return nil
}

// Remove takes a person out of the client and ends their sessions in it at once.
func (s *Service) Remove(ctx context.Context, clientID, personID string) (Membership, Person, error) {
	if _, err := uuid.Parse(personID); err != nil {
		return Membership{}, Person{}, fault.ErrNotFound
	}
	var (
		m Membership
		p Person
	)
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		var err error
		if m, p, err = s.member(ctx, st, clientID, personID); err != nil {
			return err
		}
		if m.Role == principal.RoleAdmin {
			if err := s.keepAnAdmin(ctx, st, clientID); err != nil {
				return err
			}
		}
		if err := st.RemoveMembership(ctx, clientID, personID); err != nil {
			return err
		}
		_, err = st.EndSessions(ctx, personID, clientID)
		return err
	})
	return m, p, err
}

// Invitations lists the client's pending invitations.
func (s *Service) Invitations(ctx context.Context, clientID string) ([]Invitation, error) {
	invs, err := s.st.PendingInvitations(ctx, clientID)
	for i := range invs {
		if b, err := s.keyring.Open(invs[i].EmailSealed, []byte("accounts.invitations:"+invs[i].ID)); err == nil {
			invs[i].Email = string(b)
		}
	}
	return invs, err
}

// RevokeInvitation withdraws a pending invitation.
func (s *Service) RevokeInvitation(ctx context.Context, clientID, id string) (Invitation, error) {
	if _, err := uuid.Parse(id); err != nil {
		return Invitation{}, fault.ErrNotFound
	}
	inv, err := s.st.RevokeInvitation(ctx, clientID, id)
	if err == nil {
		if b, err := s.keyring.Open(inv.EmailSealed, []byte("accounts.invitations:"+inv.ID)); err == nil {
			inv.Email = string(b)
		}
	}
	return inv, err
}

func audit(clientID, personID, action, target string, status int, meta Meta) AuditEvent {
	e := AuditEvent{
		ID: uuid.NewString(), ClientID: clientID, Action: action, Target: clip(target, 200), Status: status,
		ClientAddress: clip(meta.ClientAddress, 100), UserAgent: clip(meta.UserAgent, 300),
	}
	if personID != "" {
		e.PersonID = &personID
	}
	return e
}

// Recorded is an audit event of a person's session as the gateway sends it.
type Recorded struct {
	// ID is the gateway's, so a retried record lands once ("": a new one).
	ID string
	// At is when the request was answered (zero: now); never later than now.
	At                            time.Time
	ClientID, PersonID, SessionID string
	Action, Target                string
	Status                        int
}

// Record writes one audit event of a person's session (the gateway's, after the call, retried
// until it lands: a repeat of an ID is no second event).
func (s *Service) Record(ctx context.Context, r Recorded, meta Meta) error {
	for _, id := range []string{r.ClientID, r.PersonID, r.SessionID} {
		if _, err := uuid.Parse(id); err != nil {
			return fault.Invalid("client_id", "an audit event needs a client, a person and a session")
		}
	}
	if r.Action == "" {
		return fault.Invalid("action", "an audit event needs an action")
	}
	e := audit(r.ClientID, r.PersonID, clip(r.Action, 100), r.Target, r.Status, meta)
	if r.ID != "" {
		if _, err := uuid.Parse(r.ID); err != nil {
			return fault.Invalid("event_id", "an audit event's id is a UUID")
		}
		e.ID = r.ID
	}
	e.At = r.At
	e.SessionID = &r.SessionID
	return s.st.InsertAudit(ctx, e)
}

// Audit lists the client's audit log, newest first, with each event's person.
func (s *Service) Audit(ctx context.Context, clientID string, limit, offset int64) ([]AuditEvent, int64, error) {
	evs, n, err := s.st.ListAudit(ctx, clientID, limit, offset)
	if err != nil {
		return nil, 0, err
	}
	for i := range evs {
		if evs[i].Person != nil {
			if p, err := s.open(*evs[i].Person); err == nil {
				evs[i].Person = &p
			}
		}
	}
	return evs, n, nil
}
