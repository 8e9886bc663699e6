// Package delivery runs the durable delivery queue: workers lease due batches (a few per
// integration at a time, the least busy clients first, so replicas share the work fairly and a
// crashed worker's lease simply runs out), render the profiles through the integration's
// mappings at send time (an erased profile is never sent), sign and send them, and record every
// attempt as a sync event. Timeouts, connection errors, 429 and 5xx are retried with exponential
// backoff and jitter, up to webhook.MaxAttempts; the delivery id is stable across attempts, so
// receivers dedupe (at-least-once).
package delivery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/integrations"
	"github.com/mnvhq/mnv/services/connect/internal/profiles"
	"github.com/mnvhq/mnv/services/connect/internal/render"
	"github.com/mnvhq/mnv/services/connect/internal/webhook"
	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/phone"
)

// Config shapes the workers.
type Config struct {
	Workers int
	// PerIntegration bounds the batches of one integration in flight at once, across replicas.
	PerIntegration int
	Poll           time.Duration // how often an idle worker looks for due batches
	Lease          time.Duration // how long a taken batch is held; longer than a delivery can take
	BackoffBase    time.Duration
	BackoffMax     time.Duration
	MaxAttempts    int
}

// Store is what delivery needs of the service's storage.
type Store interface {
	// ClaimDeliveries leases up to n due batches, at most perIntegration in flight per
	// integration, the least busy clients first. It runs inside a transaction.
	ClaimDeliveries(ctx context.Context, n, perIntegration int, lease time.Duration) ([]domain.Delivery, error)
	// GetIntegration is fault.ErrNotFound for an integration deleted (with its queue).
	GetIntegration(ctx context.Context, clientID, id string) (domain.Integration, error)
	// ProfilesByID reads the client's profiles with these ids; erased ones are absent.
	ProfilesByID(ctx context.Context, clientID string, ids []string) ([]domain.Profile, error)
	// PostponeDelivery puts a taken batch back, due at when, without counting the attempt.
	PostponeDelivery(ctx context.Context, id string, when time.Time) error
	// FinishDelivery records an attempt's sync event and the batch's next state: done, or due
	// again at retryAt.
	FinishDelivery(ctx context.Context, ev domain.SyncEvent, retryAt *time.Time) error
}

// Tx runs a function with the store inside one transaction.
type Tx interface {
	InTx(ctx context.Context, fn func(ctx context.Context, st Store) error) error
}

// Worker delivers queued batches.
type Worker struct {
	st      Store
	tx      Tx
	vault   *phone.Vault
	keyring *crypto.Keyring // opens the integrations' secrets
	client  *http.Client
	cfg     Config
	log     *zap.Logger

	// Metrics, when set, count attempts and delivered records.
	Metrics *Metrics
}

// New returns a Worker that sends with client (webhook.NewClient, which enforces the SSRF
// policy when it connects).
func New(st Store, tx Tx, vault *phone.Vault, keyring *crypto.Keyring, client *http.Client, cfg Config, log *zap.Logger) *Worker {
	return &Worker{st: st, tx: tx, vault: vault, keyring: keyring, client: client, cfg: cfg, log: log}
}

// Run delivers until ctx ends. One loop claims as many due batches as there are idle workers,
// in one claim however many are idle (claims are serialised across replicas, so they should
// be few), and hands them to the workers.
func (w *Worker) Run(ctx context.Context) {
	todo := make(chan domain.Delivery)
	idle := make(chan struct{}, w.cfg.Workers)
	var wg sync.WaitGroup
	for range w.cfg.Workers {
		idle <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range todo {
				if err := w.deliver(ctx, d); err != nil && ctx.Err() == nil {
					w.log.Warn("delivery", zap.Error(err))
				}
				idle <- struct{}{}
			}
		}()
	}
	defer func() { close(todo); wg.Wait() }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-idle:
		}
		n := 1
		for more := true; more; {
			select {
			case <-idle:
				n++
			default:
				more = false
			}
		}
		batch, err := w.claim(ctx, n)
		if err != nil && ctx.Err() == nil {
			w.log.Warn("delivery claim", zap.Error(err))
		}
		for _, d := range batch {
			todo <- d // n workers are idle, waiting for it
		}
		for range n - len(batch) {
			idle <- struct{}{}
		}
		if len(batch) < n {
			select {
			case <-ctx.Done():
				return
			case <-time.After(w.cfg.Poll):
			}
		}
	}
}

// claim takes up to n due batches, fairly (see Store.ClaimDeliveries).
func (w *Worker) claim(ctx context.Context, n int) ([]domain.Delivery, error) {
	var batch []domain.Delivery
	err := w.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		var err error
		batch, err = st.ClaimDeliveries(ctx, n, w.cfg.PerIntegration, w.cfg.Lease)
		return err
	})
	return batch, err
}

func (w *Worker) deliver(ctx context.Context, d domain.Delivery) error {
	started := time.Now()
	ev := domain.SyncEvent{
		ID: uuid.NewString(), IntegrationID: d.IntegrationID, ClientID: d.ClientID, DeliveryID: d.ID,
		Trigger: d.Trigger, Attempt: d.Attempts, StartedAt: started,
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
		retry := time.Now().Add(w.cfg.Poll * 10)
		return w.st.PostponeDelivery(ctx, d.ID, retry)
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
		return w.finish(ctx, ev, webhook.Result{Status: 0})
	}
	// A batch that cannot be rendered or signed (a data key missing from MNV_DATA_KEYS) would
	// fail the same way on every lease: it is FAILED at once, with the reason in its history,
	// instead of coming back forever unseen. A manual sync sends it once the key is back.
	body, err := render.Records(profs, it.FieldMappings, func(p domain.Profile) (string, error) { return profiles.OpenNumber(w.vault, p) })
	if err != nil {
		return w.finish(ctx, ev, webhook.Result{Err: fmt.Errorf("render the records: %w", err)})
	}
	apiKey, err := integrations.OpenAPIKey(w.keyring, it)
	if err != nil {
		return w.finish(ctx, ev, webhook.Result{Err: fmt.Errorf("open the integration's API key: %w", err)})
	}
	secret, err := integrations.OpenSecret(w.keyring, it)
	if err != nil {
		return w.finish(ctx, ev, webhook.Result{Err: fmt.Errorf("open the integration's signing secret: %w", err)})
	}
	res := webhook.Deliver(ctx, w.client, webhook.Request{
		URL: it.EndpointURL, Method: it.HTTPMethod, APIKey: apiKey, Secret: secret,
		MessageID: d.ID, Keys: [][]byte{secret}, DeliveryID: d.ID, Attempt: d.Attempts, Body: body,
	}, time.Now())
	return w.finish(ctx, ev, res)
}

// finish records the outcome of an attempt: a success when res has no error.
func (w *Worker) finish(ctx context.Context, ev domain.SyncEvent, res webhook.Result) error {
	ev.FinishedAt = time.Now()
	ev.Duration = ev.FinishedAt.Sub(ev.StartedAt)
	if res.Status != 0 {
		s := res.Status
		ev.HTTPStatus = &s
	}
	var retryAt *time.Time
	switch {
	case res.Err == nil:
		ev.Status = domain.SyncSucceeded
	case res.Retry && ev.Attempt < w.cfg.MaxAttempts:
		ev.Status = domain.SyncRetrying
		at := time.Now().Add(webhook.Backoff(ev.Attempt, w.cfg.BackoffBase, w.cfg.BackoffMax, nil))
		retryAt = &at
	default:
		ev.Status = domain.SyncFailed
	}
	if res.Err != nil {
		msg := res.Err.Error()
		ev.Error = &msg
	}
	// The outcome is recorded even if the request that triggered it has gone.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := w.st.FinishDelivery(fctx, ev, retryAt); err != nil {
		return err
	}
	w.Metrics.attempt(ev)
	return nil
}
