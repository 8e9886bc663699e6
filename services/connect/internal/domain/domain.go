// Package domain is the vocabulary of the connect service: its types and the errors its rules
// return. The server maps the errors to gRPC status codes in one place.
package domain

import (
	"errors"
	"fmt"
	"net/mail"
	"time"
	"unicode/utf8"

	"github.com/mnvhq/mnv/services/platform/accountsclient"
)

// Errors of the rules; compared with errors.Is.
var (
	ErrNotFound            = errors.New("not found")
	ErrConflict            = errors.New("conflict")
	ErrInsufficientBalance = errors.New("the balance is too low for this operation")
	ErrBalanceExpired      = errors.New("the balance has expired")
	ErrSuspended           = errors.New("the account is suspended")
	ErrUnavailable         = errors.New("a backend service is unavailable")
)

// InvalidError is a request field with a bad value (400 INVALID_ARGUMENT).
type InvalidError struct{ Field, Msg string }

func (e *InvalidError) Error() string { return e.Field + ": " + e.Msg }

// Invalid returns an *InvalidError.
func Invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Limits of a profile's optional fields, in characters (Unicode code points), the same whether
// the profile comes from the API or from an import.
const (
	MaxExternalID = 128
	MaxName       = 100 // firstName, lastName
	MaxEmail      = 254
	MaxAttrKey    = 100 // in an import, a column's name
	MaxAttrValue  = 1000
)

// EmailProblem says what is wrong with v as a profile's e-mail address, or returns "" when it
// is a plain address (name@example.com: no display name, no angle brackets) of at most
// MaxEmail characters.
func EmailProblem(v string) string {
	if len(v) > MaxEmail && utf8.RuneCountInString(v) > MaxEmail {
		return fmt.Sprintf("longer than %d characters", MaxEmail)
	}
	if a, err := mail.ParseAddress(v); err != nil || a.Name != "" || a.Address != v {
		return "not a plain e-mail address (like name@example.com)"
	}
	return ""
}

// NotEnabledError is a product or kind the client may not use (400 FEATURE_NOT_ENABLED).
type NotEnabledError struct{ Field, Msg string }

func (e *NotEnabledError) Error() string { return e.Field + ": " + e.Msg }

// NotEnabled returns a *NotEnabledError.
func NotEnabled(field, format string, args ...any) error {
	return &NotEnabledError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ChargeError turns the error of a debit into the domain's (see verification's twin).
func ChargeError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, accountsclient.ErrInsufficientBalance):
		return ErrInsufficientBalance
	case errors.Is(err, accountsclient.ErrBalanceExpired):
		return ErrBalanceExpired
	case errors.Is(err, accountsclient.ErrSuspended):
		return ErrSuspended
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// Profile sources.
const (
	SourceImport       = "IMPORT"
	SourceAPI          = "API"
	SourceVerification = "VERIFICATION"
)

// Enrichment is what mnv knows of a profile's number.
type Enrichment struct {
	Carrier        *string    `json:"carrier"`
	LineType       string     `json:"lineType"`
	Region         *string    `json:"region"`
	CountryCode    string     `json:"countryCode"`
	Valid          bool       `json:"valid"`
	LastVerifiedAt *time.Time `json:"lastVerifiedAt"`
	EnrichedAt     time.Time  `json:"enrichedAt"`
}

// Statuses of an enrichment record.
const (
	EnrichmentPending   = "PENDING"   // recorded; its charge's outcome is not known yet
	EnrichmentSettled   = "SETTLED"   // charged and written onto the profile
	EnrichmentRejected  = "REJECTED"  // accounts refused the debit: nothing charged or written
	EnrichmentCancelled = "CANCELLED" // the profile was erased first: nothing charged, or refunded
)

// EnrichmentRecord is one enrichment of a profile, recorded before it is charged; the debit's
// reference is its Reference.
type EnrichmentRecord struct {
	ID        string
	ClientID  string
	ProfileID string
	Status    string
	Charged   int64
	CreatedAt time.Time
}

// Reference is the debit reference of the record's charge.
func (r EnrichmentRecord) Reference() string { return "enrichment:" + r.ID }

// Profile is a customer identity profile; the number is sealed, shown masked.
type Profile struct {
	ID           string
	ClientID     string
	NumberSealed []byte
	NumberHash   []byte
	NumberMasked string
	CountryCode  string
	ExternalID   *string
	FirstName    *string
	LastName     *string
	Email        *string
	Attributes   map[string]string
	Source       string
	MatchedAt    *time.Time
	Enrichment   *Enrichment
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Import job statuses.
const (
	ImportQueued    = "QUEUED"
	ImportRunning   = "RUNNING"
	ImportCompleted = "COMPLETED"
	ImportFailed    = "FAILED"
)

// ImportError is a bad row of an import.
type ImportError struct {
	Row     int    `json:"row"`
	Column  string `json:"column"`
	Message string `json:"message"`
}

// ImportJob is an uploaded file being imported.
type ImportJob struct {
	ID               string
	ClientID         string
	FileName         string
	SizeBytes        int64
	Status           string
	TotalRows        int64
	ImportedRows     int64
	UpdatedRows      int64
	FailedRows       int64
	Errors           []ImportError
	Failure          *string
	ProcessedRecords int64
	CreatedAt        time.Time
	StartedAt        *time.Time
	FinishedAt       *time.Time
	// LeaseToken fences the worker that holds the job; Interruptions counts the claims of it
	// after a worker died mid-run.
	LeaseToken    int64
	Interruptions int
}

// Integration statuses, triggers and types.
const (
	IntegrationActive = "ACTIVE"
	IntegrationPaused = "PAUSED"

	TriggerProfileCreated  = "PROFILE_CREATED"
	TriggerProfileMatched  = "PROFILE_MATCHED"
	TriggerProfileEnriched = "PROFILE_ENRICHED"
	TriggerImportCompleted = "IMPORT_COMPLETED"
	TriggerManual          = "MANUAL"

	TypeWebhook = "WEBHOOK"
)

// Integration pushes mapped profile records to a CRM endpoint.
type Integration struct {
	ID                  string
	ClientID            string
	DisplayName         string
	Type                string
	EndpointURL         string
	HTTPMethod          string
	APIKeySealed        []byte
	SigningSecretSealed []byte
	TriggerEvent        string
	FieldMappings       map[string]string
	BatchSize           int
	MatchedOnly         bool
	Status              string
	CreatedAt           time.Time
	UpdatedAt           time.Time
}

// Sync statuses.
const (
	SyncSucceeded = "SUCCEEDED"
	SyncFailed    = "FAILED"
	SyncRetrying  = "RETRYING"
)

// SyncEvent is one delivery attempt.
type SyncEvent struct {
	ID            string
	IntegrationID string
	ClientID      string
	DeliveryID    string
	Trigger       string
	Status        string
	RecordCount   int
	HTTPStatus    *int
	Error         *string
	Attempt       int
	Duration      time.Duration
	StartedAt     time.Time
	FinishedAt    time.Time
}

// Delivery is one queued batch.
type Delivery struct {
	ID            string
	IntegrationID string
	ClientID      string
	Trigger       string
	ProfileIDs    []string
	Attempts      int
}

// Overview is the indicators of spec 4.15.
type Overview struct {
	Profiles, Matched, Enriched int64
	Integrations, Active        int64
	Imports, RunningImports     int64
	LastImportCompletedAt       *time.Time
	SyncsSucceeded, SyncsFailed int64
	Balance                     int64
}

// Page is a page of a list.
type Page[T any] struct {
	Items []T
	Total int64
}
