// Package browser runs the browser flow: a client's backend starts a transaction for a product
// (VERIFY or STUCK_PLUS), a page on one of the client's web origins has the visitor's browser
// capture it through the operator's network, and the backend reads what the capture gave: a
// sealed blob for Verify (package sessions) or a kept stuck-plus number (package stuckplus).
//
// A VERIFY capture through an operator's network API (NETWORK_API) takes two steps more: the
// capture answers the operator's authorization URL, the page's browser follows it over mobile
// data, the operator sends it back to mnv's callback (CompleteAuthorization), which records the
// operator's answer and sends the browser back to the page with a one-time code; the page
// completes the flow with that code and the verifier of the challenge it captured with
// (CompleteTransaction). Only the browser that came back has the code and only the page that
// captured has the verifier: an operator link lifted from someone else's capture and opened
// on a victim's phone completes nothing.
package browser

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/network"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
	"github.com/mnvhq/mnv/services/verification/internal/sessions"
	"github.com/mnvhq/mnv/services/verification/internal/stuckplus"
)

// Store is what the browser flow needs of the service's storage; a capture opens its VERIFY
// session or keeps its STUCK_PLUS number through it, in the capture's transaction.
type Store interface {
	sessions.Store
	sessions.AuthStore
	stuckplus.KeepStore
	InsertTransaction(ctx context.Context, t domain.Transaction) (domain.Transaction, error)
	GetTransaction(ctx context.Context, clientID, id string) (domain.Transaction, error)
	// TransactionClient is the client of a transaction, whatever its state.
	TransactionClient(ctx context.Context, id string) (string, error)
	// LockTransaction reads a client's transaction (the client its id maps to:
	// TransactionClient) and holds it until the transaction ends.
	LockTransaction(ctx context.Context, clientID, id string) (domain.Transaction, error)
	// LockSessionTransaction reads the transaction of a client's session and holds it until
	// the transaction ends (fault.ErrNotFound: none).
	LockSessionTransaction(ctx context.Context, clientID, sessionID string) (domain.Transaction, error)
	CompleteCapture(ctx context.Context, t domain.Transaction) error
	// GetSession reads a client's session (fault.ErrNotFound: none).
	GetSession(ctx context.Context, clientID, id string) (domain.Session, error)
}

// Tx runs a function with the store inside one transaction.
type Tx interface {
	InTx(ctx context.Context, fn func(ctx context.Context, st Store) error) error
}

// Origins tells which web pages may capture a client's browser flows; accountsclient.Client is
// one.
type Origins interface {
	AllowsWebOrigin(ctx context.Context, clientID, origin string) (bool, error)
}

// Service runs browser flows.
type Service struct {
	st        Store
	tx        Tx
	net       *network.Identifier
	sessions  *sessions.Service
	stuckPlus *stuckplus.Service
	origins   Origins
	// ttl is how long a flow waits for its capture.
	ttl time.Duration
	now func() time.Time
}

// New returns a Service whose flows wait ttl for their capture.
func New(st Store, tx Tx, net *network.Identifier, sess *sessions.Service, stuckPlus *stuckplus.Service, origins Origins, ttl time.Duration) *Service {
	return &Service{st: st, tx: tx, net: net, sessions: sess, stuckPlus: stuckPlus, origins: origins, ttl: ttl, now: time.Now}
}

// CreateTransaction starts a browser flow of a product the client has.
func (s *Service) CreateTransaction(ctx context.Context, p principal.Principal, serviceCode, metadataID string) (domain.Transaction, error) {
	switch serviceCode {
	case domain.ServiceVerify:
		if !p.Has(domain.FeatureVerify) {
			return domain.Transaction{}, fault.NotEnabled("serviceCode", "VERIFY is not enabled for this account")
		}
	case domain.ServiceStuckPlus:
		if !p.Has(domain.FeatureStuckPlus) {
			return domain.Transaction{}, fault.NotEnabled("serviceCode", "STUCK_PLUS is not enabled for this account")
		}
	default:
		return domain.Transaction{}, fault.Invalid("serviceCode", "must be VERIFY or STUCK_PLUS")
	}
	if err := domain.ShortText.Check("metadataId", metadataID); err != nil {
		return domain.Transaction{}, err
	}
	return s.st.InsertTransaction(ctx, domain.Transaction{
		ID: uuid.NewString(), ClientID: p.ClientID, ServiceCode: serviceCode, MetadataID: metadataID,
		Features: p.Features, Operators: p.Operators, Status: domain.TransactionPending, ExpiresAt: s.now().Add(s.ttl),
	})
}

// GetTransaction resolves a browser flow of the client.
func (s *Service) GetTransaction(ctx context.Context, clientID, id string) (domain.Transaction, error) {
	if _, err := uuid.Parse(id); err != nil {
		return domain.Transaction{}, fault.ErrNotFound
	}
	t, err := s.st.GetTransaction(ctx, clientID, id)
	if err != nil {
		return t, err
	}
	return s.withExpiry(t), nil
}

// withExpiry is t as it reads now: a flow still waiting for its capture, or for the operator's
// authorization of it, is EXPIRED past its TTL.
func (s *Service) withExpiry(t domain.Transaction) domain.Transaction {
	waiting := t.Status == domain.TransactionPending || t.Status == domain.AuthorizationPending
	if waiting && !s.now().Before(t.ExpiresAt) {
		t.Status = domain.TransactionExpired
	}
	return t
}

// OriginAllowed tells whether a page whose Origin header is origin may call the browser routes
// of a transaction: the origin must be one the transaction's client allowed. An unknown
// transaction allows no origin, so a page learns nothing about which ids exist.
func (s *Service) OriginAllowed(ctx context.Context, transactionID, origin string) (bool, error) {
	if _, err := uuid.Parse(transactionID); err != nil {
		return false, nil //nolint:nilerr // a malformed id is an unknown transaction: no origin allowed
	}
	_, err := s.checkOrigin(ctx, transactionID, origin)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fault.ErrNotFound), errors.Is(err, domain.ErrOriginNotAllowed):
		return false, nil
	}
	return false, err
}

// PageClient is the client of a transaction whose page, at origin, calls one of its browser
// routes: domain.ErrOriginNotAllowed for an origin the client did not allow (none included) and
// for an unknown transaction, which answers like a refused origin (a page learns nothing of
// which ids exist). For the routes of other packages (a workflow's code typed on the page).
func (s *Service) PageClient(ctx context.Context, transactionID, origin string) (string, error) {
	if _, err := uuid.Parse(transactionID); err != nil {
		return "", domain.ErrOriginNotAllowed
	}
	clientID, err := s.checkOrigin(ctx, transactionID, origin)
	if errors.Is(err, fault.ErrNotFound) {
		return "", domain.ErrOriginNotAllowed
	}
	return clientID, err
}

// checkOrigin returns the transaction's client when origin may capture the transaction,
// fault.ErrNotFound for an unknown transaction and domain.ErrOriginNotAllowed for any other
// origin (none included).
func (s *Service) checkOrigin(ctx context.Context, transactionID, origin string) (string, error) {
	clientID, err := s.st.TransactionClient(ctx, transactionID)
	if err != nil {
		return "", err
	}
	if origin == "" {
		return "", domain.ErrOriginNotAllowed
	}
	ok, err := s.origins.AllowsWebOrigin(ctx, clientID, origin)
	if err != nil {
		return "", fmt.Errorf("%w: %w", fault.ErrUnavailable, err)
	}
	if !ok {
		return "", domain.ErrOriginNotAllowed
	}
	return clientID, nil
}

// CaptureRequest is what a page asks of a capture besides its transaction.
type CaptureRequest struct {
	// OperatorID names the operator; nil: the one whose ranges the browser's address is in.
	OperatorID *string
	// ReturnURL is the page the browser comes back to after an authorization at the operator
	// (NETWORK_API); it must be on the page's own origin, without a query. nil: that origin's
	// root.
	ReturnURL *string
	// CodeChallenge is the S256 challenge (base64url SHA-256, 43 characters) of a verifier the
	// page keeps, to complete the flow with after an authorization at the operator; required
	// for one.
	CodeChallenge *string
}

// checkChallenge refuses a code challenge that is not an S256 one.
func checkChallenge(c *string) error {
	if c == nil {
		return nil
	}
	if b, err := base64.RawURLEncoding.DecodeString(*c); err != nil || len(b) != sha256.Size {
		return fault.Invalid("codeChallenge", "must be the base64url SHA-256 (43 characters) of the page's verifier")
	}
	return nil
}

// maxReturnURL bounds a return URL (transactions.return_url's check).
const maxReturnURL = 4096

// returnURL is where the browser of a capture from origin (an allowed one) comes back to: the
// page's return URL, without its fragment, or the origin's root. Only a URL of that origin is
// taken, so the callback can never send a browser anywhere the client did not allow; and none
// with a query, because whoever captures chooses it and the way back carries a one-time code
// in its fragment, which a browser keeps across a redirect: a page of the client's that
// redirects where its query says (?next=…) would hand the code on.
func returnURL(origin string, given *string) (string, error) {
	if given == nil {
		return origin + "/", nil
	}
	u, err := url.Parse(*given)
	if err != nil || len(*given) > maxReturnURL || u.User != nil || u.Opaque != "" || u.RawQuery != "" || u.ForceQuery ||
		(u.Scheme != "https" && u.Scheme != "http") || !strings.EqualFold(u.Scheme+"://"+u.Host, origin) {
		return "", fault.Invalid("returnUrl", "must be a URL of the calling page's own origin, without a query, at most %d characters", maxReturnURL)
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String(), nil
}

// Capture is what a capture gave: the transaction and, for a VERIFY capture waiting for the
// operator's authorization (AUTHORIZATION_PENDING), the URL the browser follows.
type Capture struct {
	domain.Transaction
	AuthorizationURL string
}

// CaptureTransaction captures a browser flow, identified by its id, from a page on one of its
// client's allowed origins (n.Origin). A flow is captured once; a refused origin leaves it
// untouched.
//
// The origin binds the capture to the client's own site the way a registered redirect URI
// binds an OAuth authorization to the client: a page elsewhere that obtained a transaction id
// (an attacker's, started for a number she does not own) cannot have a victim's browser capture
// it, because the victim's browser tells us the page's origin and the page cannot forge it.
//
// A VERIFY capture whose operator identifies the line through its network API is captured
// once too: it waits (AUTHORIZATION_PENDING) for the operator to send the browser to mnv's
// callback, with the URL of that authorization, and the page's return URL kept for the way
// back.
func (s *Service) CaptureTransaction(ctx context.Context, transactionID string, r CaptureRequest, n network.Request) (Capture, error) {
	if _, err := uuid.Parse(transactionID); err != nil {
		return Capture{}, fault.ErrNotFound
	}
	// Checked before the transaction row is locked: a transaction's client never changes, and
	// the row lock should not wait on a call to accounts.
	clientID, err := s.checkOrigin(ctx, transactionID, n.Origin)
	if err != nil {
		return Capture{}, err
	}
	back, err := returnURL(n.Origin, r.ReturnURL)
	if err == nil {
		err = checkChallenge(r.CodeChallenge)
	}
	if err != nil {
		return Capture{}, err
	}
	var out Capture
	err = s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		t, err := st.LockTransaction(ctx, clientID, transactionID)
		if err != nil {
			return err
		}
		if t = s.withExpiry(t); t.Status == domain.TransactionExpired {
			out.Transaction = t
			return nil
		}
		if t.Status != domain.TransactionPending {
			return domain.ErrAlreadyUsed
		}
		client := operators.Client{Features: t.Features, Operators: t.Operators}
		id, err := s.net.Identify(r.OperatorID, client, n)
		if err != nil {
			return err
		}
		t.Status, t.OperatorID = id.Status(), id.OperatorID()
		switch t.ServiceCode {
		case domain.ServiceVerify:
			c, err := s.sessions.OpenWeb(ctx, st, t.ClientID, client, id)
			if err != nil {
				return err
			}
			t.SessionID = &c.SessionID
			switch {
			case c.AuthorizationURL == "":
				t.Blob = &c.Blob
			case r.CodeChallenge == nil:
				// Refused before anything is kept: the transaction's rollback drops the session.
				return fault.Invalid("codeChallenge", "is required to capture through the operator's network API")
			default:
				t.Status, t.ReturnURL, t.CodeChallenge = domain.AuthorizationPending, &back, r.CodeChallenge
				out.AuthorizationURL = c.AuthorizationURL
			}
		case domain.ServiceStuckPlus:
			if id.Number.E164 != "" {
				spID, err := s.stuckPlus.Keep(ctx, st, t, id.Operator.ID, id.Number)
				if err != nil {
					return err
				}
				t.StuckPlusSessionID = &spID
			}
		}
		if err := st.CompleteCapture(ctx, t); err != nil {
			return err
		}
		out.Transaction = t
		return nil
	})
	if err != nil && !errors.Is(err, fault.ErrNotFound) && !errors.Is(err, domain.ErrAlreadyUsed) {
		return Capture{}, fmt.Errorf("capture: %w", err)
	}
	return out, err
}

// errBadCompletion answers a completion that does not show both the code of the way back and
// the verifier of the capture's challenge (or came before the way back). It tells nothing of
// which, and spends nothing.
var errBadCompletion = fault.Invalid("code", "does not complete this transaction: complete it from the page that captured it, with the code of its way back")

// CompleteTransaction completes, for the page on one of its client's allowed origins, a browser
// flow whose operator's authorization came back (CompleteAuthorization): the request must show
// the one-time code the callback gave the browser that came back, and the verifier of the code
// challenge the capture sent. The flow is then captured, with the session's blob, once; a
// wrong code or verifier changes nothing.
func (s *Service) CompleteTransaction(ctx context.Context, transactionID, code, verifier string, n network.Request) (domain.Transaction, error) {
	if _, err := uuid.Parse(transactionID); err != nil {
		return domain.Transaction{}, fault.ErrNotFound
	}
	clientID, err := s.checkOrigin(ctx, transactionID, n.Origin)
	if err != nil {
		return domain.Transaction{}, err
	}
	var out domain.Transaction
	err = s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		t, err := st.LockTransaction(ctx, clientID, transactionID)
		if err != nil {
			return err
		}
		if t = s.withExpiry(t); t.Status == domain.TransactionExpired {
			out = t
			return nil
		}
		if t.Status != domain.AuthorizationPending {
			return domain.ErrAlreadyUsed
		}
		if !completes(t, code, verifier) {
			return errBadCompletion
		}
		sess, err := st.GetSession(ctx, t.ClientID, deref(t.SessionID))
		if err != nil {
			return fmt.Errorf("the session of transaction %s: %w", t.ID, err)
		}
		c, err := s.sessions.Sealed(sess)
		if err != nil {
			return err
		}
		t.Status, t.Blob, t.CompletionHash = c.Status, &c.Blob, nil
		if err := st.CompleteCapture(ctx, t); err != nil {
			return err
		}
		out = t
		return nil
	})
	if err != nil && !errors.Is(err, fault.ErrNotFound) && !errors.Is(err, domain.ErrAlreadyUsed) && !errors.Is(err, errBadCompletion) {
		return domain.Transaction{}, fmt.Errorf("complete: %w", err)
	}
	return out, err
}

// completes reports whether code is the one the callback gave t's returning browser and
// verifier the one of t's code challenge (S256), both compared in constant time.
func completes(t domain.Transaction, code, verifier string) bool {
	if t.CompletionHash == nil || t.CodeChallenge == nil || code == "" || verifier == "" {
		return false
	}
	c, v := sha256.Sum256([]byte(code)), sha256.Sum256([]byte(verifier))
	codeOK := subtle.ConstantTimeCompare(c[:], t.CompletionHash) == 1
	verifierOK := subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(v[:])), []byte(*t.CodeChallenge)) == 1
	return codeOK && verifierOK
}

// Completion is what the operator's redirect of a NETWORK_API authorization finished: an SDK
// session, or a browser flow's authorization.
type Completion struct {
	// Capture is the SDK session, sealed; zero for a browser flow.
	Capture sessions.Capture
	// Transaction is the browser flow; nil for an SDK session.
	Transaction *domain.Transaction
	// Redirect is, for a browser flow, where its browser goes next: the page's return URL,
	// whose fragment names the flow (mnv_transaction) and carries the one-time code that
	// completes it (mnv_code), or its status (mnv_status=EXPIRED) or the error that stopped it
	// (mnv_error).
	Redirect string
}

// CompleteAuthorization finishes the NETWORK_API authorization an operator sent a device back
// to mnv's callback with (package sessions claims its state, once, and exchanges the code). An
// SDK session completes as package sessions completes it, and its device gets the blob. A
// browser flow's session is recorded with a one-time completion code on its transaction, in
// one database transaction, and the browser goes back to the page that captured, with the
// code; the page completes the flow (CompleteTransaction). When the operator's token endpoint
// did not answer, the flow is as it was before its capture (PENDING), so that its page can
// capture it again, and the page learns why; when the flow expired meanwhile, it stays so.
//
// The state binds the callback to its session, once: a wrong or spent state claims nothing and
// spends nothing. It does not say which browser brought it (the authorization URL may have
// been handed to another phone), hence the code and the capturing page's verifier.
func (s *Service) CompleteAuthorization(ctx context.Context, a sessions.Authorization) (Completion, error) {
	claim, err := s.sessions.ClaimAuthorization(ctx, a)
	unavailable := errors.Is(err, fault.ErrUnavailable)
	if claim.Session.Source != sessions.SourceWeb || err != nil && !unavailable {
		if err != nil {
			return Completion{}, err
		}
		c, err := s.sessions.FinishAuthorization(ctx, s.st, claim)
		return Completion{Capture: c}, err
	}
	var out Completion
	err = s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		t, err := st.LockSessionTransaction(ctx, claim.Session.ClientID, claim.Session.ID)
		if err != nil {
			return fmt.Errorf("the transaction of session %s: %w", claim.Session.ID, err)
		}
		if t.Status != domain.AuthorizationPending {
			return domain.ErrAlreadyUsed
		}
		page, fragment := deref(t.ReturnURL), url.Values{"mnv_transaction": {t.ID}}
		switch {
		case s.withExpiry(t).Status == domain.TransactionExpired:
			t.Status = domain.TransactionExpired
			fragment.Set("mnv_status", string(t.Status))
		case unavailable:
			t.Status, t.OperatorID, t.SessionID = domain.TransactionPending, nil, nil
			t.ReturnURL, t.CodeChallenge = nil, nil
			if err := st.CompleteCapture(ctx, t); err != nil {
				return err
			}
			fragment.Set("mnv_error", string(fault.Unavailable))
		default:
			if _, err := s.sessions.FinishAuthorization(ctx, st, claim); err != nil {
				return err
			}
			code := crypto.NewSecret()
			sum := sha256.Sum256([]byte(code))
			t.CompletionHash = sum[:]
			if err := st.CompleteCapture(ctx, t); err != nil {
				return err
			}
			fragment.Set("mnv_code", code)
		}
		// A fragment stays in the browser: neither the client's server nor a Referer sees the
		// transaction id or the code. The browser SDK reads it on the page.
		out.Transaction, out.Redirect = &t, page+"#"+fragment.Encode()
		return nil
	})
	if err != nil {
		return Completion{}, fmt.Errorf("complete the authorization of a browser flow: %w", err)
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
