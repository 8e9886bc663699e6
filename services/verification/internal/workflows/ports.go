package workflows

import (
	"context"
	"errors"
	"net/netip"
	"time"
)

// Message is one SMS for the provider to send.
type Message struct {
	// ID is our message id (the step's id), for the provider's logs and an HTTP aggregator
	// that takes a client reference. It is no dedupe key: SMPP has none, so a job retried after
	// a crash between the send and its record may send again; what keeps that from doubling
	// the SMS is the hold of a step in doubt and the matching of receipts to it
	// (docs/architecture.md#sms-over-smpp).
	ID     string
	To     string // E.164
	Text   string
	Locale string
	// Reference is this attempt's two-octet reference (MessageReference of the step and the
	// attempt): the SMPP adapter sends it as user_message_reference, which SMSCs echo in the
	// delivery receipt, so a receipt whose message id was never recorded still finds its step.
	Reference uint16
}

// ErrRefused is what SMSProvider.Send wraps when the SMS centre refused the message for good
// (an invalid destination, a barred number): the step is UNDELIVERABLE and its charge refunded.
// Any other error is unknown (the message may or may not have gone) and the send is retried
// under the same message id.
var ErrRefused = errors.New("sms refused by the provider")

// ErrNotSent is what SMSProvider.Send wraps when it knows the message did not reach the SMS
// centre (no session, closed before a byte went out): the retry is not in doubt.
var ErrNotSent = errors.New("sms not sent")

// SMSProvider sends SMS (the SMPP client is one adapter; a voice, WhatsApp or HTTP aggregator
// channel is another). Send answers the provider's ids of the message (one per part of a
// concatenated message); a delivery receipt names one of them (Service.Receipt).
//
// The errors of every port here are logged, so they must never quote the number, the text or
// the code (say "submit_sm: ESME_RINVDSTADR", not the destination).
type SMSProvider interface {
	Send(ctx context.Context, m Message) (providerIDs []string, err error)
}

// DeliveryReceipt is a delivery receipt whose message id no step recorded
// (Service.ReceiptInDoubt): what else it says, to find the step in doubt it is about.
type DeliveryReceipt struct {
	ProviderID string
	Status     string // ReceiptDelivered or ReceiptUndeliverable
	// To is the number the message went to, as the SMS centre wrote it (international digits,
	// with or without "+").
	To string
	// Reference is the user_message_reference the SMS centre echoed (HasReference).
	Reference    uint16
	HasReference bool
	// Text is the start of the message as the SMS centre gives it back ("" when it gives none).
	// It holds a one-time code: it is compared, never logged or kept.
	Text string
}

// Receipt statuses: what a delivery receipt says of a message.
const (
	ReceiptDelivered     = "DELIVERED"
	ReceiptUndeliverable = "UNDELIVERABLE"
)

// SwapChecker asks the number's operator whether its SIM (CAMARA SIM Swap), or its device
// (CAMARA Device Swap), changed within maxAge. It is asked only when the policy's mode for that
// check is not OFF; a nil one is "not configured", a check no operator offers. An error is a
// check that could not be made: one with a NotOffered() bool method answering true says no
// operator offers the API for the number (NOT_OFFERED), any other the operator did not answer
// (UNAVAILABLE).
type SwapChecker interface {
	Check(ctx context.Context, number string, maxAge time.Duration) (swapped bool, checkedAt time.Time, err error)
}

// SMSRequest is one SMS the workflow asks the pumping guard about.
type SMSRequest struct {
	ClientID string
	Number   string // E.164
	Country  string // the number's region as the workflow has it, "" when unknown
	// Sandbox: the workflow was started by a sandbox client (its codes go to the sandbox SMSC).
	Sandbox bool
	// Address is the end user's address the start gave; invalid when it gave none.
	Address netip.Addr
	// SpentToday reads the client's SMS spend of the day in the transaction that will queue the
	// SMS, under a per-client lock held until it commits (Store.LockSMSSpend): the guard calls
	// it only when a daily cap applies, so concurrent sends of a capped client are serialised
	// there and the cap holds exactly, while a client without a cap never waits.
	SpentToday func(ctx context.Context) (int64, error)
}

// PumpingGuard decides whether an SMS may be sent (SMS pumping: premium prefixes, velocity,
// the client's country allow-list and daily cap). A refusal blocks the step, free; an error
// with a Code() string method names its reason, which the step reports. Verified counts a
// code checked OK for number, the conversion the guard judges prefixes by. Nil allows every
// SMS.
type PumpingGuard interface {
	Allow(ctx context.Context, r SMSRequest) error
	Verified(ctx context.Context, number string)
}
