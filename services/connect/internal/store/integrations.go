package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mnvhq/mnv/services/connect/internal/crm/push"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/pg"
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
	q := pg.PageQuery{Columns: integrationColumns, From: `FROM connect.integrations WHERE client_id = $1`,
		Order: "created_at DESC, integrations.id", Args: []any{clientID}}
	var err error
	if p.Items, p.Total, err = pg.Page(ctx, s.db, q, limit, offset, scanIntegration); err != nil {
		return p, fmt.Errorf("list integrations: %w", err)
	}
	return p, nil
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
// integration's size, each with its job. It returns how many records were queued. In a
// transaction.
func (s *Store) EnqueueForTrigger(ctx context.Context, clientID, trigger string, profileIDs []string) (int64, error) {
	if len(profileIDs) == 0 {
		return 0, nil
	}
	if _, err := s.tx("queue deliveries"); err != nil {
		return 0, err
	}
	targets, err := s.TriggerIntegrations(ctx, clientID, trigger)
	if err != nil || len(targets) == 0 {
		return 0, err
	}
	var matched []string // the matched ones among profileIDs, read on the first matchedOnly target
	var haveMatched bool
	var queued int64
	var jobs []push.Args
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
		for start := 0; start < len(ids); start += t.BatchSize {
			chunk := ids[start:min(start+t.BatchSize, len(ids))]
			id := uuid.NewString()
			if _, err := s.db.Exec(ctx, `INSERT INTO connect.deliveries (id, integration_id, client_id, trigger, profile_ids, status, next_attempt_at)
				VALUES ($1, $2, $3, $4, $5, 'PENDING', 'infinity')`, id, t.ID, clientID, trigger, chunk); err != nil {
				return 0, fmt.Errorf("queue delivery: %w", err)
			}
			jobs = append(jobs, push.Args{DeliveryID: id, IntegrationID: t.ID, ClientID: clientID})
			queued += int64(len(chunk))
		}
	}
	return queued, s.queueDeliveries(ctx, jobs, nil)
}

// EnqueueAll queues every profile of the client (matched ones only when matchedOnly) for one
// integration, in batches of its size, straight from the profiles table, each batch with its
// job. In a transaction.
func (s *Store) EnqueueAll(ctx context.Context, it domain.Integration, trigger string, importJobID *string) (int64, error) {
	if _, err := s.tx("queue deliveries"); err != nil {
		return 0, err
	}
	rows, err := s.db.Query(ctx, `INSERT INTO connect.deliveries (id, integration_id, client_id, trigger, profile_ids, status, next_attempt_at)
			SELECT gen_random_uuid(), $1, $2, $3, array_agg(id ORDER BY id), 'PENDING', 'infinity'
			FROM (SELECT id, (row_number() OVER (ORDER BY id) - 1) / $4 AS chunk FROM connect.profiles
				WHERE client_id = $2 AND (NOT $5 OR matched_at IS NOT NULL) AND ($6::uuid IS NULL OR import_job_id = $6)) p
			GROUP BY chunk
			RETURNING id::text, cardinality(profile_ids)`, it.ID, it.ClientID, trigger, it.BatchSize, it.MatchedOnly, importJobID)
	if err != nil {
		return 0, fmt.Errorf("queue deliveries: %w", err)
	}
	var n int64
	var jobs []push.Args
	for rows.Next() {
		var id string
		var records int64
		if err := rows.Scan(&id, &records); err != nil {
			rows.Close()
			return 0, fmt.Errorf("queue deliveries: %w", err)
		}
		jobs = append(jobs, push.Args{DeliveryID: id, IntegrationID: it.ID, ClientID: it.ClientID})
		n += records
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("queue deliveries: %w", err)
	}
	return n, s.queueDeliveries(ctx, jobs, nil)
}

// queueDeliveries inserts the batches' jobs in the Store's transaction, each due at once or at
// its time in at (same order).
func (s *Store) queueDeliveries(ctx context.Context, batches []push.Args, at []time.Time) error {
	if len(batches) == 0 {
		return nil
	}
	if s.jobs == nil {
		return errors.New("store: deliveries queued without a job queue")
	}
	params := make([]river.InsertManyParams, len(batches))
	for i, a := range batches {
		params[i] = river.InsertManyParams{Args: a}
		if at != nil {
			params[i].InsertOpts = &river.InsertOpts{ScheduledAt: at[i]}
		}
	}
	return s.jobs.InsertMany(ctx, s.db, params)
}

// AdoptDeliveries makes a job of every batch the leasing version left PENDING (due at its next
// attempt, or after the lease a worker of that version may still hold), keeping its attempts,
// and marks it adopted (next_attempt_at 'infinity', which that version never claims) in the
// same transaction: each is adopted once, by one replica (the update locks the rows; a replica
// that waited finds them adopted). In a transaction.
//
// The batches of every client are candidates, so they are read without a lock, then adopted
// by one statement per client that names it and checks each batch again
// (docs/operations.md#past-one-postgresql), all in one round trip, clients in order.
func (s *Store) AdoptDeliveries(ctx context.Context) (int, error) {
	if _, err := s.tx("adopt deliveries"); err != nil {
		return 0, err
	}
	rows, err := s.db.Query(ctx, `SELECT client_id::text, array_agg(id::text ORDER BY id) FROM connect.deliveries
		WHERE status = 'PENDING' AND next_attempt_at < 'infinity' GROUP BY client_id ORDER BY client_id`)
	if err != nil {
		return 0, fmt.Errorf("adopt deliveries: %w", err)
	}
	type candidates struct {
		ClientID string
		IDs      []string
	}
	byClient, err := pgx.CollectRows(rows, pgx.RowToStructByPos[candidates])
	if err != nil || len(byClient) == 0 {
		return 0, err
	}
	b := &pgx.Batch{}
	for _, c := range byClient {
		b.Queue(`UPDATE connect.deliveries d SET next_attempt_at = 'infinity'
			FROM (SELECT id, next_attempt_at AS due FROM connect.deliveries
				WHERE client_id = $1 AND id = ANY($2::text[]::uuid[]) AND status = 'PENDING' AND next_attempt_at < 'infinity'
				ORDER BY id FOR UPDATE) old
			WHERE d.client_id = $1 AND d.id = old.id
			RETURNING d.id::text, d.integration_id::text, d.client_id::text, d.attempts,
				greatest(old.due, coalesce(d.lease_until, old.due))`, c.ClientID, c.IDs)
	}
	var batches []push.Args
	var at []time.Time
	err = func() error {
		br := s.db.SendBatch(ctx, b)
		defer br.Close()
		for range byClient {
			rows, err := br.Query()
			if err != nil {
				return err
			}
			var a push.Args
			var due time.Time
			if _, err := pgx.ForEachRow(rows, []any{&a.DeliveryID, &a.IntegrationID, &a.ClientID, &a.Prior, &due}, func() error {
				batches, at = append(batches, a), append(at, due)
				return nil
			}); err != nil {
				return err
			}
		}
		return br.Close()
	}()
	if err != nil {
		return 0, fmt.Errorf("adopt deliveries: %w", err)
	}
	return len(batches), s.queueDeliveries(ctx, batches, at)
}

// GetDelivery reads a client's batch.
func (s *Store) GetDelivery(ctx context.Context, clientID, id string) (domain.Delivery, error) {
	var d domain.Delivery
	err := s.db.QueryRow(ctx, `SELECT id::text, integration_id::text, client_id::text, trigger, profile_ids::text[], status, attempts
		FROM connect.deliveries WHERE client_id = $1 AND id = $2`, clientID, id).Scan(&d.ID, &d.IntegrationID, &d.ClientID, &d.Trigger, &d.ProfileIDs, &d.Status, &d.Attempts)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, fault.ErrNotFound
	}
	if err != nil {
		return d, fmt.Errorf("read delivery: %w", err)
	}
	return d, nil
}

// FinishDelivery records an attempt's sync event and the delivery's attempts; when done, its
// final status (SUCCEEDED or FAILED, the event's).
func (s *Store) FinishDelivery(ctx context.Context, ev domain.SyncEvent, done bool) error {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO connect.sync_events (id, integration_id, client_id, delivery_id, trigger, status, record_count,
		http_status, error, attempt, duration_ms, started_at, finished_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		ev.ID, ev.IntegrationID, ev.ClientID, ev.DeliveryID, ev.Trigger, ev.Status, ev.RecordCount, ev.HTTPStatus, ev.Error,
		ev.Attempt, ev.Duration.Milliseconds(), ev.StartedAt, ev.FinishedAt)
	b.Queue(`UPDATE connect.deliveries SET attempts = $3, status = CASE WHEN $4 THEN $5 ELSE status END
		WHERE client_id = $1 AND id = $2`, ev.ClientID, ev.DeliveryID, ev.Attempt, done, ev.Status)
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

const syncEventColumns = `id::text, integration_id::text, client_id::text, delivery_id::text, trigger, status,
	record_count, http_status, error, attempt, duration_ms, started_at, finished_at`

func scanSyncEvent(row pgx.Row) (domain.SyncEvent, error) {
	var e domain.SyncEvent
	var ms int64
	err := row.Scan(&e.ID, &e.IntegrationID, &e.ClientID, &e.DeliveryID, &e.Trigger, &e.Status, &e.RecordCount,
		&e.HTTPStatus, &e.Error, &e.Attempt, &ms, &e.StartedAt, &e.FinishedAt)
	e.Duration = time.Duration(ms) * time.Millisecond
	return e, err
}

// ListSyncEvents reads a page of an integration's sync history, newest first. The page and its
// total come from one statement (pg.Page), so a delivery recorded meanwhile cannot make the
// page hold more events than its total says.
func (s *Store) ListSyncEvents(ctx context.Context, clientID, integrationID string, status *domain.SyncStatus, limit, offset int64) (domain.Page[domain.SyncEvent], error) {
	var p domain.Page[domain.SyncEvent]
	q := pg.PageQuery{Columns: syncEventColumns,
		From:  `FROM connect.sync_events WHERE integration_id = $1 AND client_id = $2 AND ($3::text IS NULL OR status = $3)`,
		Order: "started_at DESC, sync_events.id", Args: []any{integrationID, clientID, status}}
	var err error
	if p.Items, p.Total, err = pg.Page(ctx, s.db, q, limit, offset, scanSyncEvent); err != nil {
		return p, fmt.Errorf("list sync events: %w", err)
	}
	return p, nil
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
