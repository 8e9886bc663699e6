// Package domain is the vocabulary of the accounts service: its types and the errors of its own
// rules, fault values like every service's (grpcserver.Status answers them). It knows nothing of
// HTTP or SQL.
package domain

import (
	"errors"
	"time"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// Errors of accounts' own rules; the shared ones are fault's (ErrNotFound, ErrSuspended),
// money's (the ledger's refusals) and auth's (ErrUnauthenticated: a wrong client secret).
var (
	// ErrKeyExists: the first key was already generated.
	ErrKeyExists = fault.New(fault.Conflict, "the client already has an active API key; rotate it instead")
	// ErrKeySuperseded: the key was rotated with a grace period and has a replacement; rotating
	// it again would make a second key of the same name and end the first rotation's grace.
	ErrKeySuperseded = fault.New(fault.Conflict, "this API key was already rotated and replaced; it works only until its grace period ends. Rotate the key that replaced it")
	// ErrLastAdminKey: revoking would leave the client without an ADMIN key.
	ErrLastAdminKey = fault.New(fault.Conflict, "the last ADMIN key cannot be revoked")
	// ErrReferenceConflict: a reference was reused for a different operation.
	ErrReferenceConflict = fault.New(fault.Conflict, "reference already used for a different operation")
)

// ErrReferenceTaken is the store's answer when a ledger entry's reference is already in the
// client's ledger: the caller rolls back and decides again knowing the existing entries. It is
// never shown to a caller.
var ErrReferenceTaken = errors.New("ledger reference already used")

// ErrBalanceChanged is the store's answer when a debit batch decided against what the ledger
// saw of its clients (SeenBalance) finds a client's rows changed since: nothing was written, and
// the caller decides the batch again under the balance locks. It is never shown to a caller.
var ErrBalanceChanged = errors.New("a debit batch's clients changed since they were seen")

// Features a client may have.
const (
	FeatureVerify    = "VERIFY"
	FeatureConnect   = "CONNECT"
	FeatureStuckPlus = "STUCK_PLUS"
	FeatureSandbox   = "SANDBOX"
	// FeatureNumberShare is CAMARA's phoneNumberShare: the line's number told to the client.
	FeatureNumberShare = "NUMBER_SHARE"
)

// Contact is the client's contact person: personal data, sealed at rest.
type Contact struct {
	Name  string `json:"name"`
	Email string `json:"email"`
	Phone string `json:"phone"`
}

// Client is an account with its balance.
type Client struct {
	ID               string
	Name             string
	Contact          Contact
	Status           principal.Status
	Features         []string
	Balance          int64
	BalanceExpiresAt *time.Time
	// LowBalanceThreshold is the client's own threshold of balance.low; nil takes the
	// service's default.
	LowBalanceThreshold *int64
	// Operators the client may use, with their methods.
	Operators principal.Operators
	CreatedAt time.Time
}

// BalanceValid reports whether the client can spend: ACTIVE, above zero and not expired.
func (c Client) BalanceValid(now time.Time) bool {
	return c.Status == principal.StatusActive && c.Balance > 0 && !Expired(c.BalanceExpiresAt, now)
}

// DaysUntilExpiry is the whole days left before the balance expires: 0 once expired, nil when
// the balance never expires.
func (c Client) DaysUntilExpiry(now time.Time) *int32 {
	if c.BalanceExpiresAt == nil {
		return nil
	}
	d := int32(0)
	if left := c.BalanceExpiresAt.Sub(now); left > 0 {
		d = int32(left / (24 * time.Hour))
	}
	return &d
}

// Expired reports whether an optional expiry has passed.
func Expired(expiresAt *time.Time, now time.Time) bool {
	return expiresAt != nil && !now.Before(*expiresAt)
}

// APIKey describes an API key (never the key itself).
type APIKey struct {
	ID         string
	ClientID   string
	Name       string
	Role       principal.Role
	Hint       string
	CreatedAt  time.Time
	LastUsedAt *time.Time
	ExpiresAt  *time.Time
	// Superseded: a rotation replaced the key, which lives on only for its grace period.
	Superseded bool
}

// SDKToken describes an SDK token (never the token itself).
type SDKToken struct {
	ID        string
	ClientID  string
	Label     string
	Hint      string
	CreatedAt time.Time
	ExpiresAt *time.Time
}

// WebOrigin is a page origin (scheme://host[:port]) allowed to capture a client's browser flows.
type WebOrigin struct {
	Origin    string
	CreatedAt time.Time
}

// RedirectURI is a URI a client registered for the authorization code flow of mnv's OpenID
// provider (the CAMARA facade): a code is sent only to one of them, matched exactly.
type RedirectURI struct {
	URI       string
	CreatedAt time.Time
}

// LedgerEntry is one balance change.
type LedgerEntry struct {
	ID           string
	ClientID     string
	Kind         money.Kind
	Amount       int64
	BalanceAfter int64
	Reference    string
	Variant      string
	Description  *string
	CreatedAt    time.Time
}

// Price of one operation of a kind (and variant) for a client.
type Price struct {
	Kind       money.Kind
	Variant    string
	Amount     int64
	Overridden bool
}

// ClientRow is a client as stored, contact still sealed.
type ClientRow struct {
	ID                  string
	Name                string
	ContactSealed       []byte
	Status              principal.Status
	Features            []string
	SecretFP            []byte
	Balance             int64
	BalanceExpiresAt    *time.Time
	LowBalanceThreshold *int64
	Operators           principal.Operators
	CreatedAt           time.Time
}

// KeyAuth is what authenticating an API key needs, in one indexed lookup.
type KeyAuth struct {
	Key       APIKey
	Status    principal.Status
	Features  []string
	Operators principal.Operators
	// ValidFor is how long the key still works by the database clock, when it expires.
	ValidFor *time.Duration
}

// SDKTokenAuth is what authenticating an SDK token needs.
type SDKTokenAuth struct {
	TokenID   string
	ClientID  string
	Status    principal.Status
	Features  []string
	Operators principal.Operators
	// ValidFor is how long the token still works by the database clock, when it expires.
	ValidFor *time.Duration
}

// BalanceState is a client's balance as locked for a change.
type BalanceState struct {
	Balance   int64
	ExpiresAt *time.Time
	Status    principal.Status
	// LowThreshold is the client's own threshold of balance.low; nil takes the default.
	LowThreshold *int64
	// Now is the database's transaction time, the clock every expiry is judged by.
	Now time.Time
}

// ExpiryDue is a balance whose expiry is near or past and not yet notified for, locked for
// the notification: what the expiry job needs to decide which event to send.
type ExpiryDue struct {
	ClientID            string
	Balance             int64
	ExpiresAt           time.Time
	ExpiringNotifiedFor *time.Time
	ExpiredNotifiedFor  *time.Time
	// Now is the database's transaction time.
	Now time.Time
}

// ExpiryNotified records the expiry an event was sent for.
type ExpiryNotified struct {
	ClientID string
	// Expiring and Expired are the expiry the events were sent for; nil leaves the record.
	Expiring, Expired *time.Time
}

// DebitSnapshot is everything a batch of debits needs to decide, read in one round trip under
// the balance locks of its clients: their balances, their price overrides and, when asked for,
// the ledger rows of references already used (by LedgerKey).
type DebitSnapshot struct {
	Balances  map[string]BalanceState
	Overrides map[string][]Price
	Existing  map[string]LedgerEntry
}

// SeenBalance is what a debit batch decided without the balance locks (billing's optimistic
// path) took one client's rows to hold: the store writes the batch only if each still does,
// judged under the lock its write takes. These are every input of the batch's decisions that
// the database holds; the rest (the batch itself, the configured prices and default threshold)
// the deciding process holds.
type SeenBalance struct {
	ClientID string
	// Balance is the balance the batch's entries start from.
	Balance int64
	// Status is the client's status (the batch charges, so ACTIVE).
	Status principal.Status
	// LowThreshold is the client's own threshold of balance.low the batch was judged by.
	LowThreshold *int64
	// Overrides are the client's price overrides the batch was priced by.
	Overrides []Price
	// Unexpired asks that the balance has not expired by the database's clock when the batch
	// is written: the batch takes a price above zero from it. Its expiry itself may have moved.
	Unexpired bool
}

// LedgerKey is a reference's key in a client's ledger: the client id (canonical, lower-case)
// and the reference, as the ledger's generated ref_key column computes it. It keys
// DebitSnapshot.Existing and the store's answers by reference.
func LedgerKey(clientID, reference string) string { return clientID + "/" + reference }
