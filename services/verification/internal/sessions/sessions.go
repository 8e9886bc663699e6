// Package sessions opens capture sessions: the single-use right to one verify, with the number
// the operator's network showed (package network) sealed into a blob for Verify. An SDK session
// is opened by the app's request itself; a browser flow's VERIFY capture opens its session here
// too, inside its own transaction.
package sessions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/logging"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/network"
	"github.com/mnvhq/mnv/services/verification/internal/operatorapi"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
	"github.com/mnvhq/mnv/services/verification/internal/seal"
)

// Store is what sessions need of the service's storage.
type Store interface {
	InsertSession(ctx context.Context, s domain.Session) error
}

// AuthStore is what the NETWORK_API authorization of a session needs of the storage.
type AuthStore interface {
	// ClaimAuthorization takes a pending authorization of a session of one of sources by its
	// state's hash, once (fault.ErrNotFound: no such pending, unexpired authorization).
	ClaimAuthorization(ctx context.Context, stateHash []byte, sources []string) (domain.Session, error)
	CompleteAuthorization(ctx context.Context, clientID, sessionID string, status domain.Status, sealedToken []byte, tokenExpires *time.Time) error
}

// Authorizer runs the OIDC authorization code flow of the operators' CAMARA APIs;
// operatorapi.Clients is one.
type Authorizer interface {
	Has(operatorID string) bool
	Authorize(ctx context.Context, operatorID string) (operatorapi.Authorization, error)
	Exchange(ctx context.Context, operatorID, code, verifier string) (operatorapi.Token, error)
}

// Service opens sessions.
type Service struct {
	st   Store
	auth AuthStore
	// camara, when set, runs NETWORK_API authorizations.
	camara Authorizer
	log    *zap.Logger
	net    *network.Identifier
	sealer *seal.Sealer
	// ttl is how long a sealed blob may be verified (300 s by default).
	ttl time.Duration
	now func() time.Time
}

// New returns a Service whose blobs may be verified for ttl.
func New(st Store, net *network.Identifier, sealer *seal.Sealer, ttl time.Duration) *Service {
	return &Service{st: st, net: net, sealer: sealer, ttl: ttl, now: time.Now, log: zap.NewNop()}
}

// WithNetworkAPI returns s that also opens NETWORK_API sessions through az, storing their
// authorizations in st.
func (s *Service) WithNetworkAPI(st AuthStore, az Authorizer, log *zap.Logger) *Service {
	c := *s
	c.auth, c.camara, c.log = st, az, log
	return &c
}

// Operators lists the operators the client of p may use.
func (s *Service) Operators(p principal.Principal) []operators.Operator {
	return s.net.Operators(operators.ClientOf(p))
}

// Request is the body of an SDK session.
type Request struct {
	OperatorID *string
	Platform   string // ANDROID, IOS or WEB
	DeviceID   *string
	AppVersion *string
}

// Capture is what a capture gave: its session (of ClientID), status, operator and blob.
type Capture struct {
	SessionID  string
	ClientID   string
	Status     domain.Status
	OperatorID *string
	Blob       string
	ExpiresAt  time.Time
	// AuthorizationURL is, for a NETWORK_API session waiting for its authorization, where the
	// device goes over mobile data; Blob is then empty.
	AuthorizationURL string
}

// Create opens an SDK session for the client of p (authenticated by its SDK token). The VERIFY
// product is the RPC's rule (the feature gate has checked it).
func (s *Service) Create(ctx context.Context, p principal.Principal, r Request, n network.Request) (Capture, error) {
	if !slices.Contains([]string{"ANDROID", "IOS", "WEB"}, r.Platform) {
		return Capture{}, fault.Invalid("platform", "must be ANDROID, IOS or WEB")
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"deviceId", r.DeviceID}, {"appVersion", r.AppVersion}} {
		if f.v != nil {
			if err := domain.ShortText.Check(f.name, *f.v); err != nil {
				return Capture{}, err
			}
		}
	}
	client := operators.ClientOf(p)
	id, err := s.net.Identify(r.OperatorID, client, n)
	if err != nil {
		return Capture{}, err
	}
	sess := s.session(p.ClientID, sourceSDK, id)
	sess.Platform, sess.DeviceID, sess.AppVersion = &r.Platform, r.DeviceID, r.AppVersion
	if s.networkAPI(id, client) {
		return s.authorize(ctx, s.st, sess)
	}
	return s.open(ctx, s.st, sess, id.Number.E164)
}

// networkAPI reports whether a capture goes through the operator's network API: its operator
// supports NETWORK_API (with a client configured), the client enabled that method for it, and
// header enrichment gave no number.
func (s *Service) networkAPI(id network.Identity, c operators.Client) bool {
	return s.camara != nil && id.Found && id.Number.E164 == "" &&
		id.Operator.Allows(c, operators.MethodNetworkAPI) && s.camara.Has(id.Operator.ID)
}

// authorize opens a NETWORK_API session waiting for the operator's authorization, through st:
// a state (kept as its hash) and a PKCE verifier (kept sealed to the row) bound to it, and the
// authorization URL the device follows.
func (s *Service) authorize(ctx context.Context, st Store, sess domain.Session) (Capture, error) {
	a, err := s.camara.Authorize(ctx, *sess.OperatorID)
	if err != nil {
		s.log.Warn("operator network API unreachable", zap.String("operator", *sess.OperatorID), zap.Error(err), logging.Request(ctx))
		return Capture{}, fmt.Errorf("%w: the operator's network API does not answer", fault.ErrUnavailable)
	}
	sess.Method, sess.Status = string(operators.MethodNetworkAPI), domain.AuthorizationPending
	sess.StateHash = operatorapi.StateHash(a.State)
	sess.OAuthSealed = s.sealer.SealSecret(seal.SecretPKCEVerifier, sess.ID, []byte(a.Verifier))
	if err := st.InsertSession(ctx, sess); err != nil {
		return Capture{}, err
	}
	return Capture{SessionID: sess.ID, ClientID: sess.ClientID, Status: sess.Status, OperatorID: sess.OperatorID, ExpiresAt: sess.ExpiresAt, AuthorizationURL: a.URL}, nil
}

// errBadState is the answer to a callback whose state is not a pending authorization: unknown,
// used already, or its session expired. It tells nothing of which.
var errBadState = fault.Invalid("state", "is not a pending authorization")

// Authorization is what the operator's redirect brought back to mnv.
type Authorization struct {
	State, Code, Error string
}

// Claim is a NETWORK_API session claimed by the state of the operator's redirect, with what
// the operator's answer gives it; FinishAuthorization records it.
type Claim struct {
	Session domain.Session
	// status is CAPTURED with the sealed access token (and its expiry, when the operator gave
	// one), or NO_NETWORK_IDENTITY without.
	status  domain.Status
	token   []byte
	expires *time.Time
}

// A NETWORK_API session is finished with what the operator sent the device back with in two
// steps: ClaimAuthorization (the state, the code exchange: calls to the operator) then
// FinishAuthorization (the record), so that a browser flow records its session and its
// transaction in one database transaction that waits on no operator (browser.Service's
// CompleteAuthorization, which finishes an SDK session's too).

// ClaimAuthorization takes the NETWORK_API session of a's state (once, before it expires), of
// an app (SDK) or a page (WEB): the sessions whose operator sends the device back to mnv's
// public callback. It exchanges the code with the PKCE verifier and mnv's client
// authentication. An operator that answered with an error (login_required: the device was not
// on its mobile network) or refused the code gives a claim without identity
// (NO_NETWORK_IDENTITY, verified as UNDETERMINED). An operator that does not answer the
// exchange is an error wrapping fault.ErrUnavailable, with the claim's Session set: the state is
// spent (a new capture starts over), and a browser flow must still learn which session it was.
func (s *Service) ClaimAuthorization(ctx context.Context, a Authorization) (Claim, error) {
	return s.claim(ctx, a, sourceSDK, SourceWeb)
}

// CompleteCAMARA finishes the NETWORK_API session of a CAMARA authorization (OpenCAMARA), which
// the operator sent back to the facade's own callback, as ClaimAuthorization then
// FinishAuthorization do an app's. A state of an app's or a page's session is not one of
// these, nor the other way round. When the operator does not answer, the error comes with the
// capture's SessionID, so that the facade can answer its own client.
func (s *Service) CompleteCAMARA(ctx context.Context, a Authorization) (Capture, error) {
	c, err := s.claim(ctx, a, sourceCAMARA)
	if err != nil {
		return Capture{SessionID: c.Session.ID, ClientID: c.Session.ClientID}, err
	}
	return s.FinishAuthorization(ctx, s.auth, c)
}

// claim is ClaimAuthorization for the sessions of sources.
func (s *Service) claim(ctx context.Context, a Authorization, sources ...string) (Claim, error) {
	if s.camara == nil || a.State == "" || len(a.State) > 512 {
		return Claim{}, errBadState
	}
	sess, err := s.auth.ClaimAuthorization(ctx, operatorapi.StateHash(a.State), sources)
	if errors.Is(err, fault.ErrNotFound) {
		return Claim{}, errBadState
	}
	if err != nil {
		return Claim{}, err
	}
	c := Claim{Session: sess, status: domain.NoNetworkIdentity}
	opID := *sess.OperatorID
	if a.Error != "" || a.Code == "" {
		s.log.Info("operator refused the authorization", zap.String("operator", opID), zap.String("error", a.Error), logging.Request(ctx))
		return c, nil
	}
	verifier, err := s.sealer.OpenSecret(seal.SecretPKCEVerifier, sess.ID, sess.OAuthSealed)
	if err != nil {
		return c, fmt.Errorf("open the PKCE verifier: %w", err)
	}
	t, err := s.camara.Exchange(ctx, opID, a.Code, string(verifier))
	switch {
	case errors.Is(err, operatorapi.ErrUnavailable):
		s.log.Warn("operator token endpoint unreachable", zap.String("operator", opID), zap.Error(err), logging.Request(ctx))
		return c, fmt.Errorf("%w: the operator's network API does not answer", fault.ErrUnavailable)
	case err != nil:
		s.log.Info("operator refused the code", zap.String("operator", opID), zap.Error(err), logging.Request(ctx))
	default:
		c.status = domain.Captured
		c.token = s.sealer.SealSecret(seal.SecretAccessToken, sess.ID, []byte(t.AccessToken))
		if !t.Expiry.IsZero() {
			c.expires = &t.Expiry
		}
	}
	return c, nil
}

// FinishAuthorization records a claim through st (the service's store, or a browser flow's
// transaction) and answers its session sealed, the blob an SDK session's device gets.
func (s *Service) FinishAuthorization(ctx context.Context, st AuthStore, c Claim) (Capture, error) {
	sess := c.Session
	if err := st.CompleteAuthorization(ctx, sess.ClientID, sess.ID, c.status, c.token, c.expires); err != nil {
		return Capture{}, err
	}
	sess.Status = c.status
	return s.Sealed(sess)
}

// Sealed is a finished NETWORK_API session as its holder gets it: its blob, which carries the
// session only (the operator confirms the line when it is verified, mnv never learns it).
func (s *Service) Sealed(sess domain.Session) (Capture, error) {
	blob, err := s.sealer.Seal(seal.Claims{
		ClientID: sess.ClientID, SessionID: sess.ID, OperatorID: *sess.OperatorID, IssuedAt: sess.CreatedAt, ExpiresAt: sess.ExpiresAt,
	})
	if err != nil {
		return Capture{}, fmt.Errorf("seal session: %w", err)
	}
	return Capture{SessionID: sess.ID, ClientID: sess.ClientID, Status: sess.Status, OperatorID: sess.OperatorID, Blob: blob, ExpiresAt: sess.ExpiresAt}, nil
}

// OpenWeb opens the session of a browser flow's VERIFY capture through st (the capture's
// transaction), for the client of the flow, which may use what c may: sealed at once, or, when
// the operator's network API identifies the line, waiting for its authorization (the Capture's
// AuthorizationURL, where the browser goes).
func (s *Service) OpenWeb(ctx context.Context, st Store, clientID string, c operators.Client, id network.Identity) (Capture, error) {
	sess := s.session(clientID, SourceWeb, id)
	if s.networkAPI(id, c) {
		return s.authorize(ctx, st, sess)
	}
	return s.open(ctx, st, sess, id.Number.E164)
}

// The sources of sessions: an app's SDK, a page's browser flow (the web SDK), and the CAMARA
// facade.
const (
	sourceSDK    = "SDK"
	SourceWeb    = "WEB"
	sourceCAMARA = "CAMARA"
)

// ClientAccess tells what the client of a CAMARA authorization may use: its features and its
// operators with their methods.
type ClientAccess func(ctx context.Context) (operators.Client, error)

// OpenCAMARA opens the session of a CAMARA authorization for clientID: the line as the
// request's network shows it, through whichever operator's ranges the address is in.
//
// When that operator has a network API mnv reaches (WithNetworkAPI) and the line is not
// identified by a header enrichment the client may use there, but the client enabled the
// operator's NETWORK_API, the session waits for the operator's authorization instead, as an SDK
// session does: the capture has no blob but the AuthorizationURL the device goes to, and
// CompleteCAMARA finishes it. access is asked only then: the client has not authenticated yet
// at the authorization endpoint.
//
// Otherwise which operators the client may use is checked when the session is verified
// (verify.VerifyLine).
func (s *Service) OpenCAMARA(ctx context.Context, clientID string, n network.Request, access ClientAccess) (Capture, error) {
	// Any operator the address belongs to, by header enrichment (the facade's method); the
	// client's own enablement is applied when the line is verified (verify.VerifyLine).
	anyOperator := operators.Client{Features: []string{operators.FeatureSandbox}, Operators: principal.Operators{
		Grants: []principal.OperatorGrant{{Operator: principal.AllOperators, Methods: []string{principal.MethodHeaderEnrichment}}},
	}}
	id, err := s.net.Identify(nil, anyOperator, n)
	if err != nil {
		return Capture{}, err
	}
	sess := s.session(clientID, sourceCAMARA, id)
	if id.Found && s.camara != nil && s.camara.Has(id.Operator.ID) {
		c, err := access(ctx)
		if err != nil {
			return Capture{}, fmt.Errorf("the client's operators: %w", err)
		}
		heLine := id.Number.E164 != "" && id.Operator.Allows(c, operators.MethodHeaderEnrichment)
		if !heLine && id.Operator.Allows(c, operators.MethodNetworkAPI) {
			return s.authorize(ctx, s.st, sess)
		}
	}
	return s.open(ctx, s.st, sess, id.Number.E164)
}

// session is a new session of clientID, valid for the TTL from now.
func (s *Service) session(clientID, source string, id network.Identity) domain.Session {
	now := s.now()
	return domain.Session{
		ID: uuid.NewString(), ClientID: clientID, Source: source, Status: id.Status(), OperatorID: id.OperatorID(),
		CreatedAt: now, ExpiresAt: now.Add(s.ttl),
	}
}

// open seals the blob of sess and stores the session.
func (s *Service) open(ctx context.Context, st Store, sess domain.Session, number string) (Capture, error) {
	opID := ""
	if sess.OperatorID != nil {
		opID = *sess.OperatorID
	}
	blob, err := s.sealer.Seal(seal.Claims{
		Number: number, ClientID: sess.ClientID, SessionID: sess.ID, OperatorID: opID,
		IssuedAt: sess.CreatedAt, ExpiresAt: sess.ExpiresAt,
	})
	if err != nil {
		return Capture{}, fmt.Errorf("seal session: %w", err)
	}
	if err := st.InsertSession(ctx, sess); err != nil {
		return Capture{}, err
	}
	return Capture{SessionID: sess.ID, ClientID: sess.ClientID, Status: sess.Status, OperatorID: sess.OperatorID, Blob: blob, ExpiresAt: sess.ExpiresAt}, nil
}
