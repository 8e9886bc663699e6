// Package clients manages the accounts themselves: creation with their first credentials and
// balance, details, status and features. The contact person's details are personal data and
// are sealed at rest.
package clients

import (
	"context"
	"encoding/json"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/accounts/internal/credentials"
	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/freetext"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// Service manages clients.
type Service struct {
	st      Store
	tx      Tx
	keyring *crypto.Keyring
	creds   *credentials.Service
	ledger  *billing.Ledger
}

// New returns a Service over st (outside any transaction) and tx.
func New(st Store, tx Tx, keyring *crypto.Keyring, creds *credentials.Service, ledger *billing.Ledger) *Service {
	return &Service{st: st, tx: tx, keyring: keyring, creds: creds, ledger: ledger}
}

// CreateRequest describes a new client.
type CreateRequest struct {
	Name             string
	Contact          domain.Contact
	InitialBalance   int64
	BalanceExpiresAt *time.Time
	Features         []string
	WithoutAPIKey    bool
}

// Created is a new client with its credentials, shown once.
type Created struct {
	Client       domain.Client
	ClientSecret string
	APIKey       string
}

// Create creates a client, its secret, its balance (with the initial credit as a TOP_UP) and,
// unless asked not to, its first ADMIN key, all in one transaction.
func (s *Service) Create(ctx context.Context, r CreateRequest) (Created, error) {
	if err := validateCreate(&r, time.Now()); err != nil {
		return Created{}, err
	}
	id := uuid.NewString()
	sealed, err := s.sealContact(id, r.Contact)
	if err != nil {
		return Created{}, err
	}
	secret, secretFP := s.creds.NewClientSecret()
	var out Created
	err = s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		if err := st.InsertClient(ctx, domain.ClientRow{
			ID: id, Name: r.Name, ContactSealed: sealed, Status: principal.StatusActive, Features: r.Features,
			Operators: principal.DefaultOperators(), SecretFP: secretFP, BalanceExpiresAt: r.BalanceExpiresAt,
		}); err != nil {
			return err
		}
		if r.InitialBalance > 0 {
			if _, err := s.ledger.TopUp(ctx, st, billing.TopUpRequest{
				ClientID: id, Amount: r.InitialBalance, Reference: "initial-balance",
			}); err != nil {
				return err
			}
		}
		if !r.WithoutAPIKey {
			k, err := s.creds.IssueKey(ctx, st, id, "default", principal.RoleAdmin)
			if err != nil {
				return err
			}
			out.APIKey = k.Secret
		}
		return nil
	})
	if err != nil {
		return Created{}, fmt.Errorf("create client: %w", err)
	}
	out.ClientSecret = secret
	if out.Client, err = s.Get(ctx, id); err != nil {
		return Created{}, err
	}
	return out, nil
}

// Get reads a client with its balance.
func (s *Service) Get(ctx context.Context, id string) (domain.Client, error) {
	if _, err := uuid.Parse(id); err != nil {
		return domain.Client{}, fault.ErrNotFound
	}
	row, err := s.st.GetClient(ctx, id, false)
	if err != nil {
		return domain.Client{}, err
	}
	return s.fromRow(row)
}

// List reads a page of clients.
func (s *Service) List(ctx context.Context, limit, offset int64) ([]domain.Client, int64, error) {
	rows, total, err := s.st.ListClients(ctx, limit, offset)
	if err != nil {
		return nil, 0, err
	}
	out := make([]domain.Client, 0, len(rows))
	for _, r := range rows {
		c, err := s.fromRow(r)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, c)
	}
	return out, total, nil
}

// SetStatus activates or suspends a client.
func (s *Service) SetStatus(ctx context.Context, id string, st principal.Status) (domain.Client, error) {
	if st != principal.StatusActive && st != principal.StatusSuspended {
		return domain.Client{}, fault.Invalid("status", "must be ACTIVE or SUSPENDED")
	}
	if _, err := uuid.Parse(id); err != nil {
		return domain.Client{}, fault.ErrNotFound
	}
	if err := s.st.SetClientStatus(ctx, id, st); err != nil {
		return domain.Client{}, err
	}
	return s.Get(ctx, id)
}

// SetFeatures replaces the features enabled for a client.
func (s *Service) SetFeatures(ctx context.Context, id string, features []string) (domain.Client, error) {
	f, err := normaliseFeatures(features)
	if err != nil {
		return domain.Client{}, err
	}
	if _, err := uuid.Parse(id); err != nil {
		return domain.Client{}, fault.ErrNotFound
	}
	if err := s.st.SetClientFeatures(ctx, id, f); err != nil {
		return domain.Client{}, err
	}
	return s.Get(ctx, id)
}

// SetLowBalanceThreshold sets the balance below which a debit sends balance.low (0: never);
// nil takes the service's default again. A balance already below a new threshold sends
// nothing: the event reports a debit's crossing, not a state.
func (s *Service) SetLowBalanceThreshold(ctx context.Context, id string, threshold *int64) (domain.Client, error) {
	if threshold != nil && (*threshold < 0 || *threshold > billing.MaxAmount) {
		return domain.Client{}, fault.Invalid("threshold", "must be between 0 and %d", int64(billing.MaxAmount))
	}
	if _, err := uuid.Parse(id); err != nil {
		return domain.Client{}, fault.ErrNotFound
	}
	if err := s.st.SetLowBalanceThreshold(ctx, id, threshold); err != nil {
		return domain.Client{}, err
	}
	return s.Get(ctx, id)
}

func (s *Service) sealContact(clientID string, c domain.Contact) ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("seal contact: %w", err)
	}
	return s.keyring.Seal(b, []byte("accounts.clients.contact:"+clientID)), nil
}

func (s *Service) fromRow(r domain.ClientRow) (domain.Client, error) {
	plain, err := s.keyring.Open(r.ContactSealed, []byte("accounts.clients.contact:"+r.ID))
	if err != nil {
		return domain.Client{}, fmt.Errorf("open contact of client %s: %w", r.ID, err)
	}
	var contact domain.Contact
	if err := json.Unmarshal(plain, &contact); err != nil {
		return domain.Client{}, fmt.Errorf("decode contact of client %s: %w", r.ID, err)
	}
	return domain.Client{
		ID: r.ID, Name: r.Name, Contact: contact, Status: r.Status, Features: r.Features,
		Balance: r.Balance, BalanceExpiresAt: r.BalanceExpiresAt, LowBalanceThreshold: r.LowBalanceThreshold, Operators: r.Operators, CreatedAt: r.CreatedAt,
	}, nil
}

var allFeatures = []string{domain.FeatureVerify, domain.FeatureConnect, domain.FeatureStuckPlus, domain.FeatureSandbox, domain.FeatureNumberShare}

func normaliseFeatures(in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	for _, f := range in {
		if !slices.Contains(allFeatures, f) {
			return nil, fault.Invalid("features", "unknown feature %q; known: %s", f, strings.Join(allFeatures, ", "))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out, nil
}

// nameRule bounds the client's name and its contact person's.
var nameRule = freetext.Rule{Max: 200}

func validateCreate(r *CreateRequest, now time.Time) error {
	r.Name = strings.TrimSpace(r.Name)
	r.Contact.Name = strings.TrimSpace(r.Contact.Name)
	r.Contact.Email = strings.TrimSpace(r.Contact.Email)
	r.Contact.Phone = strings.TrimSpace(r.Contact.Phone)
	if err := nameRule.Check("clientName", r.Name); err != nil {
		return err
	}
	if err := nameRule.Check("contactPersonName", r.Contact.Name); err != nil {
		return err
	}
	if a, err := mail.ParseAddress(r.Contact.Email); err != nil || a.Address != r.Contact.Email || len(r.Contact.Email) > 254 {
		return fault.Invalid("contactPersonEmail", "must be an e-mail address like name@example.com")
	}
	if n := len(r.Contact.Phone); n < 4 || n > 20 || strings.ContainsFunc(r.Contact.Phone, func(c rune) bool { return c < '0' || c > '9' }) {
		return fault.Invalid("contactPhoneNumber", "must be 4 to 20 digits")
	}
	if r.InitialBalance < 0 || r.InitialBalance > billing.MaxAmount {
		return fault.Invalid("initialBalance", "must be between 0 and %d", int64(billing.MaxAmount))
	}
	if r.BalanceExpiresAt != nil && !r.BalanceExpiresAt.After(now) {
		return fault.Invalid("balanceExpiresAt", "must be in the future")
	}
	f, err := normaliseFeatures(r.Features)
	if err != nil {
		return err
	}
	r.Features = f
	return nil
}
