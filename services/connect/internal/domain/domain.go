// Package domain is the vocabulary of the connect service: its types and the errors of its own
// rules, fault values like every service's (grpcserver.Status answers them).
package domain

import (
	"errors"
	"fmt"
	"net/mail"
	"time"
	"unicode/utf8"

	"github.com/mnvhq/mnv/services/platform/fault"
)

// Errors of connect's own rules; the shared ones are fault's (ErrNotFound, ErrSuspended,
// ErrUnavailable: the outcome of a charge is not known yet) and money's (a refused charge).
var (
	// ErrProfileExists: the client has a profile with the number already.
	ErrProfileExists = fault.New(fault.Conflict, "the account already has a profile with this number")
	// ErrEnrichmentInFlight: an enrichment request with the same Idempotency-Key has not been
	// answered yet.
	ErrEnrichmentInFlight = fault.New(fault.Conflict, "a request with this Idempotency-Key is still in progress")
	// ErrLeaseLost is a write by an import worker whose job has been claimed by another since:
	// the write is refused (its transaction must roll back) and the worker must let the job go.
	ErrLeaseLost = errors.New("import job lease lost to another worker")
)

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

// Source is how a profile came to be. Like every state below, it is a type of its own and the
// server converts it to the API's enum through one table (internal/server/convert.go), which
// TestEnumTables holds to these constants.
type Source string

// Profile sources.
const (
	SourceImport       Source = "IMPORT"
	SourceAPI          Source = "API"
	SourceVerification Source = "VERIFICATION"
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

// EnrichmentStatus is where an enrichment's charge stands.
type EnrichmentStatus string

// Statuses of an enrichment record.
const (
	EnrichmentPending   EnrichmentStatus = "PENDING"   // recorded; its charge's outcome is not known yet
	EnrichmentSettled   EnrichmentStatus = "SETTLED"   // charged and written onto the profile
	EnrichmentRejected  EnrichmentStatus = "REJECTED"  // accounts refused the debit: nothing charged or written
	EnrichmentCancelled EnrichmentStatus = "CANCELLED" // the profile was erased first: nothing charged, or refunded
)

// EnrichmentRecord is one enrichment of a profile, recorded before it is charged; the debit's
// reference is its Reference.
type EnrichmentRecord struct {
	ID        string
	ClientID  string
	ProfileID string
	Status    EnrichmentStatus
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
	Source       Source
	MatchedAt    *time.Time
	Enrichment   *Enrichment
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// ImportStatus is where an import job stands.
type ImportStatus string

// Import job statuses.
const (
	ImportQueued    ImportStatus = "QUEUED"
	ImportRunning   ImportStatus = "RUNNING"
	ImportCompleted ImportStatus = "COMPLETED"
	ImportFailed    ImportStatus = "FAILED"
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
	Status           ImportStatus
	TotalRows        int64
	ImportedRows     int64
	UpdatedRows      int64
	FailedRows       int64
	Errors           []ImportError
	Failure          *string
	ProcessedRecords int64
	// BytesProcessed is how far into the file the committed batches reach (SizeBytes once
	// COMPLETED); ProgressedAt is when the last of them committed.
	BytesProcessed int64
	ProgressedAt   *time.Time
	CreatedAt      time.Time
	StartedAt      *time.Time
	FinishedAt     *time.Time
	// LeaseToken fences the worker that holds the job; Interruptions counts the claims of it
	// after a worker died mid-run.
	LeaseToken    int64
	Interruptions int
}

// IntegrationStatus is whether an integration pushes.
type IntegrationStatus string

// Integration statuses.
const (
	IntegrationActive IntegrationStatus = "ACTIVE"
	IntegrationPaused IntegrationStatus = "PAUSED"
)

// Integration triggers and types.
const (
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
	Status              IntegrationStatus
	CreatedAt           time.Time
	UpdatedAt           time.Time
}

// SyncStatus is how one push attempt ended.
type SyncStatus string

// Sync statuses.
const (
	SyncSucceeded SyncStatus = "SUCCEEDED"
	SyncFailed    SyncStatus = "FAILED"
	SyncRetrying  SyncStatus = "RETRYING"
)

// SyncEvent is one delivery attempt.
type SyncEvent struct {
	ID            string
	IntegrationID string
	ClientID      string
	DeliveryID    string
	Trigger       string
	Status        SyncStatus
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
	// Status is PENDING until the batch is sent (SUCCEEDED) or given up (FAILED), as a
	// webhook delivery's (DeliveryPending…).
	Status   DeliveryStatus
	Attempts int
}

// Overview is the indicators of the Connect overview (docs/api-decisions.md#overview).
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

// ProfileFilter narrows a list of profiles.
type ProfileFilter struct {
	Matched *bool
	Source  *Source
	Search  *string
}

// VerifiedNumber is a relayed VERIFIED verification.
type VerifiedNumber struct {
	ClientID       string
	NumberHash     []byte
	VerificationID string
	VerifiedAt     time.Time
}

// MatchedProfile is a profile newly matched.
type MatchedProfile struct{ ProfileID, ClientID string }

// StageRow is one valid row of an import, ready for the database.
type StageRow struct {
	ID           [16]byte // a UUID's bytes: COPY encodes them directly, not by parsing text
	NumberSealed []byte
	NumberHash   []byte
	NumberMasked string
	CountryCode  string
	ExternalID   *string
	FirstName    *string
	LastName     *string
	Email        *string
	Attributes   []byte
}

// Progress is what one batch of an import adds to its job.
type Progress struct {
	Records  int64 // records of the file consumed, valid or not (each one a row of total_rows)
	Bytes    int64 // bytes of the file read through the batch's last record, from the file's start
	Failed   int64
	Errors   []ImportError // to append, up to the cap
	MaxKept  int
	Lease    time.Duration
	Token    int64 // the worker's lease token
	Imported int64 // filled by the store's UpsertBatch
	Updated  int64
}
