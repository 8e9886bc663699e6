// Package events names the facts of a client's account that mnv pushes to the client's webhook
// endpoints, and the shape of each one's data. A service writes an event in the same
// transaction as its fact (through its store, with platform/outbox); connect delivers it.
//
// The package holds plain types only, so domain packages may build events.
package events

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// The event types. A receiver switches on them, so they never change once published; a new
// fact is a new type.
const (
	VerificationCompleted     = "verification.completed"
	BalanceLow                = "balance.low"
	BalanceExpiring           = "balance.expiring"
	BalanceExpired            = "balance.expired"
	APIKeyCreated             = "api_key.created"
	APIKeyRevoked             = "api_key.revoked"
	APIKeyRotated             = "api_key.rotated"
	ImportCompleted           = "import.completed"
	ImportFailed              = "import.failed"
	StuckPlusCaptured         = "stuck_plus.captured"
	IntegrationDeliveryFailed = "integration.delivery_failed"
	WebhookEndpointDisabled   = "webhook_endpoint.disabled"
	// VerificationStep: a step of a verification workflow changed status.
	VerificationStep = "verification.step"
	// WorkflowCompleted: a verification workflow reached its final status.
	WorkflowCompleted = "verification.workflow.completed"
	// Ping is sent by POST /v1/api/me/webhooks/{id}/test, to that endpoint alone.
	Ping = "ping"
)

// Types lists every type an endpoint may subscribe to, in the order the documentation shows
// them. Ping is not among them: it goes to the endpoint being tested, whatever it subscribes to.
var Types = []string{
	VerificationCompleted, BalanceLow, BalanceExpiring, BalanceExpired,
	APIKeyCreated, APIKeyRevoked, APIKeyRotated, ImportCompleted, ImportFailed,
	StuckPlusCaptured, IntegrationDeliveryFailed, WebhookEndpointDisabled,
	VerificationStep, WorkflowCompleted,
}

// Known reports whether t is a type an endpoint may subscribe to.
func Known(t string) bool {
	for _, k := range Types {
		if k == t {
			return true
		}
	}
	return false
}

// IDPrefix starts every event id.
const IDPrefix = "evt_"

// Event is one fact, as it is stored, forwarded and delivered. Its JSON form is the body a
// receiver gets: {"id", "type", "createdAt", "data"}; the client it belongs to is not in it
// (the receiver is that client).
type Event struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	ClientID  string          `json:"-"`
	CreatedAt time.Time       `json:"createdAt"`
	Data      json.RawMessage `json:"data"`
}

// New builds an event of type typ for client, now, with data encoded as its JSON object. The id
// is a UUIDv7, so ids sort by creation time.
func New(clientID, typ string, data any, now time.Time) (Event, error) {
	if clientID == "" {
		return Event{}, fmt.Errorf("event %s: no client", typ)
	}
	if typ != Ping && !Known(typ) {
		return Event{}, fmt.Errorf("event type %q is not known", typ)
	}
	b, err := json.Marshal(data)
	if err != nil {
		return Event{}, fmt.Errorf("event %s: encode data: %w", typ, err)
	}
	if len(b) == 0 || b[0] != '{' {
		return Event{}, fmt.Errorf("event %s: data must be a JSON object", typ)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Event{}, fmt.Errorf("event %s: id: %w", typ, err)
	}
	return Event{
		ID: IDPrefix + strings.ReplaceAll(id.String(), "-", ""), Type: typ, ClientID: clientID,
		CreatedAt: now.UTC().Truncate(time.Millisecond), Data: b,
	}, nil
}

// Body is the JSON a receiver gets for e: {"id","type","createdAt","data"}, createdAt in RFC
// 3339 UTC with milliseconds, as the API writes times.
func (e Event) Body() ([]byte, error) {
	return json.Marshal(struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		CreatedAt string          `json:"createdAt"`
		Data      json.RawMessage `json:"data"`
	}{e.ID, e.Type, e.CreatedAt.UTC().Format(TimeLayout), e.Data})
}

// TimeLayout is how an event writes times: the API's layout (apijson.TimeLayout, which a test
// holds this to; that package links protobuf, which domain packages building events need not).
const TimeLayout = "2006-01-02T15:04:05.000Z"
