// Package browser runs the browser flow: a client's backend starts a transaction for a product
// (VERIFY or STUCK_PLUS), a page on one of the client's web origins has the visitor's browser
// capture it through the operator's network, and the backend reads what the capture gave: a
// sealed blob for Verify (package sessions) or a kept stuck-plus number (package stuckplus).
package browser

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/identity"
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
	stuckplus.KeepStore
	InsertTransaction(ctx context.Context, t domain.Transaction) (domain.Transaction, error)
	GetTransaction(ctx context.Context, clientID, id string) (domain.Transaction, error)
	// TransactionClient is the client of a transaction, whatever its state.
	TransactionClient(ctx context.Context, id string) (string, error)
	// LockTransaction reads a transaction by its id alone and holds it until the transaction
	// ends.
	LockTransaction(ctx context.Context, id string) (domain.Transaction, error)
	CompleteCapture(ctx context.Context, t domain.Transaction) error
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
func (s *Service) CreateTransaction(ctx context.Context, p identity.Principal, serviceCode, metadataID string) (domain.Transaction, error) {
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

func (s *Service) withExpiry(t domain.Transaction) domain.Transaction {
	if t.Status == domain.TransactionPending && !s.now().Before(t.ExpiresAt) {
		t.Status = domain.TransactionExpired
	}
	return t
}

// OriginAllowed tells whether a page whose Origin header is origin may call the browser routes
// of a transaction: the origin must be one the transaction's client allowed. An unknown
// transaction allows no origin, so a page learns nothing about which ids exist.
func (s *Service) OriginAllowed(ctx context.Context, transactionID, origin string) (bool, error) {
	if _, err := uuid.Parse(transactionID); err != nil {
		return false, nil
	}
	err := s.checkOrigin(ctx, transactionID, origin)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fault.ErrNotFound), errors.Is(err, domain.ErrOriginNotAllowed):
		return false, nil
	}
	return false, err
}

// checkOrigin returns nil when origin may capture the transaction, fault.ErrNotFound for an
// unknown transaction and domain.ErrOriginNotAllowed for any other origin (none included).
func (s *Service) checkOrigin(ctx context.Context, transactionID, origin string) error {
	clientID, err := s.st.TransactionClient(ctx, transactionID)
	if err != nil {
		return err
	}
	if origin == "" {
		return domain.ErrOriginNotAllowed
	}
	ok, err := s.origins.AllowsWebOrigin(ctx, clientID, origin)
	if err != nil {
		return fmt.Errorf("%w: %w", fault.ErrUnavailable, err)
	}
	if !ok {
		return domain.ErrOriginNotAllowed
	}
	return nil
}

// CaptureTransaction captures a browser flow, identified by its id, from a page on one of its
// client's allowed origins (n.Origin). A flow is captured once; a refused origin leaves it
// untouched.
//
// The origin binds the capture to the client's own site the way a registered redirect URI
// binds an OAuth authorization to the client: a page elsewhere that obtained a transaction id
// (an attacker's, started for a number she does not own) cannot have a victim's browser capture
// it, because the victim's browser tells us the page's origin and the page cannot forge it.
func (s *Service) CaptureTransaction(ctx context.Context, transactionID string, n network.Request) (domain.Transaction, error) {
	if _, err := uuid.Parse(transactionID); err != nil {
		return domain.Transaction{}, fault.ErrNotFound
	}
	// Checked before the transaction row is locked: a transaction's client never changes, and
	// the row lock should not wait on a call to accounts.
	if err := s.checkOrigin(ctx, transactionID, n.Origin); err != nil {
		return domain.Transaction{}, err
	}
	var out domain.Transaction
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		t, err := st.LockTransaction(ctx, transactionID)
		if err != nil {
			return err
		}
		if t = s.withExpiry(t); t.Status == domain.TransactionExpired {
			out = t
			return nil
		}
		if t.Status != domain.TransactionPending {
			return domain.ErrAlreadyUsed
		}
		id, err := s.net.Identify(nil, operators.Client{Features: t.Features, Operators: t.Operators}, n)
		if err != nil {
			return err
		}
		t.Status, t.OperatorID = id.Status(), id.OperatorID()
		switch t.ServiceCode {
		case domain.ServiceVerify:
			c, err := s.sessions.OpenWeb(ctx, st, t.ClientID, id)
			if err != nil {
				return err
			}
			t.SessionID, t.Blob = &c.SessionID, &c.Blob
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
		out = t
		return nil
	})
	if err != nil && !errors.Is(err, fault.ErrNotFound) && !errors.Is(err, domain.ErrAlreadyUsed) {
		return domain.Transaction{}, fmt.Errorf("capture: %w", err)
	}
	return out, err
}
