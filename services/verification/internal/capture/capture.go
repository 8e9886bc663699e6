// Package capture turns what an operator's network shows about a request into a capture: an SDK
// session or a browser transaction. A number header is believed only when the request comes
// from the operator's trusted ranges; the captured number is sealed into a single-use blob for
// Verify, or (stuck-plus) kept sealed at rest for an audited reveal.
package capture

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/freetext"
	"github.com/mnvhq/mnv/services/platform/identity"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
	"github.com/mnvhq/mnv/services/verification/internal/seal"
	"github.com/mnvhq/mnv/services/verification/internal/store"
)

// Network is what a request showed of the network it came through: the client's address (as
// the gateway resolved it), the headers an operator's proxy may have added, by canonical name,
// and for a browser capture the page's Origin header.
type Network struct {
	Addr    netip.Addr
	Headers map[string]string
	Origin  string
}

// Origins tells which web pages may capture a client's browser flows; accountsclient.Client is
// one.
type Origins interface {
	AllowsWebOrigin(ctx context.Context, clientID, origin string) (bool, error)
}

// shortText bounds the client's own references and the SDK's device fields.
var shortText = freetext.Rule{Max: 128}

// Config sets the lifetimes.
type Config struct {
	// SessionTTL is how long a sealed blob may be verified (contract: 300 s).
	SessionTTL time.Duration
	// TransactionTTL is how long a browser flow waits for its capture.
	TransactionTTL time.Duration
}

// Service captures numbers.
type Service struct {
	pool    *pgxpool.Pool
	ops     *operators.Registry
	sealer  *seal.Sealer
	vault   *phone.Vault
	origins Origins
	cfg     Config
	log     *zap.Logger
	now     func() time.Time
}

// New returns a Service.
func New(pool *pgxpool.Pool, ops *operators.Registry, sealer *seal.Sealer, vault *phone.Vault, origins Origins, cfg Config, log *zap.Logger) *Service {
	return &Service{pool: pool, ops: ops, sealer: sealer, vault: vault, origins: origins, cfg: cfg, log: log, now: time.Now}
}

// Operators lists the operators a client may use.
func (s *Service) Operators(p identity.Principal) []operators.Operator {
	var out []operators.Operator
	for _, op := range s.ops.List() {
		if op.EnabledFor(p.Features) {
			out = append(out, op)
		}
	}
	return out
}

// SessionRequest is the body of an SDK session.
type SessionRequest struct {
	OperatorID *string
	Platform   string // ANDROID, IOS or WEB
	DeviceID   *string
	AppVersion *string
}

// Capture is what a capture gave: its status, the operator and, for a verify, the blob.
type Capture struct {
	SessionID  string
	Status     string
	OperatorID *string
	Blob       string
	ExpiresAt  time.Time
}

// CreateSession opens an SDK session for the client of p (authenticated by its SDK token).
// The VERIFY product is the RPC's rule (the feature gate has checked it).
func (s *Service) CreateSession(ctx context.Context, p identity.Principal, r SessionRequest, n Network) (Capture, error) {
	if !slices.Contains([]string{"ANDROID", "IOS", "WEB"}, r.Platform) {
		return Capture{}, fault.Invalid("platform", "must be ANDROID, IOS or WEB")
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"deviceId", r.DeviceID}, {"appVersion", r.AppVersion}} {
		if f.v != nil {
			if err := shortText.Check(f.name, *f.v); err != nil {
				return Capture{}, err
			}
		}
	}
	op, found, err := s.operator(r.OperatorID, p.Features, n)
	if err != nil {
		return Capture{}, err
	}
	number := s.number(op, found, n)
	now := s.now()
	sess := domain.Session{
		ID: uuid.NewString(), ClientID: p.ClientID, Source: "SDK", Status: status(number.E164),
		Platform: &r.Platform, DeviceID: r.DeviceID, AppVersion: r.AppVersion, CreatedAt: now, ExpiresAt: now.Add(s.cfg.SessionTTL),
	}
	if found {
		sess.OperatorID = &op.ID
	}
	return s.openSession(ctx, s.pool, sess, number.E164)
}

// openSession stores a session and seals its blob.
func (s *Service) openSession(ctx context.Context, db store.DB, sess domain.Session, number string) (Capture, error) {
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
	if err := store.InsertSession(ctx, db, sess); err != nil {
		return Capture{}, err
	}
	return Capture{SessionID: sess.ID, Status: sess.Status, OperatorID: sess.OperatorID, Blob: blob, ExpiresAt: sess.ExpiresAt}, nil
}

// operator picks the operator of a capture: the one named (which must exist and be enabled for
// the client), else the one whose ranges the address is in. found is false when none is.
func (s *Service) operator(id *string, features []string, n Network) (operators.Operator, bool, error) {
	if id != nil {
		op, ok := s.ops.Get(*id)
		if !ok || !op.EnabledFor(features) {
			return operators.Operator{}, false, fault.NotEnabled("operatorId", "operator %q is not available to this account", *id)
		}
		return op, true, nil
	}
	op, ok := s.ops.ByAddr(n.Addr)
	if !ok || !op.EnabledFor(features) {
		return operators.Operator{}, false, nil
	}
	return op, true, nil
}

// number is the subscriber number the operator's proxy gave, or the zero Number (E164 ""): a
// header is believed only from the operator's trusted ranges, and only when it holds a valid
// number.
func (s *Service) number(op operators.Operator, found bool, n Network) phone.Number {
	if !found || !op.Supports(operators.MethodHeaderEnrichment) || !op.Trusts(n.Addr) {
		return phone.Number{}
	}
	v := n.Headers[op.NumberHeader]
	if v == "" {
		return phone.Number{}
	}
	num, err := phone.Parse(v)
	if err != nil {
		s.log.Warn("operator sent an invalid number header", zap.String("operator", op.ID), zap.String("masked", phone.Mask(v)))
		return phone.Number{}
	}
	return num
}

func status(number string) string {
	if number == "" {
		return domain.NoNetworkIdentity
	}
	return domain.Captured
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
	if err := shortText.Check("metadataId", metadataID); err != nil {
		return domain.Transaction{}, err
	}
	now := s.now()
	return store.InsertTransaction(ctx, s.pool, domain.Transaction{
		ID: uuid.NewString(), ClientID: p.ClientID, ServiceCode: serviceCode, MetadataID: metadataID,
		Features: p.Features, Status: domain.TransactionPending, ExpiresAt: now.Add(s.cfg.TransactionTTL),
	})
}

// GetTransaction resolves a browser flow of the client.
func (s *Service) GetTransaction(ctx context.Context, clientID, id string) (domain.Transaction, error) {
	if _, err := uuid.Parse(id); err != nil {
		return domain.Transaction{}, fault.ErrNotFound
	}
	t, err := store.GetTransaction(ctx, s.pool, clientID, id)
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
	clientID, err := store.TransactionClient(ctx, s.pool, transactionID)
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

// CaptureTransaction captures a browser flow, identified by its id, from a page on one of its client's
// allowed origins (n.Origin). A flow is captured once; a refused origin leaves it untouched.
//
// The origin binds the capture to the client's own site the way a registered redirect URI
// binds an OAuth authorization to the client: a page elsewhere that obtained a transaction id
// (an attacker's, started for a number she does not own) cannot have a victim's browser capture
// it, because the victim's browser tells us the page's origin and the page cannot forge it.
func (s *Service) CaptureTransaction(ctx context.Context, transactionID string, n Network) (domain.Transaction, error) {
	if _, err := uuid.Parse(transactionID); err != nil {
		return domain.Transaction{}, fault.ErrNotFound
	}
	// Checked before the transaction row is locked: a transaction's client never changes, and
	// the row lock should not wait on a call to accounts.
	if err := s.checkOrigin(ctx, transactionID, n.Origin); err != nil {
		return domain.Transaction{}, err
	}
	var out domain.Transaction
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		t, err := store.LockTransaction(ctx, tx, transactionID)
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
		op, found, err := s.operator(nil, t.Features, n)
		if err != nil {
			return err
		}
		number := s.number(op, found, n)
		t.Status = status(number.E164)
		if found {
			t.OperatorID = &op.ID
		}
		switch t.ServiceCode {
		case domain.ServiceVerify:
			now := s.now()
			c, err := s.openSession(ctx, tx, domain.Session{
				ID: uuid.NewString(), ClientID: t.ClientID, Source: "WEB", Status: t.Status, OperatorID: t.OperatorID,
				CreatedAt: now, ExpiresAt: now.Add(s.cfg.SessionTTL),
			}, number.E164)
			if err != nil {
				return err
			}
			t.SessionID, t.Blob = &c.SessionID, &c.Blob
		case domain.ServiceStuckPlus:
			if number.E164 != "" {
				sp := domain.StuckPlusSession{
					ID: uuid.NewString(), ClientID: t.ClientID, TransactionID: t.ID, MetadataID: t.MetadataID,
					OperatorID: op.ID, NumberMasked: number.Masked(),
				}
				sp.NumberSealed = s.vault.Seal(number.E164, "stuck_plus_sessions", sp.ID)
				if err := store.InsertStuckPlusSession(ctx, tx, sp, s.vault.Hash(number.E164)); err != nil {
					return err
				}
				t.StuckPlusSessionID = &sp.ID
			}
		}
		if err := store.CompleteCapture(ctx, tx, t); err != nil {
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
