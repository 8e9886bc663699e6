// Package endpoints holds the rules of a client's event webhook endpoints: validation (the same
// SSRF policy as integrations, known event types, bounded counts), the signing secrets sealed
// and shown once, their rotation with an overlap, and the reading of the delivery log. The
// delivery itself is eventhooks/delivery's (Dispatcher here); it reads the signing keys through
// SigningKeys.
package endpoints

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/outbound"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/freetext"
)

// Bounds.
const (
	// MaxEndpoints bounds a client's endpoints: every event is delivered once per endpoint, so
	// the count multiplies the delivery work one client can cause.
	MaxEndpoints = 20
	// MaxOverlap bounds how long a rotated-out secret keeps signing.
	MaxOverlap = 7 * 24 * time.Hour
	// DefaultOverlap is MNV_WEBHOOK_SECRET_OVERLAP's default.
	DefaultOverlap = 24 * time.Hour
	// AllEvents subscribes to every type, present and future.
	AllEvents = "*"
)

var descriptionRule = freetext.Rule{Max: 500}

// Errors of the rules.
var (
	ErrTooMany = fault.New(fault.Conflict, fmt.Sprintf("a client may have at most %d webhook endpoints; delete one first", MaxEndpoints))
	// ErrOperatorDisabled: only the operator enables again what the operator disabled.
	ErrOperatorDisabled = fault.New(fault.Conflict, "the endpoint was disabled by the operator; contact support to enable it")
	ErrDisabled         = fault.New(fault.Conflict, "the endpoint is disabled; enable it first")
	// ErrNoDispatcher: the delivery engine is not wired into this process.
	ErrNoDispatcher = fault.New(fault.Unavailable, "webhook delivery is not available, try again later")
)

// SecretStore reads the secrets that sign an endpoint's deliveries.
type SecretStore interface {
	// ActiveWebhookSecrets reads the client's endpoint's secrets that still sign at now (the
	// current one and those whose overlap has not ended), newest first.
	ActiveWebhookSecrets(ctx context.Context, clientID, endpointID string, now time.Time) ([]domain.WebhookSecret, error)
}

// Store is what webhooks needs of the service's storage. A read or write of another client's
// endpoint or delivery is fault.ErrNotFound. The methods marked "in a transaction" run only
// inside Tx.InTx.
type Store interface {
	SecretStore
	// LockClientWebhooks serialises the writers of a client's endpoint set until the end of
	// the transaction, so the count check holds (in a transaction).
	LockClientWebhooks(ctx context.Context, clientID string) error
	CountWebhookEndpoints(ctx context.Context, clientID string) (int, error)
	InsertWebhookEndpoint(ctx context.Context, e domain.WebhookEndpoint) (domain.WebhookEndpoint, error)
	// GetWebhookEndpoint reads an endpoint; forUpdate locks its row to the end of the
	// transaction.
	GetWebhookEndpoint(ctx context.Context, clientID, id string, forUpdate bool) (domain.WebhookEndpoint, error)
	ListWebhookEndpoints(ctx context.Context, clientID string, limit, offset int64) (domain.Page[domain.WebhookEndpoint], error)
	// UpdateWebhookEndpoint writes url, event types, description and the enabled state.
	UpdateWebhookEndpoint(ctx context.Context, e domain.WebhookEndpoint) (domain.WebhookEndpoint, error)
	DeleteWebhookEndpoint(ctx context.Context, clientID, id string) error
	InsertWebhookSecret(ctx context.Context, s domain.WebhookSecret) error
	// RetireWebhookSecret gives the endpoint's current secret the expiry until.
	RetireWebhookSecret(ctx context.Context, clientID, endpointID string, until time.Time) error
	// DeleteExpiredWebhookSecrets removes the endpoint's secrets expired at now.
	DeleteExpiredWebhookSecrets(ctx context.Context, clientID, endpointID string, now time.Time) error
	GetWebhookDelivery(ctx context.Context, clientID, id string) (domain.WebhookDelivery, error)
	// ListWebhookDeliveries reads a page of an endpoint's deliveries, newest first, each with
	// its attempts; status narrows them when set.
	ListWebhookDeliveries(ctx context.Context, clientID, endpointID string, status *domain.DeliveryStatus, limit, offset int64) (domain.Page[domain.WebhookDeliveryLog], error)
}

// Tx runs fn with the store inside one transaction.
type Tx interface {
	InTx(ctx context.Context, fn func(ctx context.Context, st Store) error) error
}

// Dispatcher is the delivery engine, as the endpoint rules need it.
type Dispatcher interface {
	// Ping queues a ping event to ep alone, whatever it subscribes to, and returns the
	// event's id (its webhook-id).
	Ping(ctx context.Context, ep domain.WebhookEndpoint) (eventID string, err error)
	// Redeliver queues one more delivery of the client's delivery's event to its endpoint.
	Redeliver(ctx context.Context, clientID, deliveryID string) error
}

// Config is the service's configuration of webhooks.
type Config struct {
	// Overlap is how long a rotated-out secret keeps signing when the request names none
	// (MNV_WEBHOOK_SECRET_OVERLAP).
	Overlap time.Duration
}

// Service manages webhook endpoints.
type Service struct {
	st       Store
	tx       Tx
	keyring  *crypto.Keyring
	policy   outbound.Policy
	cfg      Config
	dispatch Dispatcher
	// Now is the clock; tests move it.
	Now func() time.Time
}

// New returns a Service; policy decides which URLs are allowed, dispatch (which may be nil
// until the delivery engine is wired) sends pings and redeliveries.
func New(st Store, tx Tx, keyring *crypto.Keyring, policy outbound.Policy, cfg Config, dispatch Dispatcher) *Service {
	return &Service{st: st, tx: tx, keyring: keyring, policy: policy, cfg: cfg, dispatch: dispatch, Now: time.Now}
}

// SigningKeys returns the HMAC keys that sign a delivery to the endpoint at now: the current
// secret's first, then those still in a rotation's overlap. The delivery engine calls it for
// each attempt, so a rotation takes effect at the next attempt.
func SigningKeys(ctx context.Context, st SecretStore, keyring *crypto.Keyring, clientID, endpointID string, now time.Time) ([][]byte, error) {
	secrets, err := st.ActiveWebhookSecrets(ctx, clientID, endpointID, now)
	if err != nil {
		return nil, err
	}
	keys := make([][]byte, 0, len(secrets))
	for _, s := range secrets {
		secret, err := OpenSecret(keyring, s)
		if err != nil {
			return nil, err
		}
		key, err := outbound.ParseSecret(secret)
		if err != nil {
			return nil, fmt.Errorf("webhook secret %s: %w", s.ID, err)
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("webhook endpoint %s has no signing secret", endpointID)
	}
	return keys, nil
}

// OpenSecret opens a sealed secret: its "whsec_…" form.
func OpenSecret(keyring *crypto.Keyring, s domain.WebhookSecret) (string, error) {
	b, err := keyring.Open(s.Sealed, domain.WebhookSecretAD(s.ID))
	if err != nil {
		return "", fmt.Errorf("open webhook secret %s: %w", s.ID, err)
	}
	return string(b), nil
}

// WithSecret is an endpoint with its new signing secret: the one time it is shown.
type WithSecret struct {
	Endpoint domain.WebhookEndpoint
	Secret   string
	// PreviousExpiresAt is until when the secret it replaced still signs (a rotation).
	PreviousExpiresAt *time.Time
}

// CreateRequest is a new endpoint.
type CreateRequest struct {
	URL         string
	Events      []string
	Description string
	// Enabled defaults to true.
	Enabled *bool
}

// Create validates and stores an endpoint with its first secret.
func (s *Service) Create(ctx context.Context, clientID string, r CreateRequest) (WithSecret, error) {
	types, err := eventTypes(r.Events)
	if err != nil {
		return WithSecret{}, err
	}
	now := s.Now()
	e := domain.WebhookEndpoint{ID: uuid.NewString(), ClientID: clientID, URL: r.URL, EventTypes: types, Description: r.Description, Enabled: true}
	if r.Enabled != nil && !*r.Enabled {
		e.Enabled, e.DisabledReason, e.DisabledAt = false, domain.WebhookDisabledByClient, &now
	}
	if err := s.validate(e); err != nil {
		return WithSecret{}, err
	}
	secret, row := s.newSecret(clientID, e.ID)
	var out domain.WebhookEndpoint
	err = s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		if err := st.LockClientWebhooks(ctx, clientID); err != nil {
			return err
		}
		n, err := st.CountWebhookEndpoints(ctx, clientID)
		if err != nil {
			return err
		}
		if n >= MaxEndpoints {
			return ErrTooMany
		}
		if out, err = st.InsertWebhookEndpoint(ctx, e); err != nil {
			return err
		}
		return st.InsertWebhookSecret(ctx, row)
	})
	if err != nil {
		return WithSecret{}, err
	}
	return WithSecret{Endpoint: out, Secret: secret}, nil
}

// newSecret makes a secret for the client's endpoint and its row, sealed to that row.
func (s *Service) newSecret(clientID, endpointID string) (string, domain.WebhookSecret) {
	secret := outbound.NewSecret()
	id := uuid.NewString()
	return secret, domain.WebhookSecret{ID: id, ClientID: clientID, EndpointID: endpointID, Sealed: s.keyring.Seal([]byte(secret), domain.WebhookSecretAD(id))}
}

// eventTypes turns a request's list into the stored form: nil for every type (empty or
// ["*"]), else the known types, each once.
func eventTypes(in []string) ([]string, error) {
	if len(in) == 0 || (len(in) == 1 && in[0] == AllEvents) {
		return nil, nil
	}
	out := make([]string, 0, len(in))
	for _, t := range in {
		switch {
		case t == AllEvents:
			return nil, fault.Invalid("events", `"*" (every type) stands alone`)
		case !events.Known(t):
			return nil, fault.Invalid("events", "unknown event type %q; known: %s", truncate(t, 64), strings.Join(events.Types, ", "))
		case !slices.Contains(out, t):
			out = append(out, t)
		}
	}
	return out, nil
}

// truncate bounds what of a caller's value goes back into a message.
func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// EventsOf is the endpoint's subscription as the API shows it: ["*"] for every type.
func EventsOf(e domain.WebhookEndpoint) []string {
	if e.EventTypes == nil {
		return []string{AllEvents}
	}
	return e.EventTypes
}

func (s *Service) validate(e domain.WebhookEndpoint) error {
	if _, err := s.policy.CheckURL(e.URL); err != nil {
		return fault.Invalid("url", "%s", err.Error())
	}
	if e.Description != "" {
		if err := descriptionRule.Check("description", e.Description); err != nil {
			return err
		}
	}
	return nil
}

// Get reads an endpoint of the client.
func (s *Service) Get(ctx context.Context, clientID, id string) (domain.WebhookEndpoint, error) {
	if !isUUID(id) {
		return domain.WebhookEndpoint{}, fault.ErrNotFound
	}
	return s.st.GetWebhookEndpoint(ctx, clientID, id, false)
}

func isUUID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}

// List reads a page of the client's endpoints, newest first.
func (s *Service) List(ctx context.Context, clientID string, limit, offset int64) (domain.Page[domain.WebhookEndpoint], error) {
	return s.st.ListWebhookEndpoints(ctx, clientID, limit, offset)
}

// Patch is a partial update; nil fields stay as they are.
type Patch struct {
	URL, Description *string
	// Events replaces the subscription when not empty.
	Events  []string
	Enabled *bool
}

// Update applies a patch. Disabling records the client as the reason; enabling clears the
// failure record, so an endpoint the client fixed starts afresh. What the operator disabled
// stays disabled.
func (s *Service) Update(ctx context.Context, clientID, id string, p Patch) (domain.WebhookEndpoint, error) {
	if !isUUID(id) {
		return domain.WebhookEndpoint{}, fault.ErrNotFound
	}
	var types []string
	if len(p.Events) > 0 {
		var err error
		if types, err = eventTypes(p.Events); err != nil {
			return domain.WebhookEndpoint{}, err
		}
	}
	var out domain.WebhookEndpoint
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		e, err := st.GetWebhookEndpoint(ctx, clientID, id, true)
		if err != nil {
			return err
		}
		if p.URL != nil {
			e.URL = *p.URL
		}
		if p.Description != nil {
			e.Description = *p.Description
		}
		if len(p.Events) > 0 {
			e.EventTypes = types
		}
		if p.Enabled != nil {
			if err := s.setEnabled(&e, *p.Enabled, domain.WebhookDisabledByClient); err != nil {
				return err
			}
		}
		if err := s.validate(e); err != nil {
			return err
		}
		out, err = st.UpdateWebhookEndpoint(ctx, e)
		return err
	})
	return out, err
}

// setEnabled moves e to enabled, or to disabled by who. A disabled endpoint disabled again
// keeps its reason, unless the operator disables it: that one outranks the others.
func (s *Service) setEnabled(e *domain.WebhookEndpoint, enabled bool, who domain.DisabledReason) error {
	now := s.Now()
	switch {
	case enabled && e.DisabledReason == domain.WebhookDisabledByOperator && who != domain.WebhookDisabledByOperator:
		return ErrOperatorDisabled
	case enabled:
		e.Enabled, e.DisabledReason, e.DisabledAt, e.FailingSince = true, "", nil, nil
	case e.Enabled || who == domain.WebhookDisabledByOperator:
		e.Enabled, e.DisabledReason, e.DisabledAt = false, who, &now
	}
	return nil
}

// Delete removes an endpoint with its secrets and deliveries.
func (s *Service) Delete(ctx context.Context, clientID, id string) error {
	if !isUUID(id) {
		return fault.ErrNotFound
	}
	return s.st.DeleteWebhookEndpoint(ctx, clientID, id)
}

// RotateSecret gives the endpoint a new current secret. The one it replaces signs beside it
// for overlap (the configured one when nil); secrets whose overlap has ended go.
func (s *Service) RotateSecret(ctx context.Context, clientID, id string, overlap *time.Duration) (WithSecret, error) {
	if !isUUID(id) {
		return WithSecret{}, fault.ErrNotFound
	}
	d := s.cfg.Overlap
	if overlap != nil {
		if *overlap < 0 || *overlap > MaxOverlap {
			return WithSecret{}, fault.Invalid("overlapSeconds", "must be between 0 and %d", int(MaxOverlap/time.Second))
		}
		d = *overlap
	}
	secret, row := s.newSecret(clientID, id)
	now := s.Now()
	until := now.Add(d)
	var out domain.WebhookEndpoint
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		// The row lock orders rotations of one endpoint: each retires the current secret the
		// one before it made.
		e, err := st.GetWebhookEndpoint(ctx, clientID, id, true)
		if err != nil {
			return err
		}
		out = e
		if err := st.RetireWebhookSecret(ctx, clientID, id, until); err != nil {
			return err
		}
		if err := st.DeleteExpiredWebhookSecrets(ctx, clientID, id, now); err != nil {
			return err
		}
		return st.InsertWebhookSecret(ctx, row)
	})
	if err != nil {
		return WithSecret{}, err
	}
	return WithSecret{Endpoint: out, Secret: secret, PreviousExpiresAt: &until}, nil
}

// Test sends a ping to the endpoint alone and returns the event's id.
func (s *Service) Test(ctx context.Context, clientID, id string) (string, error) {
	e, err := s.Get(ctx, clientID, id)
	if err != nil {
		return "", err
	}
	if !e.Enabled {
		return "", ErrDisabled
	}
	if s.dispatch == nil {
		return "", ErrNoDispatcher
	}
	return s.dispatch.Ping(ctx, e)
}

// Redeliver queues one more delivery of a delivery's event to its endpoint.
func (s *Service) Redeliver(ctx context.Context, clientID, deliveryID string) error {
	if !isUUID(deliveryID) {
		return fault.ErrNotFound
	}
	d, err := s.st.GetWebhookDelivery(ctx, clientID, deliveryID)
	if err != nil {
		return err
	}
	e, err := s.st.GetWebhookEndpoint(ctx, clientID, d.EndpointID, false)
	if err != nil {
		return err
	}
	if !e.Enabled {
		return ErrDisabled
	}
	if s.dispatch == nil {
		return ErrNoDispatcher
	}
	return s.dispatch.Redeliver(ctx, clientID, deliveryID)
}

// deliveryStatuses are the statuses a delivery log may be narrowed to.
var deliveryStatuses = []domain.DeliveryStatus{domain.DeliveryPending, domain.DeliverySucceeded, domain.DeliveryFailed, domain.DeliveryCancelled}

// Deliveries reads a page of an endpoint's delivery log.
func (s *Service) Deliveries(ctx context.Context, clientID, id string, status *domain.DeliveryStatus, limit, offset int64) (domain.Page[domain.WebhookDeliveryLog], error) {
	if _, err := s.Get(ctx, clientID, id); err != nil {
		return domain.Page[domain.WebhookDeliveryLog]{}, err
	}
	if status != nil && !slices.Contains(deliveryStatuses, *status) {
		return domain.Page[domain.WebhookDeliveryLog]{}, fault.Invalid("status", "must be one of PENDING, SUCCEEDED, FAILED, CANCELLED")
	}
	return s.st.ListWebhookDeliveries(ctx, clientID, id, status, limit, offset)
}

// ClientEndpoints reads every endpoint of a client, for the operator.
func (s *Service) ClientEndpoints(ctx context.Context, clientID string) ([]domain.WebhookEndpoint, error) {
	if !isUUID(clientID) {
		return nil, fault.Invalid("clientId", "must be a client id")
	}
	p, err := s.st.ListWebhookEndpoints(ctx, clientID, MaxEndpoints, 0)
	return p.Items, err
}

// DisableByOperator disables a client's endpoint with the reason OPERATOR.
func (s *Service) DisableByOperator(ctx context.Context, clientID, id string) (domain.WebhookEndpoint, error) {
	return s.setByOperator(ctx, clientID, id, false)
}

// EnableByOperator enables a client's endpoint whoever disabled it: the one way back for an
// endpoint the operator disabled.
func (s *Service) EnableByOperator(ctx context.Context, clientID, id string) (domain.WebhookEndpoint, error) {
	return s.setByOperator(ctx, clientID, id, true)
}

func (s *Service) setByOperator(ctx context.Context, clientID, id string, enabled bool) (domain.WebhookEndpoint, error) {
	if !isUUID(clientID) {
		return domain.WebhookEndpoint{}, fault.Invalid("clientId", "must be a client id")
	}
	if !isUUID(id) {
		return domain.WebhookEndpoint{}, fault.ErrNotFound
	}
	var out domain.WebhookEndpoint
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		e, err := st.GetWebhookEndpoint(ctx, clientID, id, true)
		if err != nil {
			return err
		}
		if err := s.setEnabled(&e, enabled, domain.WebhookDisabledByOperator); err != nil {
			return err
		}
		out, err = st.UpdateWebhookEndpoint(ctx, e)
		return err
	})
	return out, err
}
