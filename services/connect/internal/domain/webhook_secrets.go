package domain

import "time"

// WebhookSecret is one signing secret of an endpoint (connect.webhook_secrets), sealed under
// WebhookSecretAD(ID). ExpiresAt is nil for the current one; a rotated-out one signs until it.
type WebhookSecret struct {
	ID         string
	ClientID   string
	EndpointID string
	Sealed     []byte
	CreatedAt  time.Time
	ExpiresAt  *time.Time
}

// WebhookDeliveryLog is a delivery as its log shows it: with every attempt, first to last.
type WebhookDeliveryLog struct {
	WebhookDelivery
	AttemptLog []WebhookAttempt
}
