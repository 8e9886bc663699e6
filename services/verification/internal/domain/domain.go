// Package domain is the vocabulary of the verification service: its types and the errors of its
// own rules, fault values like every service's (grpcserver.Status answers them).
package domain

import (
	"time"

	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/freetext"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// Errors of verification's own rules; the shared ones are fault's (ErrNotFound, ErrSuspended,
// ErrUnavailable: the outcome of a charge is not known yet) and money's (a refused charge).
var (
	// ErrNumberNotKept: a stuck-plus session whose number was dropped after its retention; the
	// session and its reveal audit remain, the number cannot be revealed any more.
	ErrNumberNotKept = fault.New(fault.NotFound, "the number of this stuck-plus session is no longer kept: its retention period has passed")
	// ErrAlreadyUsed: a sealed blob or a transaction was used already.
	ErrAlreadyUsed = fault.New(fault.AlreadyUsed, "this sealed session or transaction was already used")
	// ErrOriginNotAllowed: a browser capture from a page whose origin the transaction's client
	// did not allow (or with no origin at all).
	ErrOriginNotAllowed = fault.New(fault.PermissionDenied, "this page's origin is not allowed to capture the account's transactions")
	// ErrNotAdmin: a reveal by a key without the ADMIN role. The RPC's rule refuses it first,
	// with the same words; the rule of the domain does not depend on that.
	ErrNotAdmin = fault.New(fault.PermissionDenied, "this operation needs an API key with the ADMIN role")
)

// UsedBy is the ALREADY_USED error of a blob the client already verified: it names that verification,
// so a client whose first call ended without an answer (a timeout, a 503 settled later by the
// reconciler) can read what it was charged for.
func UsedBy(verificationID string) error {
	return fault.New(fault.AlreadyUsed, "this sealed session was already verified, by verification "+verificationID)
}

// ShortText bounds the client's own references (a browser flow's metadataId) and the SDK's
// device fields.
var ShortText = freetext.Rule{Max: 128}

// Status is where a session, a browser transaction or a verification stands. One type serves
// the three because they share values (a transaction is CAPTURED as its session is); the API
// gives each its own enum, and the server converts each through one table
// (internal/server/convert.go), which a test holds to these constants.
type Status string

// Capture statuses (a session's, and a transaction's once captured).
const (
	Captured          Status = "CAPTURED"
	NoNetworkIdentity Status = "NO_NETWORK_IDENTITY"
	// AuthorizationPending: a NETWORK_API session waiting for the operator's authorization.
	AuthorizationPending Status = "AUTHORIZATION_PENDING"
)

// Verification statuses and outcomes (docs/api-decisions.md#verification).
const (
	StatusVerified     Status = "VERIFIED"
	StatusNotVerified  Status = "NOT_VERIFIED"
	StatusUndetermined Status = "UNDETERMINED"
	StatusExpired      Status = "EXPIRED"
	// StatusPending and StatusRejected are internal: recorded before the charge settles, and
	// after it was refused.
	StatusPending  Status = "PENDING"
	StatusRejected Status = "REJECTED"
)

// Reasons: the finer cause of an outcome.
const (
	ReasonMatch             = "NUMBER_MATCH"
	ReasonMismatch          = "NUMBER_MISMATCH"
	ReasonNoNetworkIdentity = "NO_NETWORK_IDENTITY"
	ReasonSessionExpired    = "SESSION_EXPIRED"
	// NETWORK_API: the operator's token was expired or used up (its 401).
	ReasonTokenExpired = "TOKEN_EXPIRED"
	// NETWORK_API: the operator says the device did not authenticate over its mobile network.
	ReasonNotAuthenticatedByMobileNetwork = "USER_NOT_AUTHENTICATED_BY_MOBILE_NETWORK"
	// NETWORK_API: the operator refused the call for another reason (PERMISSION_DENIED, a 4xx).
	ReasonOperatorRefused = "OPERATOR_REFUSED"
)

// Reasons lists every reason a kept verification can have, in the order messages name them.
var Reasons = []string{
	ReasonMatch, ReasonMismatch, ReasonNoNetworkIdentity, ReasonSessionExpired, ReasonTokenExpired,
	ReasonNotAuthenticatedByMobileNetwork, ReasonOperatorRefused, ReasonNumberShared,
}

// IsOutcome reports whether s is one of the four outcomes a client sees.
func IsOutcome(s Status) bool {
	return s == StatusVerified || s == StatusNotVerified || s == StatusUndetermined || s == StatusExpired
}

// Charged reports whether an outcome is charged.
func Charged(outcome Status) bool { return outcome == StatusVerified || outcome == StatusNotVerified }

// Features this service checks.
const (
	FeatureVerify    = "VERIFY"
	FeatureStuckPlus = "STUCK_PLUS"
	// FeatureNumberShare is CAMARA's phoneNumberShare (the line's number told to the client).
	FeatureNumberShare = "NUMBER_SHARE"
)

// What a verification was for: a number compared (VERIFY), or the line's number told to the
// client (NUMBER_SHARE, CAMARA's phoneNumberShare), charged as the VERIFICATION variant of
// that name.
const (
	ProductVerify      = "VERIFY"
	ProductNumberShare = "NUMBER_SHARE"
)

// ReasonNumberShared is the reason of a share that told the line's number.
const ReasonNumberShared = "NUMBER_SHARED"

// Session is a capture: the single-use right to one verify.
type Session struct {
	ID       string
	ClientID string
	Source   string // SDK, WEB or CAMARA
	// Method is how the session learns about the line: HEADER_ENRICHMENT or NETWORK_API.
	Method     string
	OperatorID *string
	Status     Status
	Platform   *string
	DeviceID   *string
	AppVersion *string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	// NETWORK_API: StateHash (SHA-256 of the OAuth state) while the authorization is pending;
	// OAuthSealed, the PKCE verifier then the access token (package seal's session secrets).
	StateHash   []byte
	OAuthSealed []byte
	// UsedAt is set by the verify that consumed the session.
	UsedAt *time.Time
}

// Verification is a kept verification.
type Verification struct {
	ID          string
	ClientID    string
	SessionID   string
	Status      Status
	Outcome     Status
	Reason      string
	OperatorID  string
	ServiceType string
	// Product is ProductVerify or ProductNumberShare; empty reads as ProductVerify.
	Product      string
	NumberSealed []byte
	NumberHash   []byte
	Charged      int64
	BalanceAfter *int64
	CreatedAt    time.Time
}

// Recorded is what recording a verification did: OK when it consumed its session, at CreatedAt;
// Limited when it was not recorded because its client had verified its number NumberLimit.Max
// times since NumberLimit.Since, the oldest of them at Oldest.
type Recorded struct {
	OK        bool
	CreatedAt time.Time
	Limited   bool
	Oldest    time.Time
}

// NumberLimit bounds a client's verifications of one number: at most Max since Since (0: no
// bound). Counted per client, never across clients.
type NumberLimit struct {
	Max   int
	Since time.Time
}

// Settlement is the charge of a PENDING verification (of ClientID), and its
// verification.completed event.
type Settlement struct {
	ID           string
	ClientID     string
	Charged      int64
	BalanceAfter int64
	Completed    events.Event
}

// VerificationFilter narrows a list of verifications.
type VerificationFilter struct {
	Status   *Status
	From, To *time.Time
	// Reason, OperatorID and Method (the serviceType) narrow it to one value each when set.
	Reason, OperatorID, Method *string
}

// VerifiedNumber is a client's VERIFIED number, told to Connect (by its keyed hash) so that its
// profiles of that number are matched.
type VerifiedNumber struct {
	ClientID       string
	VerificationID string
	NumberHash     []byte
	VerifiedAt     time.Time
}

// Transaction is a browser flow (the REST routes' "opportunity").
type Transaction struct {
	ID          string
	ClientID    string
	ServiceCode string
	MetadataID  string
	Features    []string            // the client's, when the flow started
	Operators   principal.Operators // the client's, when the flow started
	// PENDING, AUTHORIZATION_PENDING, CAPTURED, NO_NETWORK_IDENTITY (EXPIRED is derived).
	Status             Status
	OperatorID         *string
	SessionID          *string
	Blob               *string
	StuckPlusSessionID *string
	// NETWORK_API: ReturnURL is the page the browser goes back to after the operator's
	// authorization; CodeChallenge the S256 challenge of the capturing page's verifier;
	// CompletionHash the SHA-256 of the one-time code the callback gave the returning browser.
	ReturnURL      *string
	CodeChallenge  *string
	CompletionHash []byte
	CreatedAt      time.Time
	ExpiresAt      time.Time
}

// Transaction statuses beyond the capture statuses (a VERIFY capture through the operator's
// network API waits, like its session, in AuthorizationPending).
const (
	TransactionPending Status = "PENDING"
	TransactionExpired Status = "EXPIRED"
)

// Service codes of a browser flow.
const (
	ServiceVerify    = "VERIFY"
	ServiceStuckPlus = "STUCK_PLUS"
)

// StuckPlusSession is a number captured by a STUCK_PLUS browser flow.
type StuckPlusSession struct {
	ID            string
	ClientID      string
	TransactionID string
	MetadataID    string
	OperatorID    string
	NumberSealed  []byte
	NumberMasked  string
	CreatedAt     time.Time
	RevealedAt    *time.Time
}

// RevealStatus is where a reveal's charge stands (never shown to a client: the audit lists
// settled reveals only).
type RevealStatus string

// Reveal statuses.
const (
	RevealPending  RevealStatus = "PENDING"  // recorded; its charge's outcome is not known yet
	RevealSettled  RevealStatus = "SETTLED"  // charged (or free) and audited
	RevealRejected RevealStatus = "REJECTED" // accounts refused the debit: nothing charged, nothing revealed
)

// Reveal is one audited reveal. A charged one is recorded PENDING under its debit's Reference
// and SETTLED (audited) or REJECTED once accounts answered; a free one is SETTLED at once.
type Reveal struct {
	ID        string
	ClientID  string
	SessionID string
	// KeyID is the API key that revealed, or PersonID the person (a console session).
	KeyID     string
	PersonID  string
	Reason    string
	Charged   int64
	Status    RevealStatus
	Reference string
	// Unheard: settled by the reconciler while its request was away (the number not shown).
	Unheard   bool
	CreatedAt time.Time
}

// Page is a page of a list.
type Page[T any] struct {
	Items []T
	Total int64
}
