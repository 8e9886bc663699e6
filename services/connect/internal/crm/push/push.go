// Package push sends the CRM side of Connect: the durable queue of profile batches that an
// integration pushes to a client's CRM endpoint (event webhooks are eventhooks/delivery). Each batch (a connect.deliveries row) is a
// River job inserted in the transaction that queues the batch, so there is no batch without its
// job and no job without its batch. The worker renders the profiles through the integration's
// mappings at send time (an erased profile is never sent), signs and sends them, and records
// every attempt as a sync event. Timeouts, connection errors, 429 and 5xx are retried by River
// with outbound.Backoff, up to outbound.MaxAttempts; the delivery id is stable across attempts,
// so receivers dedupe (at-least-once). A batch given up is FAILED in the same transaction as
// its integration.delivery_failed event.
package push

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/connect/internal/crm/integrations"
	"github.com/mnvhq/mnv/services/connect/internal/crm/render"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/outbound"
	"github.com/mnvhq/mnv/services/connect/internal/profiles"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/phone"
)

// Queue is the River queue of deliveries; its workers are MNV_DELIVERY_WORKERS.
const Queue = "deliveries"

// Kind is a delivery job's kind.
const Kind = "connect.delivery"

// Args is one batch to send. The batch's row holds its profiles; the job names it.
type Args struct {
	DeliveryID    string `json:"delivery_id"`
	IntegrationID string `json:"integration_id"`
	ClientID      string `json:"client_id"`
	// Prior counts the attempts made before the batch became a job: a batch left PENDING by
	// the version that leased batches keeps its count (and so its remaining attempts).
	Prior int `json:"prior,omitempty"`
}

// Kind names the job.
func (Args) Kind() string { return Kind }

// InsertOpts: the deliveries queue, and the attempts left of outbound.MaxAttempts.
func (a Args) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: max(outbound.MaxAttempts-a.Prior, 1)}
}

// Config shapes the worker.
type Config struct {
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// Timeout bounds one attempt: reading the batch, the request and recording its outcome.
	Timeout time.Duration
	// PausedRecheck is how long a paused integration's batch waits before it looks again,
	// without spending an attempt.
	PausedRecheck time.Duration
}

// Store is what delivery needs of the service's storage.
type Store interface {
	// GetDelivery reads a client's batch; fault.ErrNotFound when it is gone (its integration
	// deleted, or purged).
	GetDelivery(ctx context.Context, clientID, id string) (domain.Delivery, error)
	// GetIntegration is fault.ErrNotFound for an integration deleted (with its queue).
	GetIntegration(ctx context.Context, clientID, id string) (domain.Integration, error)
	// ProfilesByID reads the client's profiles with these ids; erased ones are absent.
	ProfilesByID(ctx context.Context, clientID string, ids []string) ([]domain.Profile, error)
	// FinishDelivery records an attempt's sync event and the batch's attempts; when done, the
	// batch's final status (the event's).
	FinishDelivery(ctx context.Context, ev domain.SyncEvent, done bool) error
	// Emit writes events in the Store's transaction.
	Emit(ctx context.Context, evs ...events.Event) error
	// AdoptDeliveries makes a job of every batch still PENDING without one (left by the
	// version that leased batches), once, whatever its client; it returns how many. In a
	// transaction.
	AdoptDeliveries(ctx context.Context) (int, error)
}

// Tx runs a function with the store inside one transaction.
type Tx interface {
	InTx(ctx context.Context, fn func(ctx context.Context, st Store) error) error
}

// Limiter bounds the batches of one integration sent at once (jobs.KeyLimit): a job over the
// limit is snoozed, so a slow endpoint holds a few workers and the others go on.
type Limiter interface {
	Acquire(key string) (release func(), err error)
}

// Worker sends one batch per job.
type Worker struct {
	river.WorkerDefaults[Args]

	st      Store
	tx      Tx
	vault   *phone.Vault
	keyring *crypto.Keyring // opens the integrations' secrets
	client  *http.Client
	limit   Limiter
	cfg     Config
	log     *zap.Logger

	// Metrics, when set, count attempts and delivered records.
	Metrics *Metrics
}

// Deps are what a Worker works with.
type Deps struct {
	Store Store
	Tx    Tx
	// Vault opens the numbers; Keyring the integrations' secrets.
	Vault   *phone.Vault
	Keyring *crypto.Keyring
	// Client sends: outbound.NewClient, which enforces the SSRF policy when it connects.
	Client *http.Client
	// Limit bounds the batches of one integration sent at once.
	Limit Limiter
	Log   *zap.Logger
	// Metrics, when set, count attempts and delivered records.
	Metrics *Metrics
}

// New returns a Worker.
func New(cfg Config, d Deps) *Worker {
	return &Worker{st: d.Store, tx: d.Tx, vault: d.Vault, keyring: d.Keyring, client: d.Client, limit: d.Limit, cfg: cfg, log: d.Log, Metrics: d.Metrics}
}

// Adopt makes jobs of the batches an earlier version left PENDING, in one transaction; run at
// start. Rows already adopted or queued as jobs are not taken again.
func (w *Worker) Adopt(ctx context.Context) (int, error) {
	var n int
	err := w.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		var err error
		n, err = st.AdoptDeliveries(ctx)
		return err
	})
	return n, err
}

// lastAttemptWait is how long a last attempt that the database failed waits to try again.
const lastAttemptWait = time.Minute

// Timeout bounds one attempt.
func (w *Worker) Timeout(*river.Job[Args]) time.Duration { return w.cfg.Timeout }

// NextRetry is outbound.Backoff's: exponential with equal jitter, the batch's attempts counted.
func (w *Worker) NextRetry(job *river.Job[Args]) time.Time {
	return time.Now().Add(outbound.Backoff(job.Attempt+job.Args.Prior, w.cfg.BackoffBase, w.cfg.BackoffMax, nil))
}

// Work sends the job's batch once. An error asks River for a retry; a batch given up
// cancels its job (its FAILED status and event are written by then).
func (w *Worker) Work(ctx context.Context, job *river.Job[Args]) error {
	release, err := w.limit.Acquire(job.Args.IntegrationID)
	if err != nil {
		return err // snoozed: this integration has its share in flight
	}
	defer release()
	last := job.Attempt >= job.MaxAttempts
	err = w.deliver(ctx, job.Args, job.Attempt+job.Args.Prior, last)
	var snooze *river.JobSnoozeError
	var cancel *river.JobCancelError
	if last && err != nil && !errors.As(err, &snooze) && !errors.As(err, &cancel) {
		// The database failed on the last attempt (reading the batch, or recording its
		// outcome): River would discard the job and leave the batch PENDING, sent by nobody.
		// It waits instead, its attempt not spent, until the batch can be read and finished.
		w.log.Warn("delivery's last attempt kept for later", zap.String("delivery_id", job.Args.DeliveryID), zap.Error(err))
		return river.JobSnooze(lastAttemptWait)
	}
	return err
}

func (w *Worker) deliver(ctx context.Context, a Args, attempt int, last bool) error {
	started := time.Now()
	if a.ClientID == "" {
		// A job queued without its client, whose batch was gone when the migration that keyed
		// the tables by client named the others' (009): nothing to send.
		return nil
	}
	d, err := w.st.GetDelivery(ctx, a.ClientID, a.DeliveryID)
	if errors.Is(err, fault.ErrNotFound) {
		return nil // deleted with its integration, or purged
	}
	if err != nil {
		return err
	}
	if d.Status != domain.DeliveryPending {
		// Finished by an earlier run whose job River did not get to complete (a crash between
		// the two): it is not sent again.
		return nil
	}
	ev := domain.SyncEvent{
		ID: uuid.NewString(), IntegrationID: d.IntegrationID, ClientID: d.ClientID, DeliveryID: d.ID,
		Trigger: d.Trigger, Attempt: attempt, StartedAt: started,
	}
	it, err := w.st.GetIntegration(ctx, d.ClientID, d.IntegrationID)
	if errors.Is(err, fault.ErrNotFound) {
		return nil // deleted with its queue in between
	}
	if err != nil {
		return err
	}
	if it.Status != domain.IntegrationActive {
		// Paused: hold the batch without spending an attempt on it.
		return river.JobSnooze(w.cfg.PausedRecheck)
	}
	profs, err := w.st.ProfilesByID(ctx, d.ClientID, d.ProfileIDs)
	if err != nil {
		return err
	}
	if it.MatchedOnly {
		kept := profs[:0]
		for _, p := range profs {
			if p.MatchedAt != nil {
				kept = append(kept, p)
			}
		}
		profs = kept
	}
	ev.RecordCount = len(profs)
	if len(profs) == 0 {
		// Everything was erased or unmatched since: nothing to send, and that is a success.
		return w.finish(ctx, ev, outbound.Result{Status: 0}, last)
	}
	// A batch that cannot be rendered or signed (a data key missing from MNV_DATA_KEYS) would
	// fail the same way on every attempt: it is FAILED at once, with the reason in its history,
	// instead of coming back unseen. A manual sync sends it once the key is back.
	body, err := render.Records(profs, it.FieldMappings, func(p domain.Profile) (string, error) { return profiles.OpenNumber(w.vault, p) })
	if err != nil {
		return w.finish(ctx, ev, outbound.Result{Err: fmt.Errorf("render the records: %w", err)}, last)
	}
	apiKey, err := integrations.OpenAPIKey(w.keyring, it)
	if err != nil {
		return w.finish(ctx, ev, outbound.Result{Err: fmt.Errorf("open the integration's API key: %w", err)}, last)
	}
	secret, err := integrations.OpenSecret(w.keyring, it)
	if err != nil {
		return w.finish(ctx, ev, outbound.Result{Err: fmt.Errorf("open the integration's signing secret: %w", err)}, last)
	}
	res := outbound.Deliver(ctx, w.client, outbound.Request{
		URL: it.EndpointURL, Method: it.HTTPMethod, APIKey: apiKey, Secret: secret,
		MessageID: d.ID, Keys: [][]byte{secret}, DeliveryID: d.ID, Attempt: attempt, Body: body,
	}, time.Now())
	return w.finish(ctx, ev, res, last)
}

// errRetry is an attempt River is to retry; its text is the sync event's error.
var errRetry = errors.New("delivery attempt failed")

// finish records the outcome of an attempt (a success when res has no error) and tells River
// what follows: nothing (nil), a retry (an error), or nothing ever again (a cancel).
func (w *Worker) finish(ctx context.Context, ev domain.SyncEvent, res outbound.Result, last bool) error {
	ev.FinishedAt = time.Now()
	ev.Duration = ev.FinishedAt.Sub(ev.StartedAt)
	if res.Status != 0 {
		s := res.Status
		ev.HTTPStatus = &s
	}
	switch {
	case res.Err == nil:
		ev.Status = domain.SyncSucceeded
	case res.Retry && !last:
		ev.Status = domain.SyncRetrying
	default:
		ev.Status = domain.SyncFailed
	}
	if res.Err != nil {
		msg := res.Err.Error()
		ev.Error = &msg
	}
	// The outcome is recorded even if the process is stopping: the request was made.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := w.tx.InTx(fctx, func(ctx context.Context, st Store) error {
		if err := st.FinishDelivery(ctx, ev, ev.Status != domain.SyncRetrying); err != nil {
			return err
		}
		if ev.Status != domain.SyncFailed {
			return nil
		}
		e, err := events.New(ev.ClientID, events.IntegrationDeliveryFailed, events.IntegrationDeliveryFailedData{
			IntegrationID: ev.IntegrationID, DeliveryID: ev.DeliveryID, Attempts: ev.Attempt, Records: ev.RecordCount,
			LastStatus: ev.HTTPStatus, LastError: ev.Error,
		}, ev.FinishedAt)
		if err != nil {
			return err
		}
		return st.Emit(ctx, e)
	})
	if err != nil {
		return err // River retries; the receiver may see this attempt again (at-least-once)
	}
	w.Metrics.attempt(ev)
	switch ev.Status {
	case domain.SyncSucceeded:
		return nil
	case domain.SyncRetrying:
		return fmt.Errorf("%w: %s", errRetry, *ev.Error)
	default:
		return river.JobCancel(fmt.Errorf("delivery given up after attempt %d: %s", ev.Attempt, *ev.Error))
	}
}
