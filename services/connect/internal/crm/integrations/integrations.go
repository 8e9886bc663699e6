// Package integrations holds the rules of a client's CRM integrations (crm/push sends them): validation (lengths, kinds,
// SSRF-safe endpoints, field mappings), the credential sealed and never shown, the signing
// secret shown once, and manual syncs.
package integrations

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/connect/internal/crm/render"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/outbound"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/freetext"
)

// Bounds (docs/api-decisions.md#integrations).
const (
	maxDisplayName   = 100
	maxType          = 64
	maxAPIKey        = 4096
	defaultBatchSize = 100
	maxBatchSize     = 1000
	maxMappings      = 100
	maxTargetName    = 100
	secretPrefix     = "mnvwhsec_"
)

// displayNameRule bounds an integration's name; its bounds are told as a range (1 to 100).
var displayNameRule = freetext.Rule{Min: 1, Max: maxDisplayName}

var (
	methods  = []string{"POST", "PUT", "PATCH"}
	triggers = []string{domain.TriggerProfileCreated, domain.TriggerProfileMatched, domain.TriggerProfileEnriched,
		domain.TriggerImportCompleted, domain.TriggerManual}
)

// Store is what integrations needs of the service's storage. A read or write of another
// client's integration is fault.ErrNotFound.
type Store interface {
	InsertIntegration(ctx context.Context, it domain.Integration) (domain.Integration, error)
	UpdateIntegration(ctx context.Context, it domain.Integration) (domain.Integration, error)
	GetIntegration(ctx context.Context, clientID, id string) (domain.Integration, error)
	ListIntegrations(ctx context.Context, clientID string, limit, offset int64) (domain.Page[domain.Integration], error)
	DeleteIntegration(ctx context.Context, clientID, id string) error
	// EnqueueAll queues every profile of the integration's client (matched ones only for a
	// matchedOnly integration), of importJobID when set, in batches of its size, each with its
	// job, and returns how many records it queued. In a transaction.
	EnqueueAll(ctx context.Context, it domain.Integration, trigger string, importJobID *string) (int64, error)
	ListSyncEvents(ctx context.Context, clientID, integrationID string, status *domain.SyncStatus, limit, offset int64) (domain.Page[domain.SyncEvent], error)
}

// Tx runs a function with the store inside one transaction.
type Tx interface {
	InTx(ctx context.Context, fn func(ctx context.Context, st Store) error) error
}

// Service manages integrations.
type Service struct {
	st      Store
	tx      Tx
	keyring *crypto.Keyring
	policy  outbound.Policy
}

// New returns a Service; policy decides which endpoints are allowed.
func New(st Store, tx Tx, keyring *crypto.Keyring, policy outbound.Policy) *Service {
	return &Service{st: st, tx: tx, keyring: keyring, policy: policy}
}

// Sealing of the credential and the signing secret, bound to the integration's row.
func credentialAD(id string) []byte { return []byte("connect.integrations.api_key:" + id) }
func secretAD(id string) []byte     { return []byte("connect.integrations.signing_secret:" + id) }

// OpenAPIKey opens an integration's credential ("" when it has none).
func OpenAPIKey(k *crypto.Keyring, it domain.Integration) (string, error) {
	if it.APIKeySealed == nil {
		return "", nil
	}
	b, err := k.Open(it.APIKeySealed, credentialAD(it.ID))
	return string(b), err
}

// OpenSecret opens an integration's signing secret.
func OpenSecret(k *crypto.Keyring, it domain.Integration) ([]byte, error) {
	return k.Open(it.SigningSecretSealed, secretAD(it.ID))
}

// CreateRequest is a new integration (POST /v1/api/me/connect/integrations).
type CreateRequest struct {
	DisplayName, Type, EndpointURL, HTTPMethod, APIKey, TriggerEvent string
	FieldMappings                                                    map[string]string
	BatchSize                                                        *int
	MatchedOnly                                                      *bool
}

// Created is a new integration with its signing secret, shown once.
type Created struct {
	Integration   domain.Integration
	SigningSecret string
	// WebhookSecret is the same key as a Standard Webhooks secret (StandardSecret), which a
	// receiver's Standard Webhooks library takes as it is to verify webhook-signature.
	WebhookSecret string
}

// StandardSecret is an integration's signing secret in the Standard Webhooks form: "whsec_"
// and the base64 of the bytes that sign (the secret's own bytes, the key of X-Mnv-Signature
// too), so both signatures verify with what the client was shown once.
func StandardSecret(signingSecret string) string {
	return outbound.SecretPrefix + base64.StdEncoding.EncodeToString([]byte(signingSecret))
}

// Create validates and stores an integration.
func (s *Service) Create(ctx context.Context, clientID string, r CreateRequest) (Created, error) {
	it := domain.Integration{
		ID: uuid.NewString(), ClientID: clientID, DisplayName: r.DisplayName, Type: r.Type, EndpointURL: r.EndpointURL,
		HTTPMethod: r.HTTPMethod, TriggerEvent: r.TriggerEvent, FieldMappings: r.FieldMappings,
		BatchSize: defaultBatchSize, Status: domain.IntegrationActive,
	}
	if r.BatchSize != nil {
		it.BatchSize = *r.BatchSize
	}
	if r.MatchedOnly != nil {
		it.MatchedOnly = *r.MatchedOnly
	}
	if err := s.validate(it); err != nil {
		return Created{}, err
	}
	if err := s.sealAPIKey(&it, r.APIKey); err != nil {
		return Created{}, err
	}
	secret := crypto.NewToken(secretPrefix)
	it.SigningSecretSealed = s.keyring.Seal([]byte(secret), secretAD(it.ID))
	out, err := s.st.InsertIntegration(ctx, it)
	if err != nil {
		return Created{}, err
	}
	return Created{Integration: out, SigningSecret: secret, WebhookSecret: StandardSecret(secret)}, nil
}

func (s *Service) sealAPIKey(it *domain.Integration, key string) error {
	switch {
	case key == "":
		it.APIKeySealed = nil
	case len(key) > maxAPIKey || strings.ContainsFunc(key, func(r rune) bool { return r < 0x21 || r > 0x7e }):
		// Sent as a header value: printable ASCII without spaces. The value is never echoed.
		return fault.Invalid("apiKey", "must be at most %d printable ASCII characters without spaces", maxAPIKey)
	default:
		it.APIKeySealed = s.keyring.Seal([]byte(key), credentialAD(it.ID))
	}
	return nil
}

func (s *Service) validate(it domain.Integration) error {
	if err := displayNameRule.Check("displayName", it.DisplayName); err != nil {
		return err
	}
	if n := utf8.RuneCountInString(it.Type); n < 1 || n > maxType {
		return fault.Invalid("integrationType", "must be 1 to %d characters", maxType)
	}
	if it.Type != domain.TypeWebhook {
		return fault.NotEnabled("integrationType", "only WEBHOOK integrations are available")
	}
	if _, err := s.policy.CheckURL(it.EndpointURL); err != nil {
		return fault.Invalid("endpointUrl", "%s", err.Error())
	}
	if !slices.Contains(methods, it.HTTPMethod) {
		return fault.Invalid("httpMethod", "must be POST, PUT or PATCH")
	}
	if !slices.Contains(triggers, it.TriggerEvent) {
		return fault.Invalid("triggerEvent", "must be one of %s", strings.Join(triggers, ", "))
	}
	if len(it.FieldMappings) == 0 || len(it.FieldMappings) > maxMappings {
		return fault.Invalid("fieldMappings", "must map 1 to %d profile fields", maxMappings)
	}
	for src, dst := range it.FieldMappings {
		if !render.KnownField(src) {
			return fault.Invalid("fieldMappings", "unknown profile field %q; known: %s", src, strings.Join(render.Fields(), ", "))
		}
		if n := utf8.RuneCountInString(dst); n < 1 || n > maxTargetName || strings.ContainsFunc(dst, unicode.IsControl) {
			return fault.Invalid("fieldMappings", "target names must be 1 to %d characters", maxTargetName)
		}
	}
	if it.BatchSize < 1 || it.BatchSize > maxBatchSize {
		return fault.Invalid("batchSize", "must be between 1 and %d", maxBatchSize)
	}
	return nil
}

// Get reads an integration of the client.
func (s *Service) Get(ctx context.Context, clientID, id string) (domain.Integration, error) {
	if _, err := uuid.Parse(id); err != nil {
		return domain.Integration{}, fault.ErrNotFound
	}
	return s.st.GetIntegration(ctx, clientID, id)
}

// List reads a page of the client's integrations.
func (s *Service) List(ctx context.Context, clientID string, limit, offset int64) (domain.Page[domain.Integration], error) {
	return s.st.ListIntegrations(ctx, clientID, limit, offset)
}

// Patch is a partial update; nil fields stay as they are.
type Patch struct {
	DisplayName, EndpointURL, HTTPMethod, APIKey, TriggerEvent *string
	Status                                                     *domain.IntegrationStatus
	FieldMappings                                              map[string]string
	BatchSize                                                  *int
	MatchedOnly                                                *bool
}

// Update applies a patch. A new endpointUrl without a new apiKey drops the stored credential:
// it was given for the old target and must never be sent to another one.
func (s *Service) Update(ctx context.Context, clientID, id string, p Patch) (domain.Integration, error) {
	it, err := s.Get(ctx, clientID, id)
	if err != nil {
		return it, err
	}
	if p.EndpointURL != nil && *p.EndpointURL != it.EndpointURL && p.APIKey == nil {
		it.APIKeySealed = nil
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&it.DisplayName, p.DisplayName)
	set(&it.EndpointURL, p.EndpointURL)
	set(&it.HTTPMethod, p.HTTPMethod)
	set(&it.TriggerEvent, p.TriggerEvent)
	if p.Status != nil {
		it.Status = *p.Status
	}
	if len(p.FieldMappings) > 0 {
		it.FieldMappings = p.FieldMappings
	}
	if p.BatchSize != nil {
		it.BatchSize = *p.BatchSize
	}
	if p.MatchedOnly != nil {
		it.MatchedOnly = *p.MatchedOnly
	}
	if it.Status != domain.IntegrationActive && it.Status != domain.IntegrationPaused {
		return it, fault.Invalid("status", "must be ACTIVE or PAUSED")
	}
	if err := s.validate(it); err != nil {
		return it, err
	}
	if p.APIKey != nil {
		if err := s.sealAPIKey(&it, *p.APIKey); err != nil {
			return it, err
		}
	}
	return s.st.UpdateIntegration(ctx, it)
}

// Delete removes an integration, its queue and its history.
func (s *Service) Delete(ctx context.Context, clientID, id string) error {
	if _, err := uuid.Parse(id); err != nil {
		return fault.ErrNotFound
	}
	return s.st.DeleteIntegration(ctx, clientID, id)
}

// Sync queues every profile of the integration (matched ones for matchedOnly) for delivery now:
// the batches and their jobs in one transaction.
func (s *Service) Sync(ctx context.Context, clientID, id string) (int64, error) {
	it, err := s.Get(ctx, clientID, id)
	if err != nil {
		return 0, err
	}
	var n int64
	err = s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		n, err = st.EnqueueAll(ctx, it, domain.TriggerManual, nil)
		return err
	})
	return n, err
}

// History reads a page of an integration's sync events.
func (s *Service) History(ctx context.Context, clientID, id string, status *domain.SyncStatus, limit, offset int64) (domain.Page[domain.SyncEvent], error) {
	if _, err := s.Get(ctx, clientID, id); err != nil {
		return domain.Page[domain.SyncEvent]{}, err
	}
	if status != nil && *status != domain.SyncSucceeded && *status != domain.SyncFailed && *status != domain.SyncRetrying {
		return domain.Page[domain.SyncEvent]{}, fault.Invalid("status", "must be SUCCEEDED, FAILED or RETRYING")
	}
	return s.st.ListSyncEvents(ctx, clientID, id, status, limit, offset)
}
