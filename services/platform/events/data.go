package events

import "time"

// The data of each event type. Amounts are integer units, as the API shows them; numbers are
// masked (phone.Mask), never whole; times are written in TimeLayout by Time.

// Time is a time as events write it, in TimeLayout.
type Time time.Time

// MarshalJSON writes t in TimeLayout, UTC.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format(TimeLayout) + `"`), nil
}

// VerificationCompletedData: a verification reached its final status, charged or not.
type VerificationCompletedData struct {
	VerificationID string `json:"verificationId"`
	// Status is VERIFIED, NOT_VERIFIED, UNDETERMINED, EXPIRED or REJECTED (the debit was
	// refused).
	Status string `json:"status"`
	// Reason is the outcome's reason as the verify answer gives it (NUMBER_MATCH, …); for
	// REJECTED the refusal of the debit (INSUFFICIENT_BALANCE, …).
	Reason       *string `json:"reason"`
	MobileNumber string  `json:"mobileNumber"` // masked
	ServiceType  string  `json:"serviceType"`
	SessionID    string  `json:"sessionId"`
	Charged      int64   `json:"charged"`
	// BalanceAfter is the balance after the charge; null when nothing was charged.
	BalanceAfter *int64 `json:"balanceAfter"`
}

// BalanceLowData: a debit took the balance below the client's threshold (once per crossing:
// the next one needs a credit above it first).
type BalanceLowData struct {
	Balance   int64 `json:"balance"`
	Threshold int64 `json:"threshold"`
}

// BalanceExpiringData: the balance expires within the configured notice.
type BalanceExpiringData struct {
	Balance   int64 `json:"balance"`
	ExpiresAt Time  `json:"expiresAt"`
}

// BalanceExpiredData: the balance's expiry passed; debits are refused until it is extended.
type BalanceExpiredData struct {
	Balance   int64 `json:"balance"`
	ExpiredAt Time  `json:"expiredAt"`
}

// APIKeyData: an API key was created, revoked or rotated. Never the key itself.
type APIKeyData struct {
	KeyID string `json:"keyId"`
	Name  string `json:"name"`
	Role  string `json:"role"`
	// Hint is the last characters of the key, as the key list shows them.
	Hint string `json:"hint"`
	// ReplacedBy names the new key of a rotation (api_key.rotated only).
	ReplacedBy *string `json:"replacedBy,omitempty"`
	// GraceUntil is when a rotated key stops working (api_key.rotated only; null: at once).
	GraceUntil *Time `json:"graceUntil,omitempty"`
}

// ImportData: an import finished, completed or failed.
type ImportData struct {
	ImportID         string  `json:"importId"`
	Status           string  `json:"status"`
	ProcessedRecords int64   `json:"processedRecords"`
	CreatedRecords   int64   `json:"createdRecords"`
	UpdatedRecords   int64   `json:"updatedRecords"`
	FailedRecords    int64   `json:"failedRecords"`
	Error            *string `json:"error"`
}

// StuckPlusCapturedData: a STUCK_PLUS session captured a number (masked); an ADMIN reveal shows
// it whole.
type StuckPlusCapturedData struct {
	SessionID    string `json:"sessionId"`
	MobileNumber string `json:"mobileNumber"` // masked
	OperatorCode string `json:"operatorCode"`
}

// IntegrationDeliveryFailedData: a Connect delivery gave up after its last attempt.
type IntegrationDeliveryFailedData struct {
	IntegrationID string  `json:"integrationId"`
	DeliveryID    string  `json:"deliveryId"`
	Attempts      int     `json:"attempts"`
	Records       int     `json:"records"`
	LastStatus    *int    `json:"lastStatus"`
	LastError     *string `json:"lastError"`
}

// WebhookEndpointDisabledData: an endpoint failed for longer than the configured time and was
// disabled; it gets nothing until it is enabled again. Sent to the client's other endpoints.
type WebhookEndpointDisabledData struct {
	EndpointID   string `json:"endpointId"`
	FailingSince Time   `json:"failingSince"`
}

// PingData: a test delivery.
type PingData struct {
	EndpointID string `json:"endpointId"`
}

// VerificationStepData: a step of a verification workflow changed status
// (docs/api-decisions.md#workflows). Never a code.
type VerificationStepData struct {
	WorkflowID string `json:"workflowId"`
	StepID     string `json:"stepId"`
	Seq        int    `json:"seq"`
	// Channel is SILENT or SMS_OTP.
	Channel string `json:"channel"`
	// Status is the step's new status (QUEUED, SENT, DELIVERED, UNDELIVERABLE, VERIFIED, …).
	Status       string  `json:"status"`
	Reason       *string `json:"reason"`
	MobileNumber string  `json:"mobileNumber"` // masked
	Country      string  `json:"country"`
	// Charged is what the step itself was charged so far (an SMS step; a silent step is
	// charged as its verification, which has its own event).
	Charged int64 `json:"charged"`
	// SIMSwap and SIMCheckedAt are the workflow's SIM-swap check, made before its first step
	// (WorkflowCompletedData's), so a step's receiver knows what the step was gated on.
	SIMSwap      string `json:"simSwap"`
	SIMCheckedAt *Time  `json:"simCheckedAt"`
	// DeviceSwap and DeviceCheckedAt are its device-swap check, made with the SIM one.
	DeviceSwap      string `json:"deviceSwap"`
	DeviceCheckedAt *Time  `json:"deviceCheckedAt"`
}

// WorkflowCompletedData: a verification workflow reached its final status.
type WorkflowCompletedData struct {
	WorkflowID string `json:"workflowId"`
	// Status is VERIFIED, NOT_VERIFIED, FAILED or EXPIRED.
	Status string `json:"status"`
	// DecidedBy is the channel that decided, null when none did (no channel left, expired).
	DecidedBy    *string `json:"decidedBy"`
	Reason       *string `json:"reason"`
	MobileNumber string  `json:"mobileNumber"` // masked
	Country      string  `json:"country"`
	// SIMSwap is what the SIM-swap check found: NOT_CHECKED, NOT_SWAPPED, SWAPPED, UNAVAILABLE,
	// NOT_OFFERED.
	SIMSwap string `json:"simSwap"`
	// SIMCheckedAt is when the operator answered the check, null when none answered.
	SIMCheckedAt *Time `json:"simCheckedAt"`
	// DeviceSwap and DeviceCheckedAt are the device-swap check's, alike.
	DeviceSwap      string `json:"deviceSwap"`
	DeviceCheckedAt *Time  `json:"deviceCheckedAt"`
	// Charged is the sum of the workflow's own step charges.
	Charged int64 `json:"charged"`
}
