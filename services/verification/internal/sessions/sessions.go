// Package sessions opens capture sessions: the single-use right to one verify, with the number
// the operator's network showed (package network) sealed into a blob for Verify. An SDK session
// is opened by the app's request itself; a browser flow's VERIFY capture opens its session here
// too, inside its own transaction.
package sessions

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/identity"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/network"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
	"github.com/mnvhq/mnv/services/verification/internal/seal"
)

// Store is what sessions need of the service's storage.
type Store interface {
	InsertSession(ctx context.Context, s domain.Session) error
}

// Service opens sessions.
type Service struct {
	st     Store
	net    *network.Identifier
	sealer *seal.Sealer
	// ttl is how long a sealed blob may be verified (contract: 300 s).
	ttl time.Duration
	now func() time.Time
}

// New returns a Service whose blobs may be verified for ttl.
func New(st Store, net *network.Identifier, sealer *seal.Sealer, ttl time.Duration) *Service {
	return &Service{st: st, net: net, sealer: sealer, ttl: ttl, now: time.Now}
}

// Operators lists the operators the client of p may use.
func (s *Service) Operators(p identity.Principal) []operators.Operator {
	return s.net.Operators(p.Features)
}

// Request is the body of an SDK session.
type Request struct {
	OperatorID *string
	Platform   string // ANDROID, IOS or WEB
	DeviceID   *string
	AppVersion *string
}

// Capture is what a capture gave: its status, the operator and the blob.
type Capture struct {
	SessionID  string
	Status     string
	OperatorID *string
	Blob       string
	ExpiresAt  time.Time
}

// Create opens an SDK session for the client of p (authenticated by its SDK token). The VERIFY
// product is the RPC's rule (the feature gate has checked it).
func (s *Service) Create(ctx context.Context, p identity.Principal, r Request, n network.Request) (Capture, error) {
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
	id, err := s.net.Identify(r.OperatorID, p.Features, n)
	if err != nil {
		return Capture{}, err
	}
	sess := s.session(p.ClientID, "SDK", id)
	sess.Platform, sess.DeviceID, sess.AppVersion = &r.Platform, r.DeviceID, r.AppVersion
	return s.open(ctx, s.st, sess, id.Number.E164)
}

// OpenWeb opens the session of a browser flow's VERIFY capture through st (the capture's
// transaction), for the client of the flow.
func (s *Service) OpenWeb(ctx context.Context, st Store, clientID string, id network.Identity) (Capture, error) {
	return s.open(ctx, st, s.session(clientID, "WEB", id), id.Number.E164)
}

// OpenCAMARA opens the session of a CAMARA authorization for clientID: the line as the
// request's network shows it, through whichever operator's ranges the address is in. Which
// operators the client may use is checked when the session is verified: the client has not
// authenticated yet at the authorization endpoint.
func (s *Service) OpenCAMARA(ctx context.Context, clientID string, n network.Request) (Capture, error) {
	id, err := s.net.Identify(nil, []string{operators.FeatureSandbox}, n)
	if err != nil {
		return Capture{}, err
	}
	return s.open(ctx, s.st, s.session(clientID, "CAMARA", id), id.Number.E164)
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
	return Capture{SessionID: sess.ID, Status: sess.Status, OperatorID: sess.OperatorID, Blob: blob, ExpiresAt: sess.ExpiresAt}, nil
}
