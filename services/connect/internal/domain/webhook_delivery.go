package domain

import "time"

// WebhookAttemptRecord is what the delivery engine records of one attempt: the attempt row,
// and the delivery's new status.
type WebhookAttemptRecord struct {
	ClientID   string
	DeliveryID string
	// Status is the delivery's status after the attempt: SUCCEEDED, PENDING (retried later) or
	// FAILED (the last attempt).
	Status     DeliveryStatus
	HTTPStatus *int
	Duration   time.Duration
	Error      *string
	StartedAt  time.Time
}
