package delivery

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/riverqueue/river"
	"go.uber.org/zap"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/outbound"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
)

// Worker makes the attempts of delivery jobs.
type Worker struct {
	river.WorkerDefaults[Args]
	s *Service
}

// Worker returns the River worker of s's deliveries (river.AddWorker).
func (s *Service) Worker() *Worker { return &Worker{s: s} }

// Work makes one attempt of a delivery. A client or an endpoint over its limit of deliveries at
// once in this process snoozes the job (not an attempt), so its worker goes on to other
// clients' and endpoints' jobs.
func (w *Worker) Work(ctx context.Context, job *river.Job[Args]) error {
	if w.s.ClientLimit != nil {
		release, err := w.s.ClientLimit.Acquire("client:" + job.Args.ClientID)
		if err != nil {
			return err
		}
		defer release()
	}
	release, err := w.s.limit.Acquire(job.Args.EndpointID)
	if err != nil {
		return err
	}
	defer release()
	return w.s.attempt(ctx, job.Args.ClientID, job.Args.DeliveryID, job.Attempt >= job.MaxAttempts)
}

// NextRetry is the wait before the next attempt: outbound.Backoff from Config.Backoff, doubling
// up to outbound.MaxBackoff, with jitter, so the retries of many deliveries that failed together
// (an endpoint's outage) do not return in lock-step.
func (w *Worker) NextRetry(job *river.Job[Args]) time.Time {
	return time.Now().Add(outbound.Backoff(job.Attempt, w.s.cfg.Backoff, outbound.MaxBackoff, nil))
}

// Timeout bounds one attempt: the request's own timeout, and time to record it.
func (w *Worker) Timeout(*river.Job[Args]) time.Duration {
	return max(w.s.cfg.Timeout, time.Second) + 30*time.Second
}

// errEndpointDisabled cancels the job of a delivery to a disabled endpoint.
var errEndpointDisabled = errors.New("webhook endpoint disabled; delivery cancelled")

// attempt makes one attempt of delivery id; last says it is the job's last. Its error tells
// River what next: nil done, a river.JobCancel given up on purpose, any other error retried
// after NextRetry (or discarded when last).
//
// Which failures are retried: every HTTP answer that is not 2xx, 4xx included, and every
// transport error, as Standard Webhooks senders do: a receiver answering 400 or 404 may be
// mid-deploy or misconfigured for a while, and the endpoint's failure window
// (Config.DisableAfter) is what ends the retries of one that stays broken. A request refused
// before it was sent (the URL no longer passes the SSRF policy, no signing secret) fails at
// once: nothing would change on a retry.
func (s *Service) attempt(ctx context.Context, clientID, id string, last bool) error {
	if clientID == "" {
		// A job queued without its client, whose delivery was gone when the migration that
		// keyed the tables by client named the others' (009): nothing to deliver.
		return river.JobCancel(fault.ErrNotFound)
	}
	d, ep, ev, err := s.st.DeliveryToSend(ctx, clientID, id)
	if errors.Is(err, fault.ErrNotFound) {
		// Deleted with its endpoint or its event (retention): nothing to deliver.
		return river.JobCancel(err)
	}
	if err != nil {
		return err
	}
	if d.Status != domain.DeliveryPending {
		return nil // done by another job (a redelivery), or cancelled
	}
	if !ep.Enabled {
		if err := s.st.CancelDelivery(ctx, clientID, id); err != nil {
			return err
		}
		s.Metrics.attempt(outcomeCancelled)
		return river.JobCancel(errEndpointDisabled)
	}
	keys, err := s.signingKeys(ctx, clientID, ep.ID)
	if err != nil {
		return err
	}
	body, err := ev.Body()
	if err != nil {
		return river.JobCancel(err)
	}
	start := s.now()
	res := outbound.Deliver(ctx, s.client, outbound.Request{
		URL: ep.URL, Method: http.MethodPost, MessageID: ev.ID, Keys: keys, Attempt: d.Attempts + 1, Body: body,
	}, start)
	refused := res.Err != nil && res.Status == 0 && !res.Retry
	rec := domain.WebhookAttemptRecord{ClientID: clientID, DeliveryID: id, Status: domain.DeliverySucceeded, Duration: res.Duration, StartedAt: start}
	if res.Status != 0 {
		rec.HTTPStatus = &res.Status
	}
	if res.Err != nil {
		msg := res.Err.Error()
		rec.Error = &msg
		rec.Status = domain.DeliveryPending
		if last || refused {
			rec.Status = domain.DeliveryFailed
		}
	}
	// Record even when ctx ended (the process stopping): the request may have arrived, and the
	// log must show it.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var (
		recorded bool
		disabled *domain.WebhookEndpoint
	)
	err = s.tx.InTx(rctx, func(ctx context.Context, st Store) error {
		var err error
		if _, recorded, err = st.RecordAttempt(ctx, rec); err != nil || !recorded {
			return err
		}
		if res.Err == nil {
			return st.EndpointSucceeded(ctx, clientID, ep.ID)
		}
		if disabled, err = st.EndpointFailed(ctx, clientID, ep.ID, s.cfg.DisableAfter); err != nil || disabled == nil {
			return err
		}
		// The client's other endpoints hear of it, in the transaction that disabled it.
		since := events.Time(*disabled.FailingSince)
		dev, err := events.New(ep.ClientID, events.WebhookEndpointDisabled, events.WebhookEndpointDisabledData{EndpointID: ep.ID, FailingSince: since}, s.now())
		if err != nil {
			return err
		}
		_, err = s.publishTx(ctx, st, []events.Event{dev})
		return err
	})
	if err != nil {
		return err
	}
	if !recorded {
		return nil // cancelled while it ran
	}
	if disabled != nil {
		s.Metrics.disabled()
		s.log.Warn("webhook endpoint disabled: failing for too long",
			zap.String("client_id", ep.ClientID), zap.String("endpoint_id", ep.ID), zap.Duration("after", s.cfg.DisableAfter))
	}
	switch {
	case res.Err == nil:
		s.Metrics.attempt(outcomeSucceeded)
		s.Metrics.lag(s.now().Sub(ev.CreatedAt))
		return nil
	case disabled != nil:
		s.Metrics.attempt(outcomeCancelled)
		return river.JobCancel(res.Err)
	case refused:
		s.Metrics.attempt(outcomeFailed)
		return river.JobCancel(res.Err)
	case last:
		s.Metrics.attempt(outcomeFailed)
		return res.Err
	default:
		s.Metrics.attempt(outcomeRetrying)
		return res.Err
	}
}
