// Package delivery is where an event webhook is delivered: it takes the events of a client's
// account and delivers them to the client's webhook endpoints (eventhooks/endpoints), signed the
// Standard Webhooks way, on River. CRM pushes are crm/push's.
//
// Intake (Publish) accepts an event once by its id: in one transaction it stores the event,
// a delivery per subscribed endpoint and a River job per delivery, so there is no delivery
// without its job and a repeated event (the outbox forwards at least once) adds nothing. A
// worker then makes each delivery's attempts: every attempt of one delivery carries the same
// webhook-id (the event id), so receivers drop duplicates of an at-least-once delivery. Every
// attempt is recorded with the delivery's status and the endpoint's health in one transaction;
// an endpoint failing for longer than Config.DisableAfter is disabled there, with a
// webhook_endpoint.disabled event to the client's other endpoints.
//
// Fairness: a process works at most Config.PerEndpoint deliveries of one endpoint at once; the
// others are snoozed (not counted as attempts), so a slow endpoint holds a few workers and
// other clients' events go on.
package delivery

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"time"

	"github.com/riverqueue/river"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/eventhooks/endpoints"
	"github.com/mnvhq/mnv/services/connect/internal/outbound"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// Queue is the River queue of deliveries.
const Queue = "webhooks"

// Kind is the delivery job's kind.
const Kind = "webhook.deliver"

// Args is one delivery to attempt. The endpoint is in the args so the fairness limit applies
// before anything is read.
type Args struct {
	DeliveryID string `json:"delivery_id"`
	EndpointID string `json:"endpoint_id"`
	ClientID   string `json:"client_id"`
}

// Kind names the job.
func (Args) Kind() string { return Kind }

// Config shapes delivery.
type Config struct {
	// MaxAttempts of one delivery job before the delivery is FAILED (MNV_WEBHOOK_MAX_ATTEMPTS).
	MaxAttempts int
	// Backoff is the first retry's wait, doubled each attempt up to outbound.MaxBackoff, with
	// jitter (MNV_WEBHOOK_BACKOFF).
	Backoff time.Duration
	// DisableAfter is how long an endpoint may fail, with no success, before it is disabled
	// (MNV_WEBHOOK_DISABLE_AFTER); 0 never disables.
	DisableAfter time.Duration
	// Timeout bounds one attempt's HTTP request (the client's timeout; the job gets a little
	// more).
	Timeout time.Duration
}

// Store is what event delivery needs of the service's storage.
type Store interface {
	// InsertEvent stores an event; false when its id was accepted before.
	InsertEvent(ctx context.Context, ev events.Event) (bool, error)
	// SubscribedEndpoints lists, for each event, its client's enabled endpoints that take it
	// (by type, and created before it), in one query.
	SubscribedEndpoints(ctx context.Context, evs []events.Event) ([][]string, error)
	// InsertDeliveries queues deliveries (ids set when empty) and returns those inserted.
	InsertDeliveries(ctx context.Context, ds []domain.WebhookDelivery) ([]domain.WebhookDelivery, error)
	// EnqueueJobs inserts River jobs in the Store's transaction.
	EnqueueJobs(ctx context.Context, params []river.InsertManyParams) error
	// DeliveryToSend reads a client's delivery, its endpoint and its event; fault.ErrNotFound
	// when gone.
	DeliveryToSend(ctx context.Context, clientID, id string) (domain.WebhookDelivery, domain.WebhookEndpoint, events.Event, error)
	// The endpoint's secrets that sign now (webhooks owns them and opens them).
	endpoints.SecretStore
	// RecordAttempt counts an attempt of a PENDING delivery; ok false when it is PENDING no more.
	RecordAttempt(ctx context.Context, r domain.WebhookAttemptRecord) (attempt int, ok bool, err error)
	// CancelDelivery marks a client's PENDING delivery CANCELLED.
	CancelDelivery(ctx context.Context, clientID, id string) error
	// EndpointSucceeded clears the endpoint's failing_since.
	EndpointSucceeded(ctx context.Context, clientID, endpointID string) error
	// EndpointFailed sets failing_since if unset and disables the endpoint (cancelling its
	// PENDING deliveries) once it has failed for disableAfter; the endpoint when it did.
	EndpointFailed(ctx context.Context, clientID, endpointID string, disableAfter time.Duration) (*domain.WebhookEndpoint, error)
	// RequeueDelivery sets a client's delivery PENDING again; queued false when it was already.
	RequeueDelivery(ctx context.Context, clientID, id string) (domain.WebhookDelivery, bool, error)
}

// Tx runs a function with the store inside one transaction.
type Tx interface {
	InTx(ctx context.Context, fn func(ctx context.Context, st Store) error) error
}

// Limiter bounds the jobs of one key working at once; *jobs.KeyLimit is one. Acquire's error
// (a snooze) is returned from the worker as it is.
type Limiter interface {
	Acquire(key string) (release func(), err error)
}

// Service accepts events and delivers them.
type Service struct {
	st      Store
	tx      Tx
	keyring *crypto.Keyring // opens the endpoints' secrets
	client  *http.Client
	limit   Limiter
	cfg     Config
	log     *zap.Logger
	now     func() time.Time

	// Metrics, when set, count attempts, disabled endpoints and the delivery lag.
	Metrics *Metrics
	// ClientLimit, when set, also bounds the deliveries of one client at once in this process,
	// whatever its endpoints: a client with many slow endpoints holds at most that many workers.
	ClientLimit Limiter
}

// Deps are what the Service works with.
type Deps struct {
	Store Store
	Tx    Tx
	// Keyring opens the endpoints' secrets.
	Keyring *crypto.Keyring
	// Client must come from outbound.NewClient (the SSRF policy of integrations, enforced when
	// it connects).
	Client *http.Client
	// Limit bounds each endpoint's jobs in this process; ClientLimit, when set, each client's
	// (Service.ClientLimit).
	Limit       Limiter
	ClientLimit Limiter
	Log         *zap.Logger
	// Metrics, when set, count attempts, disabled endpoints and the delivery lag.
	Metrics *Metrics
}

// New returns the Service.
func New(cfg Config, d Deps) *Service {
	if cfg.MaxAttempts < 1 {
		cfg.MaxAttempts = outbound.MaxAttempts
	}
	return &Service{
		st: d.Store, tx: d.Tx, keyring: d.Keyring, client: d.Client, limit: d.Limit, cfg: cfg, log: d.Log, now: time.Now,
		Metrics: d.Metrics, ClientLimit: d.ClientLimit,
	}
}

var idPattern = regexp.MustCompile(`^evt_[0-9a-f]{32}$`)

// validate refuses an event that could never be delivered: retrying it cannot help, so it is
// INVALID_ARGUMENT (the outbox then cancels its forward rather than retrying it for days).
func validate(ev events.Event) error {
	switch {
	case !idPattern.MatchString(ev.ID):
		return fault.Invalid("events", "an event id must be evt_ and 32 lowercase hex digits")
	case !events.Known(ev.Type):
		return fault.Invalid("events", "event %s: type %q is not known", ev.ID, ev.Type)
	case !ev.CreatedAt.After(time.Unix(0, 0)): // a missing protobuf timestamp reads as 1970
		return fault.Invalid("events", "event %s: no creation time", ev.ID)
	}
	if _, ok := principal.ParseClientID(ev.ClientID); !ok {
		return fault.Invalid("events", "event %s: the client id is not a UUID", ev.ID)
	}
	// Valid JSON that starts with '{' is an object; checking so allocates nothing, unlike
	// decoding it (a fifth of connect's CPU on a verify's event).
	if len(ev.Data) == 0 || ev.Data[0] != '{' || !json.Valid(ev.Data) {
		return fault.Invalid("events", "event %s: data must be a JSON object", ev.ID)
	}
	return nil
}

// Publish accepts events for delivery (outbox.Publisher): in one transaction each event not
// seen before is stored with a delivery and a job per subscribed endpoint. A repeated event id
// adds nothing. One malformed event refuses the whole call (INVALID_ARGUMENT), before anything
// is written.
func (s *Service) Publish(ctx context.Context, evs []events.Event) error {
	_, err := s.PublishCount(ctx, evs)
	return err
}

// PublishCount is Publish, also telling how many events it stored for delivery.
func (s *Service) PublishCount(ctx context.Context, evs []events.Event) (int, error) {
	for _, ev := range evs {
		if err := validate(ev); err != nil {
			return 0, err
		}
	}
	var accepted int
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		n, err := s.publishTx(ctx, st, evs)
		accepted = n
		return err
	})
	if err != nil {
		return 0, err
	}
	return accepted, nil
}

// publishTx stores evs and their deliveries and jobs through st, a store in the caller's
// transaction, and counts the events stored. An event no endpoint takes is not stored: most
// clients have no endpoint, and every verification has its event. Nothing is lost by it: an
// endpoint created later never takes an event that happened before it, so a repeat of that
// event finds no endpoint either.
func (s *Service) publishTx(ctx context.Context, st Store, evs []events.Event) (int, error) {
	accepted := 0
	var ds []domain.WebhookDelivery
	evs = slices.Clone(evs) // times in UTC, without touching the caller's events
	for i := range evs {
		evs[i].CreatedAt = evs[i].CreatedAt.UTC()
	}
	subscribed, err := st.SubscribedEndpoints(ctx, evs)
	if err != nil {
		return 0, err
	}
	for i, ev := range evs {
		eps := subscribed[i]
		if len(eps) == 0 {
			continue
		}
		fresh, err := st.InsertEvent(ctx, ev)
		if err != nil {
			return 0, err
		}
		if !fresh {
			continue
		}
		accepted++
		for _, ep := range eps {
			ds = append(ds, domain.WebhookDelivery{ClientID: ev.ClientID, EndpointID: ep, EventID: ev.ID, EventType: ev.Type})
		}
	}
	return accepted, s.enqueue(ctx, st, ds)
}

// enqueue inserts deliveries and a job for each one inserted.
func (s *Service) enqueue(ctx context.Context, st Store, ds []domain.WebhookDelivery) error {
	if len(ds) == 0 {
		return nil
	}
	ds, err := st.InsertDeliveries(ctx, ds)
	if err != nil {
		return err
	}
	jobs := make([]river.InsertManyParams, 0, len(ds))
	for _, d := range ds {
		jobs = append(jobs, s.job(d))
	}
	return st.EnqueueJobs(ctx, jobs)
}

func (s *Service) job(d domain.WebhookDelivery) river.InsertManyParams {
	return river.InsertManyParams{
		Args:       Args{DeliveryID: d.ID, EndpointID: d.EndpointID, ClientID: d.ClientID},
		InsertOpts: &river.InsertOpts{Queue: Queue, MaxAttempts: s.cfg.MaxAttempts},
	}
}

// Ping sends a ping event to ep alone, whatever it subscribes to, and returns the event's id.
func (s *Service) Ping(ctx context.Context, ep domain.WebhookEndpoint) (string, error) {
	ev, err := events.New(ep.ClientID, events.Ping, events.PingData{EndpointID: ep.ID}, s.now())
	if err != nil {
		return "", err
	}
	err = s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		if _, err := st.InsertEvent(ctx, ev); err != nil {
			return err
		}
		return s.enqueue(ctx, st, []domain.WebhookDelivery{{ClientID: ep.ClientID, EndpointID: ep.ID, EventID: ev.ID, EventType: ev.Type}})
	})
	if err != nil {
		return "", err
	}
	return ev.ID, nil
}

// Redeliver queues a client's delivery again, whatever became of it: PENDING, with a new job
// that makes a full series of attempts under the same webhook-id. A delivery still PENDING is
// left to its job. Another client's delivery, or an unknown id, is fault.ErrNotFound.
func (s *Service) Redeliver(ctx context.Context, clientID, deliveryID string) error {
	if _, ok := principal.ParseClientID(deliveryID); !ok {
		return fault.ErrNotFound
	}
	return s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		d, queued, err := st.RequeueDelivery(ctx, clientID, deliveryID)
		if err != nil || !queued {
			return err
		}
		return st.EnqueueJobs(ctx, []river.InsertManyParams{s.job(d)})
	})
}

// signingKeys opens the secrets that sign now: the current one, and the previous one during a
// rotation's overlap.
func (s *Service) signingKeys(ctx context.Context, clientID, endpointID string) ([][]byte, error) {
	return endpoints.SigningKeys(ctx, s.st, s.keyring, clientID, endpointID, time.Now())
}
