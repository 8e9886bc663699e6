package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/pg"
)

const webhookEndpointColumns = `id::text, client_id::text, url, event_types, description, enabled,
	coalesce(disabled_reason, ''), disabled_at, failing_since, created_at, updated_at`

func scanWebhookEndpoint(row pgx.Row) (domain.WebhookEndpoint, error) {
	var e domain.WebhookEndpoint
	err := row.Scan(&e.ID, &e.ClientID, &e.URL, &e.EventTypes, &e.Description, &e.Enabled,
		&e.DisabledReason, &e.DisabledAt, &e.FailingSince, &e.CreatedAt, &e.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, fault.ErrNotFound
	}
	if err != nil {
		return e, fmt.Errorf("read webhook endpoint: %w", err)
	}
	return e, nil
}

// nullString is s, or NULL when empty.
func nullString[S ~string](s S) *string {
	if s == "" {
		return nil
	}
	v := string(s)
	return &v
}

// LockClientWebhooks takes the client's webhook lock until the transaction ends, so two
// creations cannot both pass the count check.
func (s *Store) LockClientWebhooks(ctx context.Context, clientID string) error {
	tx, err := s.tx("lock webhook endpoints")
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('mnv.connect.webhooks.' || $1::text, 0))`, clientID); err != nil {
		return fmt.Errorf("lock webhook endpoints: %w", err)
	}
	return nil
}

// CountWebhookEndpoints counts a client's endpoints.
func (s *Store) CountWebhookEndpoints(ctx context.Context, clientID string) (int, error) {
	var n int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM connect.webhook_endpoints WHERE client_id = $1`, clientID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count webhook endpoints: %w", err)
	}
	return n, nil
}

// InsertWebhookEndpoint stores a new endpoint.
func (s *Store) InsertWebhookEndpoint(ctx context.Context, e domain.WebhookEndpoint) (domain.WebhookEndpoint, error) {
	return scanWebhookEndpoint(s.db.QueryRow(ctx, `INSERT INTO connect.webhook_endpoints
		(id, client_id, url, event_types, description, enabled, disabled_reason, disabled_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING `+webhookEndpointColumns,
		e.ID, e.ClientID, e.URL, e.EventTypes, e.Description, e.Enabled, nullString(e.DisabledReason), e.DisabledAt))
}

// GetWebhookEndpoint reads an endpoint of a client; forUpdate locks its row (in a transaction).
func (s *Store) GetWebhookEndpoint(ctx context.Context, clientID, id string, forUpdate bool) (domain.WebhookEndpoint, error) {
	q := `SELECT ` + webhookEndpointColumns + ` FROM connect.webhook_endpoints WHERE id = $1 AND client_id = $2`
	if forUpdate {
		if _, err := s.tx("lock webhook endpoint"); err != nil {
			return domain.WebhookEndpoint{}, err
		}
		q += ` FOR UPDATE`
	}
	return scanWebhookEndpoint(s.db.QueryRow(ctx, q, id, clientID))
}

// ListWebhookEndpoints reads a page of a client's endpoints, newest first.
func (s *Store) ListWebhookEndpoints(ctx context.Context, clientID string, limit, offset int64) (domain.Page[domain.WebhookEndpoint], error) {
	var p domain.Page[domain.WebhookEndpoint]
	q := pg.PageQuery{Columns: webhookEndpointColumns, From: `FROM connect.webhook_endpoints WHERE client_id = $1`,
		Order: "created_at DESC, webhook_endpoints.id", Args: []any{clientID}}
	var err error
	if p.Items, p.Total, err = pg.Page(ctx, s.db, q, limit, offset, scanWebhookEndpoint); err != nil {
		return p, fmt.Errorf("list webhook endpoints: %w", err)
	}
	return p, nil
}

// UpdateWebhookEndpoint writes an endpoint's url, event types, description and enabled state
// (with its reason, time and failure record).
func (s *Store) UpdateWebhookEndpoint(ctx context.Context, e domain.WebhookEndpoint) (domain.WebhookEndpoint, error) {
	return scanWebhookEndpoint(s.db.QueryRow(ctx, `UPDATE connect.webhook_endpoints SET url = $3, event_types = $4,
		description = $5, enabled = $6, disabled_reason = $7, disabled_at = $8, failing_since = $9, updated_at = now()
		WHERE id = $1 AND client_id = $2 RETURNING `+webhookEndpointColumns,
		e.ID, e.ClientID, e.URL, e.EventTypes, e.Description, e.Enabled, nullString(e.DisabledReason), e.DisabledAt, e.FailingSince))
}

// DeleteWebhookEndpoint removes an endpoint; its secrets, deliveries and attempts go with it.
func (s *Store) DeleteWebhookEndpoint(ctx context.Context, clientID, id string) error {
	// The endpoint's deliveries are locked first (the InitPlan runs before the delete scans): a
	// worker recording an attempt locks its delivery, then the endpoint (its health). Deleting
	// the endpoint first and its deliveries by cascade took the same locks the other way round,
	// and one of the two was aborted as a deadlock.
	tag, err := s.db.Exec(ctx, `DELETE FROM connect.webhook_endpoints
		WHERE id = $1 AND client_id = $2
		  AND (SELECT count(*) FROM (SELECT 1 FROM connect.webhook_deliveries WHERE client_id = $2 AND endpoint_id = $1 FOR UPDATE) d) >= 0`, id, clientID)
	if err != nil {
		return fmt.Errorf("delete webhook endpoint: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fault.ErrNotFound
	}
	return nil
}

// InsertWebhookSecret stores a sealed secret as the endpoint's current one.
func (s *Store) InsertWebhookSecret(ctx context.Context, sec domain.WebhookSecret) error {
	if _, err := s.db.Exec(ctx, `INSERT INTO connect.webhook_secrets (id, client_id, endpoint_id, sealed, expires_at) VALUES ($1, $2, $3, $4, $5)`,
		sec.ID, sec.ClientID, sec.EndpointID, sec.Sealed, sec.ExpiresAt); err != nil {
		return fmt.Errorf("store webhook secret: %w", err)
	}
	return nil
}

// RetireWebhookSecret gives the endpoint's current secret the expiry until.
func (s *Store) RetireWebhookSecret(ctx context.Context, clientID, endpointID string, until time.Time) error {
	if _, err := s.db.Exec(ctx, `UPDATE connect.webhook_secrets SET expires_at = $3
		WHERE client_id = $1 AND endpoint_id = $2 AND expires_at IS NULL`, clientID, endpointID, until); err != nil {
		return fmt.Errorf("retire webhook secret: %w", err)
	}
	return nil
}

// DeleteExpiredWebhookSecrets removes the endpoint's secrets expired at now.
func (s *Store) DeleteExpiredWebhookSecrets(ctx context.Context, clientID, endpointID string, now time.Time) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM connect.webhook_secrets WHERE client_id = $1 AND endpoint_id = $2 AND expires_at <= $3`,
		clientID, endpointID, now); err != nil {
		return fmt.Errorf("delete expired webhook secrets: %w", err)
	}
	return nil
}

// ActiveWebhookSecrets reads the endpoint's secrets that sign at now, the current one first.
func (s *Store) ActiveWebhookSecrets(ctx context.Context, clientID, endpointID string, now time.Time) ([]domain.WebhookSecret, error) {
	rows, err := s.db.Query(ctx, `SELECT id::text, client_id::text, endpoint_id::text, sealed, created_at, expires_at FROM connect.webhook_secrets
		WHERE client_id = $1 AND endpoint_id = $2 AND (expires_at IS NULL OR expires_at > $3)
		ORDER BY expires_at IS NOT NULL, created_at DESC, id`, clientID, endpointID, now)
	if err != nil {
		return nil, fmt.Errorf("read webhook secrets: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.WebhookSecret, error) {
		var sec domain.WebhookSecret
		err := r.Scan(&sec.ID, &sec.ClientID, &sec.EndpointID, &sec.Sealed, &sec.CreatedAt, &sec.ExpiresAt)
		return sec, err
	})
}

const webhookDeliveryColumns = `d.id::text, d.client_id::text, d.endpoint_id::text, d.event_id, e.type, d.status, d.attempts,
	d.last_status, d.last_error, d.created_at, d.updated_at, d.delivered_at`

func scanWebhookDelivery(row pgx.Row) (domain.WebhookDelivery, error) {
	var d domain.WebhookDelivery
	err := row.Scan(&d.ID, &d.ClientID, &d.EndpointID, &d.EventID, &d.EventType, &d.Status, &d.Attempts,
		&d.LastStatus, &d.LastError, &d.CreatedAt, &d.UpdatedAt, &d.DeliveredAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, fault.ErrNotFound
	}
	if err != nil {
		return d, fmt.Errorf("read webhook delivery: %w", err)
	}
	return d, nil
}

// GetWebhookDelivery reads a delivery of a client.
func (s *Store) GetWebhookDelivery(ctx context.Context, clientID, id string) (domain.WebhookDelivery, error) {
	return scanWebhookDelivery(s.db.QueryRow(ctx, `SELECT `+webhookDeliveryColumns+`
		FROM connect.webhook_deliveries d JOIN connect.events e ON e.client_id = d.client_id AND e.id = d.event_id
		WHERE d.id = $1 AND d.client_id = $2`, id, clientID))
}

// ListWebhookDeliveries reads a page of an endpoint's deliveries, newest first, with their
// attempts in order; status narrows them when set.
func (s *Store) ListWebhookDeliveries(ctx context.Context, clientID, endpointID string, status *domain.DeliveryStatus, limit, offset int64) (domain.Page[domain.WebhookDeliveryLog], error) {
	var p domain.Page[domain.WebhookDeliveryLog]
	// A LEFT JOIN, which finds the same events (every delivery has one: event_id NOT NULL
	// REFERENCES), so that PostgreSQL drops it from the count, which reads nothing of e.
	q := pg.PageQuery{Columns: webhookDeliveryColumns,
		From: `FROM connect.webhook_deliveries d LEFT JOIN connect.events e ON e.client_id = d.client_id AND e.id = d.event_id
		WHERE d.endpoint_id = $1 AND d.client_id = $2 AND ($3::text IS NULL OR d.status = $3)`,
		Order: "d.created_at DESC, d.id", Args: []any{endpointID, clientID, status}}
	ds, total, err := pg.Page(ctx, s.db, q, limit, offset, scanWebhookDelivery)
	if err != nil {
		return p, fmt.Errorf("list webhook deliveries: %w", err)
	}
	p.Total = total
	if len(ds) == 0 {
		return p, nil
	}
	ids := make([]string, len(ds))
	at := make(map[string]int, len(ds))
	p.Items = make([]domain.WebhookDeliveryLog, len(ds))
	for i, d := range ds {
		ids[i], at[d.ID] = d.ID, i
		p.Items[i] = domain.WebhookDeliveryLog{WebhookDelivery: d, AttemptLog: []domain.WebhookAttempt{}}
	}
	// One query for the page's attempts, not one per delivery.
	arows, err := s.db.Query(ctx, `SELECT delivery_id::text, attempt, http_status, duration_ms, error, started_at
		FROM connect.webhook_attempts WHERE client_id = $1 AND delivery_id = ANY($2::uuid[]) ORDER BY delivery_id, attempt`, clientID, ids)
	if err != nil {
		return p, fmt.Errorf("list webhook attempts: %w", err)
	}
	attempts, err := pgx.CollectRows(arows, func(r pgx.CollectableRow) (domain.WebhookAttempt, error) {
		var a domain.WebhookAttempt
		var ms int64
		err := r.Scan(&a.DeliveryID, &a.Attempt, &a.HTTPStatus, &ms, &a.Error, &a.StartedAt)
		a.Duration = time.Duration(ms) * time.Millisecond
		return a, err
	})
	if err != nil {
		return p, fmt.Errorf("read webhook attempts: %w", err)
	}
	for _, a := range attempts {
		i := at[a.DeliveryID]
		p.Items[i].AttemptLog = append(p.Items[i].AttemptLog, a)
	}
	return p, nil
}
