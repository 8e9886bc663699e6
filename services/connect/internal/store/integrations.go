package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
)

const integrationColumns = `id::text, client_id::text, display_name, integration_type, endpoint_url, http_method,
	api_key_sealed, signing_secret_sealed, trigger_event, field_mappings, batch_size, matched_only, status, created_at, updated_at`

func scanIntegration(row pgx.Row) (domain.Integration, error) {
	var it domain.Integration
	var mappings []byte
	err := row.Scan(&it.ID, &it.ClientID, &it.DisplayName, &it.Type, &it.EndpointURL, &it.HTTPMethod,
		&it.APIKeySealed, &it.SigningSecretSealed, &it.TriggerEvent, &mappings, &it.BatchSize, &it.MatchedOnly, &it.Status,
		&it.CreatedAt, &it.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return it, fault.ErrNotFound
	}
	if err != nil {
		return it, fmt.Errorf("read integration: %w", err)
	}
	if err := json.Unmarshal(mappings, &it.FieldMappings); err != nil {
		return it, fmt.Errorf("read field mappings: %w", err)
	}
	return it, nil
}

// InsertIntegration stores a new integration.
func (s *Store) InsertIntegration(ctx context.Context, it domain.Integration) (domain.Integration, error) {
	m, _ := json.Marshal(it.FieldMappings)
	return scanIntegration(s.db.QueryRow(ctx, `INSERT INTO connect.integrations
		(id, client_id, display_name, integration_type, endpoint_url, http_method, api_key_sealed, signing_secret_sealed,
		 trigger_event, field_mappings, batch_size, matched_only, status)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING `+integrationColumns,
		it.ID, it.ClientID, it.DisplayName, it.Type, it.EndpointURL, it.HTTPMethod, it.APIKeySealed, it.SigningSecretSealed,
		it.TriggerEvent, m, it.BatchSize, it.MatchedOnly, it.Status))
}

// UpdateIntegration writes an integration's changed fields.
func (s *Store) UpdateIntegration(ctx context.Context, it domain.Integration) (domain.Integration, error) {
	m, _ := json.Marshal(it.FieldMappings)
	return scanIntegration(s.db.QueryRow(ctx, `UPDATE connect.integrations SET display_name = $3, endpoint_url = $4,
		http_method = $5, api_key_sealed = $6, trigger_event = $7, field_mappings = $8, batch_size = $9, matched_only = $10,
		status = $11, updated_at = now() WHERE id = $1 AND client_id = $2 RETURNING `+integrationColumns,
		it.ID, it.ClientID, it.DisplayName, it.EndpointURL, it.HTTPMethod, it.APIKeySealed, it.TriggerEvent, m,
		it.BatchSize, it.MatchedOnly, it.Status))
}

// GetIntegration reads an integration of a client.
func (s *Store) GetIntegration(ctx context.Context, clientID, id string) (domain.Integration, error) {
	return scanIntegration(s.db.QueryRow(ctx, `SELECT `+integrationColumns+` FROM connect.integrations WHERE id = $1 AND client_id = $2`, id, clientID))
}

// ListIntegrations reads a page of a client's integrations, newest first.
func (s *Store) ListIntegrations(ctx context.Context, clientID string, limit, offset int64) (domain.Page[domain.Integration], error) {
	var p domain.Page[domain.Integration]
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM connect.integrations WHERE client_id = $1`, clientID).Scan(&p.Total); err != nil {
		return p, fmt.Errorf("count integrations: %w", err)
	}
	rows, err := s.db.Query(ctx, `SELECT `+integrationColumns+` FROM connect.integrations WHERE client_id = $1
		ORDER BY created_at DESC, id LIMIT $2 OFFSET $3`, clientID, limit, offset)
	if err != nil {
		return p, fmt.Errorf("list integrations: %w", err)
	}
	p.Items, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.Integration, error) { return scanIntegration(r) })
	return p, err
}

// DeleteIntegration removes an integration with its queue and history.
func (s *Store) DeleteIntegration(ctx context.Context, clientID, id string) error {
	tag, err := s.db.Exec(ctx, `DELETE FROM connect.integrations WHERE id = $1 AND client_id = $2`, id, clientID)
	if err != nil {
		return fmt.Errorf("delete integration: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fault.ErrNotFound
	}
	return nil
}

// TriggerIntegrations reads the client's ACTIVE integrations with trigger: the ones an event
// of that trigger queues deliveries for.
func (s *Store) TriggerIntegrations(ctx context.Context, clientID, trigger string) ([]domain.Integration, error) {
	rows, err := s.db.Query(ctx, `SELECT `+integrationColumns+` FROM connect.integrations
		WHERE client_id = $1 AND trigger_event = $2 AND status = 'ACTIVE'`, clientID, trigger)
	if err != nil {
		return nil, fmt.Errorf("integrations for %s: %w", trigger, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.Integration, error) { return scanIntegration(r) })
}

// EnqueueForTrigger queues, for every ACTIVE integration of the client with trigger, the given
// profiles (only the matched ones for matchedOnly integrations), in batches of the
// integration's size. It returns how many records were queued.
func (s *Store) EnqueueForTrigger(ctx context.Context, clientID, trigger string, profileIDs []string) (int64, error) {
	if len(profileIDs) == 0 {
		return 0, nil
	}
	targets, err := s.TriggerIntegrations(ctx, clientID, trigger)
	if err != nil || len(targets) == 0 {
		return 0, err
	}
	var matched []string // the matched ones among profileIDs, read on the first matchedOnly target
	var haveMatched bool
	var queued int64
	for _, t := range targets {
		ids := profileIDs
		if t.MatchedOnly {
			if !haveMatched {
				if err := s.db.QueryRow(ctx, `SELECT coalesce(array_agg(id::text ORDER BY id), '{}') FROM connect.profiles
					WHERE client_id = $1 AND id = ANY($2::text[]::uuid[]) AND matched_at IS NOT NULL`, clientID, profileIDs).Scan(&matched); err != nil {
					return 0, fmt.Errorf("matched profiles: %w", err)
				}
				haveMatched = true
			}
			ids = matched
		}
		n, err := s.enqueue(ctx, clientID, t.ID, trigger, ids, t.BatchSize)
		if err != nil {
			return 0, err
		}
		queued += n
	}
	return queued, nil
}

// EnqueueAll queues every profile of the client (matched ones only when matchedOnly) for one
// integration, in batches of its size, straight from the profiles table.
func (s *Store) EnqueueAll(ctx context.Context, it domain.Integration, trigger string, importJobID *string) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, `WITH ins AS (
			INSERT INTO connect.deliveries (id, integration_id, client_id, trigger, profile_ids, status)
			SELECT gen_random_uuid(), $1, $2, $3, array_agg(id ORDER BY id), 'PENDING'
			FROM (SELECT id, (row_number() OVER (ORDER BY id) - 1) / $4 AS chunk FROM connect.profiles
				WHERE client_id = $2 AND (NOT $5 OR matched_at IS NOT NULL) AND ($6::uuid IS NULL OR import_job_id = $6)) p
			GROUP BY chunk
			RETURNING cardinality(profile_ids) AS records)
		SELECT coalesce(sum(records), 0)::bigint FROM ins`, it.ID, it.ClientID, trigger, it.BatchSize, it.MatchedOnly, importJobID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("queue deliveries: %w", err)
	}
	return n, nil
}

func (s *Store) enqueue(ctx context.Context, clientID, integrationID, trigger string, ids []string, batch int) (int64, error) {
	var queued int64
	for start := 0; start < len(ids); start += batch {
		chunk := ids[start:min(start+batch, len(ids))]
		if _, err := s.db.Exec(ctx, `INSERT INTO connect.deliveries (id, integration_id, client_id, trigger, profile_ids, status)
			VALUES ($1, $2, $3, $4, $5, 'PENDING')`, uuid.NewString(), integrationID, clientID, trigger, chunk); err != nil {
			return 0, fmt.Errorf("queue delivery: %w", err)
		}
		queued += int64(len(chunk))
	}
	return queued, nil
}

// ClaimDeliveries takes up to n due deliveries for lease, fairly: no integration gets more
// than perIntegration batches in flight at once (so a slow endpoint holds a few workers, not
// all of them), and among the rest the clients with the fewest batches in flight go first, in
// turn (so one client's backlog does not queue every other client behind it). Claims are
// serialised by a transaction-level advisory lock, which makes the in-flight counts exact
// across replicas; the Store is over a transaction, committed soon after.
func (s *Store) ClaimDeliveries(ctx context.Context, n, perIntegration int, lease time.Duration) ([]domain.Delivery, error) {
	tx, err := s.tx("claim deliveries")
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('mnv.connect.deliveries.claim'))`); err != nil {
		return nil, fmt.Errorf("claim deliveries: lock: %w", err)
	}
	// The integrations with pending batches, by a loose index scan (one probe each, however
	// long a backlog); the in-flight counts and due batches come from partial indexes too.
	rows, err := s.db.Query(ctx, `WITH RECURSIVE integrations AS (
			(SELECT integration_id FROM connect.deliveries WHERE status = 'PENDING' ORDER BY integration_id LIMIT 1)
			UNION ALL
			SELECT (SELECT d.integration_id FROM connect.deliveries d
				WHERE d.status = 'PENDING' AND d.integration_id > i.integration_id ORDER BY d.integration_id LIMIT 1)
			FROM integrations i WHERE i.integration_id IS NOT NULL),
		busy AS (
			SELECT client_id, integration_id, count(*) AS n FROM connect.deliveries
			WHERE status = 'PENDING' AND lease_until IS NOT NULL AND lease_until > now()
			GROUP BY client_id, integration_id),
		candidates AS (
			SELECT c.id, c.client_id, c.next_attempt_at,
				row_number() OVER (PARTITION BY c.client_id ORDER BY c.next_attempt_at, c.id) AS turn
			FROM integrations i
			LEFT JOIN busy b ON b.integration_id = i.integration_id
			CROSS JOIN LATERAL (
				SELECT d.id, d.client_id, d.next_attempt_at FROM connect.deliveries d
				WHERE d.integration_id = i.integration_id AND d.status = 'PENDING' AND d.next_attempt_at <= now()
					AND (d.lease_until IS NULL OR d.lease_until < now())
				ORDER BY d.next_attempt_at LIMIT greatest($3 - coalesce(b.n, 0), 0)) c
			WHERE i.integration_id IS NOT NULL),
		picked AS (
			SELECT c.id FROM candidates c
			LEFT JOIN (SELECT client_id, sum(n) AS n FROM busy GROUP BY client_id) cb ON cb.client_id = c.client_id
			ORDER BY coalesce(cb.n, 0) + c.turn, c.next_attempt_at, c.id
			LIMIT $1)
		UPDATE connect.deliveries d SET lease_until = now() + $2::interval, attempts = attempts + 1
		FROM (SELECT id FROM connect.deliveries WHERE id IN (SELECT id FROM picked)
			AND status = 'PENDING' AND (lease_until IS NULL OR lease_until < now())
			FOR UPDATE SKIP LOCKED) due
		WHERE d.id = due.id
		RETURNING d.id::text, d.integration_id::text, d.client_id::text, d.trigger, d.profile_ids::text[], d.attempts`,
		n, lease.String(), perIntegration)
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.Delivery, error) {
		var d domain.Delivery
		return d, r.Scan(&d.ID, &d.IntegrationID, &d.ClientID, &d.Trigger, &d.ProfileIDs, &d.Attempts)
	})
}

// FinishDelivery records an attempt's sync event and the delivery's next state: done (status
// SUCCEEDED or FAILED) or due again at retryAt.
func (s *Store) FinishDelivery(ctx context.Context, ev domain.SyncEvent, retryAt *time.Time) error {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO connect.sync_events (id, integration_id, client_id, delivery_id, trigger, status, record_count,
		http_status, error, attempt, duration_ms, started_at, finished_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		ev.ID, ev.IntegrationID, ev.ClientID, ev.DeliveryID, ev.Trigger, ev.Status, ev.RecordCount, ev.HTTPStatus, ev.Error,
		ev.Attempt, ev.Duration.Milliseconds(), ev.StartedAt, ev.FinishedAt)
	if retryAt != nil {
		b.Queue(`UPDATE connect.deliveries SET next_attempt_at = $2, lease_until = NULL WHERE id = $1`, ev.DeliveryID, *retryAt)
	} else {
		b.Queue(`UPDATE connect.deliveries SET status = $2, lease_until = NULL WHERE id = $1`, ev.DeliveryID, ev.Status)
	}
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("finish delivery: %w", err)
	}
	return nil
}

// ProfilesByID reads the client's profiles with these ids (erased ones are simply absent).
func (s *Store) ProfilesByID(ctx context.Context, clientID string, ids []string) ([]domain.Profile, error) {
	rows, err := s.db.Query(ctx, `SELECT `+profileColumns+` FROM connect.profiles WHERE client_id = $1 AND id = ANY($2::text[]::uuid[]) ORDER BY id`, clientID, ids)
	if err != nil {
		return nil, fmt.Errorf("profiles by id: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.Profile, error) { return scanProfile(r) })
}

// ListSyncEvents reads a page of an integration's sync history, newest first.
func (s *Store) ListSyncEvents(ctx context.Context, clientID, integrationID string, status *string, limit, offset int64) (domain.Page[domain.SyncEvent], error) {
	var p domain.Page[domain.SyncEvent]
	where := `integration_id = $1 AND client_id = $2 AND ($3::text IS NULL OR status = $3)`
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM connect.sync_events WHERE `+where, integrationID, clientID, status).Scan(&p.Total); err != nil {
		return p, fmt.Errorf("count sync events: %w", err)
	}
	rows, err := s.db.Query(ctx, `SELECT id::text, integration_id::text, client_id::text, delivery_id::text, trigger, status,
		record_count, http_status, error, attempt, duration_ms, started_at, finished_at
		FROM connect.sync_events WHERE `+where+` ORDER BY started_at DESC, id LIMIT $4 OFFSET $5`,
		integrationID, clientID, status, limit, offset)
	if err != nil {
		return p, fmt.Errorf("list sync events: %w", err)
	}
	p.Items, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.SyncEvent, error) {
		var e domain.SyncEvent
		var ms int64
		err := r.Scan(&e.ID, &e.IntegrationID, &e.ClientID, &e.DeliveryID, &e.Trigger, &e.Status, &e.RecordCount,
			&e.HTTPStatus, &e.Error, &e.Attempt, &ms, &e.StartedAt, &e.FinishedAt)
		e.Duration = time.Duration(ms) * time.Millisecond
		return e, err
	})
	return p, err
}

// OverviewCounts reads the integration, import and sync indicators of a client.
func (s *Store) OverviewCounts(ctx context.Context, clientID string) (domain.Overview, error) {
	var o domain.Overview
	err := s.db.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM connect.integrations WHERE client_id = $1),
		(SELECT count(*) FROM connect.integrations WHERE client_id = $1 AND status = 'ACTIVE'),
		(SELECT count(*) FROM connect.import_jobs WHERE client_id = $1 AND status <> 'UPLOADING'),
		(SELECT count(*) FROM connect.import_jobs WHERE client_id = $1 AND status IN ('QUEUED', 'RUNNING')),
		(SELECT max(finished_at) FROM connect.import_jobs WHERE client_id = $1 AND status = 'COMPLETED'),
		(SELECT count(*) FROM connect.sync_events WHERE client_id = $1 AND finished_at > now() - interval '24 hours' AND status = 'SUCCEEDED'),
		(SELECT count(*) FROM connect.sync_events WHERE client_id = $1 AND finished_at > now() - interval '24 hours' AND status = 'FAILED'),
		coalesce((SELECT profiles FROM connect.client_stats WHERE client_id = $1), 0),
		coalesce((SELECT matched FROM connect.client_stats WHERE client_id = $1), 0),
		coalesce((SELECT enriched FROM connect.client_stats WHERE client_id = $1), 0)`,
		clientID).Scan(&o.Integrations, &o.Active, &o.Imports, &o.RunningImports, &o.LastImportCompletedAt, &o.SyncsSucceeded, &o.SyncsFailed,
		&o.Profiles, &o.Matched, &o.Enriched)
	if err != nil {
		return o, fmt.Errorf("overview: %w", err)
	}
	return o, nil
}

// PostponeDelivery puts a taken batch back, due at when, without counting the attempt.
func (s *Store) PostponeDelivery(ctx context.Context, id string, when time.Time) error {
	if _, err := s.db.Exec(ctx, `UPDATE connect.deliveries SET next_attempt_at = $2, lease_until = NULL, attempts = attempts - 1
		WHERE id = $1`, id, when); err != nil {
		return fmt.Errorf("postpone delivery: %w", err)
	}
	return nil
}
