package domain

import "time"

// WebhookEndpoint is a client's receiver of events (connect.webhook_endpoints).
type WebhookEndpoint struct {
	ID       string
	ClientID string
	URL      string
	// EventTypes are the subscribed types; nil: every type, present and future.
	EventTypes  []string
	Description string
	Enabled     bool
	// DisabledReason is WebhookDisabledByClient, …ByOperator or …Failing; "" while enabled.
	DisabledReason DisabledReason
	DisabledAt     *time.Time
	// FailingSince is the first failure since the last success; nil while healthy.
	FailingSince *time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// DisabledReason is why an endpoint is disabled.
type DisabledReason string

// Why an endpoint is disabled.
const (
	WebhookDisabledByClient   DisabledReason = "CLIENT"
	WebhookDisabledByOperator DisabledReason = "OPERATOR"
	WebhookDisabledFailing    DisabledReason = "FAILING"
)

// WebhookSecretAD is the associated data a webhook signing secret is sealed under: its own row,
// so a sealed secret copied to another row does not open.
func WebhookSecretAD(secretID string) []byte {
	return []byte("connect.webhook_secrets:" + secretID)
}

// DeliveryStatus is where a delivery stands: an event's to an endpoint, or a CRM batch's.
type DeliveryStatus string

// Delivery statuses.
const (
	DeliveryPending   DeliveryStatus = "PENDING"
	DeliverySucceeded DeliveryStatus = "SUCCEEDED"
	DeliveryFailed    DeliveryStatus = "FAILED"
	DeliveryCancelled DeliveryStatus = "CANCELLED"
)

// WebhookDelivery is one event to one endpoint (connect.webhook_deliveries).
type WebhookDelivery struct {
	ID          string
	ClientID    string
	EndpointID  string
	EventID     string
	EventType   string
	Status      DeliveryStatus
	Attempts    int
	LastStatus  *int
	LastError   *string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	DeliveredAt *time.Time
}

// WebhookAttempt is one attempt of a delivery (connect.webhook_attempts).
type WebhookAttempt struct {
	DeliveryID string
	Attempt    int
	HTTPStatus *int
	Duration   time.Duration
	Error      *string
	StartedAt  time.Time
}
