package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/pg"
)

// The event delivery engine's side of the webhook tables (internal/eventhooks/delivery): events
// accepted once each, their deliveries, every attempt and the endpoints' health. The endpoints
// and secrets themselves are written by internal/eventhooks/endpoints.

// EnqueueJobs inserts the jobs in the Store's transaction; outside one it is refused, as Emit
// is: a job committed alone could outlive the row it works on.
func (s *Store) EnqueueJobs(ctx context.Context, params []river.InsertManyParams) error {
	if s.jobs == nil {
		return errors.New("store: jobs enqueued without a queue")
	}
	if _, err := s.tx("enqueue jobs"); err != nil {
		return err
	}
	return s.jobs.InsertMany(ctx, s.db, params)
}

// InsertEvent accepts ev once: false when an event of its id was accepted before (the event's
// body is then left as it was). The body kept, and signed at every delivery, is ev.Data byte
// for byte.
func (s *Store) InsertEvent(ctx context.Context, ev events.Event) (bool, error) {
	tag, err := s.db.Exec(ctx, `INSERT INTO connect.events (id, client_id, type, data, body, created_at)
		VALUES ($1, $2, $3, $4::jsonb, $5, $6) ON CONFLICT (client_id, id) DO NOTHING`,
		ev.ID, ev.ClientID, ev.Type, string(ev.Data), []byte(ev.Data), ev.CreatedAt)
	if err != nil {
		return false, fmt.Errorf("insert event: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// SubscribedEndpoints lists, for each event of evs, the ids of its client's enabled endpoints
// that take an event of its type (every endpoint of ["*"] takes all but ping, which is sent to
// one endpoint by id) and that existed when it was created (created_at compared at the
// millisecond precision events carry), oldest first. One statement per client, which names it
// (docs/operations.md#past-one-postgresql), all in one round trip.
func (s *Store) SubscribedEndpoints(ctx context.Context, evs []events.Event) ([][]string, error) {
	type clientEvents struct {
		types []string
		at    []time.Time
		n     []int32 // the events' places in evs
	}
	byClient := map[string]*clientEvents{}
	var clientIDs []string
	for i, ev := range evs {
		e := byClient[ev.ClientID]
		if e == nil {
			e = &clientEvents{}
			byClient[ev.ClientID] = e
			clientIDs = append(clientIDs, ev.ClientID)
		}
		e.types, e.at, e.n = append(e.types, ev.Type), append(e.at, ev.CreatedAt), append(e.n, int32(i))
	}
	b := &pgx.Batch{}
	for _, c := range clientIDs {
		e := byClient[c]
		b.Queue(`SELECT i.n, e.id::text FROM unnest($2::text[], $3::timestamptz[], $4::int[]) AS i(typ, at, n)
			JOIN connect.webhook_endpoints e ON e.client_id = $1 AND e.enabled
				AND ((e.event_types IS NULL AND i.typ <> $5) OR i.typ = ANY (e.event_types))
				AND date_trunc('milliseconds', e.created_at) <= i.at
			ORDER BY i.n, e.created_at, e.id`, c, e.types, e.at, e.n, events.Ping)
	}
	out := make([][]string, len(evs))
	br := s.db.SendBatch(ctx, b)
	defer br.Close()
	for range clientIDs {
		rows, err := br.Query()
		if err != nil {
			return nil, fmt.Errorf("subscribed endpoints: %w", err)
		}
		var n int32
		var id string
		if _, err := pgx.ForEachRow(rows, []any{&n, &id}, func() error {
			out[n] = append(out[n], id)
			return nil
		}); err != nil {
			return nil, fmt.Errorf("subscribed endpoints: %w", err)
		}
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("subscribed endpoints: %w", err)
	}
	return out, nil
}

// InsertDeliveries queues deliveries, PENDING with no attempt yet; their ids are set here when
// empty. A delivery of an event to an endpoint that has one already is skipped.
func (s *Store) InsertDeliveries(ctx context.Context, ds []domain.WebhookDelivery) ([]domain.WebhookDelivery, error) {
	out := make([]domain.WebhookDelivery, 0, len(ds))
	for _, d := range ds {
		if d.ID == "" {
			d.ID = uuid.NewString()
		}
		err := s.db.QueryRow(ctx, `INSERT INTO connect.webhook_deliveries (id, client_id, endpoint_id, event_id, status)
			VALUES ($1, $2, $3, $4, 'PENDING') ON CONFLICT (client_id, event_id, endpoint_id) DO NOTHING
			RETURNING status, created_at, updated_at`, d.ID, d.ClientID, d.EndpointID, d.EventID).
			Scan(&d.Status, &d.CreatedAt, &d.UpdatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("insert delivery: %w", err)
		}
		out = append(out, d)
	}
	return out, nil
}

// DeliveryToSend reads a client's delivery with its endpoint and event, for an attempt; a
// delivery that is gone (its endpoint or event deleted) is fault.ErrNotFound.
func (s *Store) DeliveryToSend(ctx context.Context, clientID, id string) (domain.WebhookDelivery, domain.WebhookEndpoint, events.Event, error) {
	var (
		d    domain.WebhookDelivery
		ep   domain.WebhookEndpoint
		ev   events.Event
		body []byte
	)
	err := s.db.QueryRow(ctx, `SELECT d.id, d.client_id, d.endpoint_id, d.event_id, e.type, d.status, d.attempts,
			d.created_at, d.updated_at, d.delivered_at,
			w.url, w.enabled, coalesce(w.disabled_reason, ''),
			e.body, e.created_at
		FROM connect.webhook_deliveries d
		JOIN connect.events e ON e.client_id = d.client_id AND e.id = d.event_id
		JOIN connect.webhook_endpoints w ON w.client_id = d.client_id AND w.id = d.endpoint_id
		WHERE d.client_id = $1 AND d.id = $2`, clientID, id).Scan(&d.ID, &d.ClientID, &d.EndpointID, &d.EventID, &d.EventType, &d.Status, &d.Attempts,
		&d.CreatedAt, &d.UpdatedAt, &d.DeliveredAt,
		&ep.URL, &ep.Enabled, &ep.DisabledReason, &body, &ev.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, ep, ev, fault.ErrNotFound
	}
	if err != nil {
		return d, ep, ev, fmt.Errorf("delivery %s: %w", id, err)
	}
	ep.ID, ep.ClientID = d.EndpointID, d.ClientID
	ev.ID, ev.Type, ev.ClientID, ev.Data = d.EventID, d.EventType, d.ClientID, body
	return d, ep, ev, nil
}

// RecordAttempt counts an attempt of a PENDING delivery and writes its row, with the delivery's
// new status: its number, or ok false when the delivery is no longer PENDING (cancelled while
// the attempt ran), in which case nothing is written.
func (s *Store) RecordAttempt(ctx context.Context, r domain.WebhookAttemptRecord) (attempt int, ok bool, err error) {
	err = s.db.QueryRow(ctx, `UPDATE connect.webhook_deliveries SET attempts = attempts + 1, status = $2,
			last_status = $3, last_error = $4, updated_at = now(),
			delivered_at = CASE WHEN $2 = 'SUCCEEDED' THEN now() ELSE delivered_at END
		WHERE client_id = $5 AND id = $1 AND status = 'PENDING' RETURNING attempts`, r.DeliveryID, r.Status, r.HTTPStatus, r.Error, r.ClientID).Scan(&attempt)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("record attempt: %w", err)
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO connect.webhook_attempts (client_id, delivery_id, attempt, http_status, duration_ms, error, started_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, r.ClientID, r.DeliveryID, attempt, r.HTTPStatus, max(r.Duration.Milliseconds(), 0), r.Error, r.StartedAt); err != nil {
		return 0, false, fmt.Errorf("record attempt: %w", err)
	}
	return attempt, true, nil
}

// CancelDelivery marks a client's PENDING delivery CANCELLED (its endpoint was disabled).
func (s *Store) CancelDelivery(ctx context.Context, clientID, id string) error {
	if _, err := s.db.Exec(ctx, `UPDATE connect.webhook_deliveries SET status = 'CANCELLED', updated_at = now()
		WHERE client_id = $1 AND id = $2 AND status = 'PENDING'`, clientID, id); err != nil {
		return fmt.Errorf("cancel delivery: %w", err)
	}
	return nil
}

// EndpointSucceeded marks a client's endpoint healthy again.
func (s *Store) EndpointSucceeded(ctx context.Context, clientID, endpointID string) error {
	if _, err := s.db.Exec(ctx, `UPDATE connect.webhook_endpoints SET failing_since = NULL
		WHERE client_id = $1 AND id = $2 AND failing_since IS NOT NULL`, clientID, endpointID); err != nil {
		return fmt.Errorf("endpoint health: %w", err)
	}
	return nil
}

// EndpointFailed notes a failure of an endpoint (failing since its first failure after the
// last success) and, when it has been failing for longer than disableAfter by the database
// clock, disables it (FAILING) and cancels its PENDING deliveries. disabled is the endpoint
// when this call disabled it, else nil. disableAfter 0 never disables.
func (s *Store) EndpointFailed(ctx context.Context, clientID, endpointID string, disableAfter time.Duration) (*domain.WebhookEndpoint, error) {
	if _, err := s.db.Exec(ctx, `UPDATE connect.webhook_endpoints SET failing_since = coalesce(failing_since, now())
		WHERE client_id = $1 AND id = $2 AND failing_since IS NULL`, clientID, endpointID); err != nil {
		return nil, fmt.Errorf("endpoint health: %w", err)
	}
	if disableAfter <= 0 {
		return nil, nil
	}
	var ep domain.WebhookEndpoint
	err := s.db.QueryRow(ctx, `UPDATE connect.webhook_endpoints
		SET enabled = false, disabled_reason = 'FAILING', disabled_at = now(), updated_at = now()
		WHERE client_id = $1 AND id = $2 AND enabled AND failing_since <= now() - make_interval(secs => $3)
		RETURNING id, client_id, url, failing_since, disabled_at`, clientID, endpointID, disableAfter.Seconds()).
		Scan(&ep.ID, &ep.ClientID, &ep.URL, &ep.FailingSince, &ep.DisabledAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("disable endpoint: %w", err)
	}
	ep.DisabledReason = domain.WebhookDisabledFailing
	if _, err := s.db.Exec(ctx, `UPDATE connect.webhook_deliveries SET status = 'CANCELLED', updated_at = now()
		WHERE client_id = $1 AND endpoint_id = $2 AND status = 'PENDING'`, clientID, endpointID); err != nil {
		return nil, fmt.Errorf("disable endpoint: %w", err)
	}
	return &ep, nil
}

// RequeueDelivery sets a client's delivery PENDING again for a redelivery. queued is false when
// it was PENDING already (its job still runs, nothing to add); a delivery of another client is
// fault.ErrNotFound. id must be a UUID (the caller checks).
func (s *Store) RequeueDelivery(ctx context.Context, clientID, id string) (d domain.WebhookDelivery, queued bool, err error) {
	var prev domain.DeliveryStatus
	err = s.db.QueryRow(ctx, `UPDATE connect.webhook_deliveries d SET status = 'PENDING', updated_at = now()
		FROM (SELECT id, status FROM connect.webhook_deliveries WHERE id = $1 AND client_id = $2 FOR UPDATE) old
		WHERE d.client_id = $2 AND d.id = old.id
		RETURNING d.id, d.client_id, d.endpoint_id, d.event_id, d.attempts, old.status`, id, clientID).
		Scan(&d.ID, &d.ClientID, &d.EndpointID, &d.EventID, &d.Attempts, &prev)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, false, fault.ErrNotFound
	}
	if err != nil {
		return d, false, fmt.Errorf("requeue delivery: %w", err)
	}
	d.Status = domain.DeliveryPending
	return d, prev != domain.DeliveryPending, nil
}

// PurgeWebhookEvents deletes events accepted more than age ago that no delivery still works on,
// with their deliveries and attempts (cascade). It crosses clients as the other purges do
// (retention.go): no lock to pick the rows, the condition checked again on each.
func (s *Store) PurgeWebhookEvents(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return pg.Purge(ctx, s.db, "webhook events", `DELETE FROM connect.events ev
		WHERE accepted_at < now() - make_interval(secs => $1)
		  AND NOT EXISTS (SELECT 1 FROM connect.webhook_deliveries d WHERE d.client_id = ev.client_id AND d.event_id = ev.id AND d.status = 'PENDING')
		  AND (client_id, id) IN (SELECT client_id, id FROM connect.events o WHERE accepted_at < now() - make_interval(secs => $1)
			AND NOT EXISTS (SELECT 1 FROM connect.webhook_deliveries d WHERE d.client_id = o.client_id AND d.event_id = o.id AND d.status = 'PENDING')
			ORDER BY accepted_at LIMIT $2)`, age, limit)
}
