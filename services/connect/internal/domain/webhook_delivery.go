package domain

import "time"

// SealedWebhookSecret is a signing secret of an endpoint as stored: sealed under
// WebhookSecretAD(ID). The delivery engine opens the active ones to sign.
type SealedWebhookSecret struct {
	ID        string
	Sealed    []byte
	ExpiresAt *time.Time
}

// WebhookAttemptRecord is what the delivery engine records of one attempt: the attempt row,
// and the delivery's new status.
type WebhookAttemptRecord struct {
	DeliveryID string
	// Status is the delivery's status after the attempt: SUCCEEDED, PENDING (retried later) or
	// FAILED (the last attempt).
	Status     string
	HTTPStatus *int
	Duration   time.Duration
	Error      *string
	StartedAt  time.Time
}
