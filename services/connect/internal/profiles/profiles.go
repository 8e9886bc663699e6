// Package profiles holds the rules of customer identity profiles: one per number per client,
// the number sealed at rest with its keyed hash beside it and shown masked; erasure; matching
// with the client's verified numbers; enrichment, recorded, charged once and settled like a
// verification.
package profiles

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/nyaruka/phonenumbers"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/freetext"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// Store is what profiles needs of the service's storage. A profile or record of another
// client is fault.ErrNotFound. The methods marked "in a transaction" run only inside Tx.InTx.
type Store interface {
	// InsertProfile stores a new profile, matched at once when the client verified its number
	// before; domain.ErrProfileExists when the client has the number already. In a
	// transaction.
	InsertProfile(ctx context.Context, p domain.Profile) (domain.Profile, error)
	GetProfile(ctx context.Context, clientID, id string) (domain.Profile, error)
	ListProfiles(ctx context.Context, clientID string, f domain.ProfileFilter, limit, offset int64) (domain.Page[domain.Profile], error)
	// DeleteProfile erases a profile and records the erasure; it returns when.
	DeleteProfile(ctx context.Context, clientID, id string) (time.Time, error)
	// ForgetAnswers deletes the client's stored idempotent answers tagged with subject.
	ForgetAnswers(ctx context.Context, clientID, subject string) error
	// RecordVerified keeps the verified numbers and returns the profiles newly matched by them.
	// In a transaction.
	RecordVerified(ctx context.Context, items []domain.VerifiedNumber) ([]domain.MatchedProfile, error)
	// LastVerified is when the client last verified the number of hash (nil: never).
	LastVerified(ctx context.Context, clientID string, hash []byte) (*time.Time, error)
	// EnqueueForTrigger queues the profiles for the client's ACTIVE integrations of trigger.
	EnqueueForTrigger(ctx context.Context, clientID, trigger string, profileIDs []string) (int64, error)
	OverviewCounts(ctx context.Context, clientID string) (domain.Overview, error)

	EnrichmentStore
}

// Tx runs a function with the store inside one transaction.
type Tx interface {
	InTx(ctx context.Context, fn func(ctx context.Context, st Store) error) error
}

// Requests is what profiles needs of the idempotent request being handled
// (platform/idempotency keeps the keys and answers). The answers of requests about a profile
// are tagged with Subject(id) (the server does it), and forgotten when the profile is erased.
type Requests interface {
	// Key identifies the request's Idempotency-Key with the credential that sent it; false
	// when the request has none.
	Key(ctx context.Context) (string, bool)
	// Retention is how long an answered request is remembered.
	Retention() time.Duration
}

// Subject is what the stored answers holding a profile's data are tagged with.
func Subject(profileID string) string { return "profile:" + profileID }

// numberTable is the table whose rows a profile's sealed number is bound to.
const numberTable = "profiles"

// SealNumber seals an E.164 number for the profile row profileID.
func SealNumber(v *phone.Vault, e164, profileID string) []byte {
	return v.Seal(e164, numberTable, profileID)
}

// OpenNumber opens a profile's number.
func OpenNumber(v *phone.Vault, p domain.Profile) (string, error) {
	return v.Open(p.NumberSealed, numberTable, p.ID)
}

// Service manages profiles.
type Service struct {
	st       Store
	tx       Tx
	vault    *phone.Vault
	ledger   money.Ledger
	requests Requests
	now      func() time.Time
}

// New returns a Service.
func New(st Store, tx Tx, vault *phone.Vault, ledger money.Ledger, requests Requests) *Service {
	return &Service{st: st, tx: tx, vault: vault, ledger: ledger, requests: requests, now: time.Now}
}

// Fields are the optional fields of a profile, validated.
type Fields struct {
	ExternalID, FirstName, LastName, Email *string
	Attributes                             map[string]string
}

// CreateRequest is a new profile from the API.
type CreateRequest struct {
	MobileNumber string
	Fields
}

// Create stores a profile from the API and queues it for PROFILE_CREATED integrations.
func (s *Service) Create(ctx context.Context, p principal.Principal, r CreateRequest) (domain.Profile, error) {
	num, err := phone.Parse(r.MobileNumber)
	if err != nil {
		return domain.Profile{}, fault.Invalid("mobileNumber", "must be a valid mobile number in E.164 form, like +971501234567")
	}
	if err := ValidateFields(r.Fields); err != nil {
		return domain.Profile{}, err
	}
	prof := domain.Profile{
		ID: uuid.NewString(), ClientID: p.ClientID, NumberHash: s.vault.Hash(num.E164), NumberMasked: num.Masked(),
		CountryCode: Region(num), ExternalID: r.ExternalID, FirstName: r.FirstName, LastName: r.LastName, Email: r.Email,
		Attributes: r.Attributes, Source: domain.SourceAPI,
	}
	prof.NumberSealed = SealNumber(s.vault, num.E164, prof.ID)
	var out domain.Profile
	err = s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		var err error
		if out, err = st.InsertProfile(ctx, prof); err != nil {
			return err
		}
		_, err = st.EnqueueForTrigger(ctx, p.ClientID, domain.TriggerProfileCreated, []string{out.ID})
		return err
	})
	return out, err
}

// Region is the country a profile of n is filed under: its ISO region, or "ZZ" for numbers
// of no country (+800 and the like).
func Region(n phone.Number) string {
	if n.Region == "" || n.Region == "001" {
		return "ZZ"
	}
	return n.Region
}

// maxAttrs is the most attributes a profile may have (the other limits are domain's, shared
// with imports).
const maxAttrs = 50

// ValidateFields checks the optional fields of a profile.
func ValidateFields(f Fields) error {
	for _, c := range []struct {
		field string
		v     *string
		max   int
	}{{"externalId", f.ExternalID, domain.MaxExternalID}, {"firstName", f.FirstName, domain.MaxName}, {"lastName", f.LastName, domain.MaxName}} {
		if c.v != nil {
			if err := (freetext.Rule{Max: c.max}).Check(c.field, *c.v); err != nil {
				return err
			}
		}
	}
	if f.Email != nil {
		if domain.EmailProblem(*f.Email) != "" {
			return fault.Invalid("email", "must be an e-mail address like name@example.com")
		}
	}
	if len(f.Attributes) > maxAttrs {
		return fault.Invalid("attributes", "at most %d attributes", maxAttrs)
	}
	for k, v := range f.Attributes {
		if err := (freetext.Rule{Max: domain.MaxAttrKey}).Check("attributes", k); err != nil {
			return err
		}
		if utf8.RuneCountInString(v) > domain.MaxAttrValue || strings.ContainsFunc(v, unicode.IsControl) {
			return fault.Invalid("attributes", "values must be at most %d characters, without control characters", domain.MaxAttrValue)
		}
	}
	return nil
}

// Get reads a profile of the client.
func (s *Service) Get(ctx context.Context, clientID, id string) (domain.Profile, error) {
	if _, err := uuid.Parse(id); err != nil {
		return domain.Profile{}, fault.ErrNotFound
	}
	return s.st.GetProfile(ctx, clientID, id)
}

// List reads a page of the client's profiles.
func (s *Service) List(ctx context.Context, clientID string, f domain.ProfileFilter, limit, offset int64) (domain.Page[domain.Profile], error) {
	if f.Source != nil && *f.Source != domain.SourceImport && *f.Source != domain.SourceAPI && *f.Source != domain.SourceVerification {
		return domain.Page[domain.Profile]{}, fault.Invalid("source", "must be IMPORT, API or VERIFICATION")
	}
	if f.Search != nil && utf8.RuneCountInString(*f.Search) > 128 {
		return domain.Page[domain.Profile]{}, fault.Invalid("search", "must be at most 128 characters")
	}
	return s.st.ListProfiles(ctx, clientID, f, limit, offset)
}

// Delete erases a profile of the client, and with it the stored idempotent answers that hold
// its data: a replay of the request that created it must not bring the data back. The key of
// such a request is free again, so its replay creates a new profile.
func (s *Service) Delete(ctx context.Context, clientID, id string) (time.Time, error) {
	if _, err := uuid.Parse(id); err != nil {
		return time.Time{}, fault.ErrNotFound
	}
	var at time.Time
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		var err error
		if at, err = st.DeleteProfile(ctx, clientID, id); err != nil {
			return err
		}
		return st.ForgetAnswers(ctx, clientID, Subject(id))
	})
	return at, err
}

// enrichment works out what mnv knows of a profile's number, reading the client's
// verifications through st.
func (s *Service) enrichment(ctx context.Context, st Store, prof domain.Profile, number string) (domain.Enrichment, error) {
	e := domain.Enrichment{EnrichedAt: s.now().UTC()}
	num, err := phonenumbers.Parse(number, "")
	if err != nil {
		return e, fmt.Errorf("parse a kept number: %w", err)
	}
	e.Valid = phonenumbers.IsValidNumber(num)
	e.CountryCode = phonenumbers.GetRegionCodeForNumber(num)
	e.LineType = lineType(phonenumbers.GetNumberType(num))
	if c, err := phonenumbers.GetCarrierForNumber(num, "en"); err == nil && c != "" {
		e.Carrier = &c
	}
	if g, err := phonenumbers.GetGeocodingForNumber(num, "en"); err == nil && g != "" {
		e.Region = &g
	}
	if e.LastVerifiedAt, err = st.LastVerified(ctx, prof.ClientID, prof.NumberHash); err != nil {
		return e, err
	}
	return e, nil
}

func lineType(t phonenumbers.PhoneNumberType) string {
	switch t {
	case phonenumbers.MOBILE:
		return "MOBILE"
	case phonenumbers.FIXED_LINE:
		return "FIXED_LINE"
	case phonenumbers.FIXED_LINE_OR_MOBILE:
		return "FIXED_LINE_OR_MOBILE"
	case phonenumbers.TOLL_FREE:
		return "TOLL_FREE"
	case phonenumbers.PREMIUM_RATE:
		return "PREMIUM_RATE"
	case phonenumbers.VOIP:
		return "VOIP"
	case phonenumbers.PAGER:
		return "PAGER"
	}
	return "UNKNOWN"
}

// RecordVerified marks the profiles of relayed VERIFIED numbers matched and queues them for
// PROFILE_MATCHED integrations. Replays of the same facts change nothing.
func (s *Service) RecordVerified(ctx context.Context, items []domain.VerifiedNumber) (int64, error) {
	var n int64
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		matched, err := st.RecordVerified(ctx, items)
		if err != nil {
			return err
		}
		n = int64(len(matched))
		byClient := map[string][]string{}
		for _, m := range matched {
			byClient[m.ClientID] = append(byClient[m.ClientID], m.ProfileID)
		}
		for client, ids := range byClient {
			if _, err := st.EnqueueForTrigger(ctx, client, domain.TriggerProfileMatched, ids); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

// Overview reads the client's indicators.
func (s *Service) Overview(ctx context.Context, clientID string) (domain.Overview, error) {
	o, err := s.st.OverviewCounts(ctx, clientID)
	if err != nil {
		return o, err
	}
	if o.Balance, err = s.ledger.Balance(ctx, clientID); err != nil {
		return o, fmt.Errorf("%w: %w", fault.ErrUnavailable, err)
	}
	return o, nil
}

// Warm loads the phone-number library's carrier and geocoding data, whose first lookups take
// tens of milliseconds, so that the first enrichment does not.
func Warm() {
	if n, err := phonenumbers.Parse("+447400123456", ""); err == nil {
		_, _ = phonenumbers.GetCarrierForNumber(n, "en")
		_, _ = phonenumbers.GetGeocodingForNumber(n, "en")
	}
}
