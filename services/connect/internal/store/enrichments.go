package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
)

const enrichmentColumns = `id::text, client_id::text, profile_id::text, status, charged, created_at`

func scanEnrichment(row pgx.Row) (domain.EnrichmentRecord, error) {
	var r domain.EnrichmentRecord
	err := row.Scan(&r.ID, &r.ClientID, &r.ProfileID, &r.Status, &r.Charged, &r.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fault.ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("read enrichment: %w", err)
	}
	return r, nil
}

// LockProfile reads a client's profile and locks it until the transaction ends: an erasure
// (DeleteProfile) waits for the lock holder's enrichment to be written or given up.
func (s *Store) LockProfile(ctx context.Context, clientID, id string) (domain.Profile, error) {
	tx, err := s.tx("lock profile")
	if err != nil {
		return domain.Profile{}, err
	}
	return scanProfile(tx.QueryRow(ctx, `SELECT `+profileColumns+` FROM connect.profiles WHERE id = $1 AND client_id = $2 FOR UPDATE`, id, clientID))
}

// InsertEnrichment records a PENDING enrichment; requestKey (nil for none) lets a retry of the
// same request find it. A request key already held by another record is domain.ErrEnrichmentInFlight.
func (s *Store) InsertEnrichment(ctx context.Context, r domain.EnrichmentRecord, requestKey []byte) (domain.EnrichmentRecord, error) {
	// A key held already is no row (ON CONFLICT names the key by its columns: a partition or a
	// shard reports its own name for the constraint).
	out, err := scanEnrichment(s.db.QueryRow(ctx, `INSERT INTO connect.enrichments (id, client_id, profile_id, status, request_key)
		VALUES ($1, $2, $3, 'PENDING', $4)
		ON CONFLICT (client_id, request_key) WHERE request_key IS NOT NULL DO NOTHING
		RETURNING `+enrichmentColumns, r.ID, r.ClientID, r.ProfileID, requestKey))
	if errors.Is(err, fault.ErrNotFound) {
		return out, domain.ErrEnrichmentInFlight
	}
	return out, err
}

// EnrichmentByRequestKey reads the record a request key is held by (fault.ErrNotFound: none).
// It does not lock: the record is locked, and its status checked again, before it is charged.
func (s *Store) EnrichmentByRequestKey(ctx context.Context, clientID string, requestKey []byte) (domain.EnrichmentRecord, error) {
	return scanEnrichment(s.db.QueryRow(ctx, `SELECT `+enrichmentColumns+` FROM connect.enrichments
		WHERE client_id = $1 AND request_key = $2`, clientID, requestKey))
}

// ReleaseRequestKey forgets a record's request key: the request it belonged to is answered.
func (s *Store) ReleaseRequestKey(ctx context.Context, clientID, id string) error {
	if _, err := s.db.Exec(ctx, `UPDATE connect.enrichments SET request_key = NULL WHERE client_id = $1 AND id = $2`, clientID, id); err != nil {
		return fmt.Errorf("release enrichment request key: %w", err)
	}
	return nil
}

// LockEnrichment reads a client's record and locks it until the transaction ends.
func (s *Store) LockEnrichment(ctx context.Context, clientID, id string) (domain.EnrichmentRecord, error) {
	tx, err := s.tx("lock enrichment")
	if err != nil {
		return domain.EnrichmentRecord{}, err
	}
	return scanEnrichment(tx.QueryRow(ctx, `SELECT `+enrichmentColumns+` FROM connect.enrichments WHERE client_id = $1 AND id = $2 FOR UPDATE`, clientID, id))
}

// FinishEnrichment moves a PENDING record to status with the amount charged. keepKey keeps its
// request key, for a record settled while its request was not there to hear it (the
// reconciler): a retry of that request is then answered with it instead of charged again.
func (s *Store) FinishEnrichment(ctx context.Context, clientID, id string, status domain.EnrichmentStatus, charged int64, keepKey bool) error {
	tag, err := s.db.Exec(ctx, `UPDATE connect.enrichments SET status = $3, charged = $4, settled_at = now(),
			request_key = CASE WHEN $5 THEN request_key END
		WHERE client_id = $1 AND id = $2 AND status = 'PENDING'`, clientID, id, status, charged, keepKey)
	if err != nil {
		return fmt.Errorf("finish enrichment: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("finish enrichment %s: not PENDING", id)
	}
	return nil
}

// StaleEnrichments locks up to limit PENDING records created before before, oldest first, skipping
// those another transaction holds (a request settling it, another replica's reconciler).
//
// The records of every client are candidates, so they are read without a lock (a read across
// clients is a background sweep's to make), then each is taken with its client, SKIP LOCKED,
// and only while it is still PENDING: no lock is ever taken across clients
// (docs/operations.md#past-one-postgresql). The candidates are read past limit, so a few
// held elsewhere do not leave the batch short.
func (s *Store) StaleEnrichments(ctx context.Context, before time.Time, limit int) ([]domain.EnrichmentRecord, error) {
	tx, err := s.tx("stale enrichments")
	if err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, `SELECT client_id::text, id::text FROM connect.enrichments
		WHERE status = 'PENDING' AND created_at < $1 ORDER BY created_at LIMIT $2`, before, 2*limit)
	if err != nil {
		return nil, fmt.Errorf("stale enrichments: %w", err)
	}
	candidates, err := pgx.CollectRows(rows, pgx.RowToStructByPos[rowKey])
	if err != nil {
		return nil, fmt.Errorf("stale enrichments: %w", err)
	}
	var out []domain.EnrichmentRecord
	for _, c := range candidates {
		if len(out) == limit {
			break
		}
		rec, err := scanEnrichment(tx.QueryRow(ctx, `SELECT `+enrichmentColumns+` FROM connect.enrichments
			WHERE client_id = $1 AND id = $2 AND status = 'PENDING' FOR UPDATE SKIP LOCKED`, c.ClientID, c.ID))
		switch {
		case errors.Is(err, fault.ErrNotFound):
			// Held elsewhere, or settled since it was read.
		case err != nil:
			return nil, fmt.Errorf("stale enrichments: %w", err)
		default:
			out = append(out, rec)
		}
	}
	return out, nil
}

// rowKey names a row of a tenant table: its client and its id.
type rowKey struct{ ClientID, ID string }
