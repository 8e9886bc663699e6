package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/pg"
)

const profileColumns = `id::text, client_id::text, number_sealed, number_hash, number_masked, country_code,
	external_id, first_name, last_name, email, attributes, source, matched_at, enrichment, created_at, updated_at`

func scanProfile(row pgx.Row) (domain.Profile, error) {
	var p domain.Profile
	var attrs, enrichment []byte
	err := row.Scan(&p.ID, &p.ClientID, &p.NumberSealed, &p.NumberHash, &p.NumberMasked, &p.CountryCode,
		&p.ExternalID, &p.FirstName, &p.LastName, &p.Email, &attrs, &p.Source, &p.MatchedAt, &enrichment, &p.CreatedAt, &p.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, fault.ErrNotFound
	}
	if err != nil {
		return p, fmt.Errorf("read profile: %w", err)
	}
	if err := json.Unmarshal(attrs, &p.Attributes); err != nil {
		return p, fmt.Errorf("read profile attributes: %w", err)
	}
	if enrichment != nil {
		p.Enrichment = &domain.Enrichment{}
		if err := json.Unmarshal(enrichment, p.Enrichment); err != nil {
			return p, fmt.Errorf("read profile enrichment: %w", err)
		}
	}
	return p, nil
}

func attributesJSON(a map[string]string) []byte {
	if a == nil {
		return []byte("{}")
	}
	b, _ := json.Marshal(a)
	return b
}

// Matching has two sides: a profile written looks its number up in verified_numbers, and a
// verified number recorded marks the profiles that have it. Two such transactions running at
// once would each miss the other's uncommitted row, and the profile would stay unmatched for
// good. A per-client advisory lock orders them: profile writers share it, a recording takes it
// alone, so whichever commits second sees the first. The lock is the transaction's: the Store
// is over a transaction. matchLockKey is the SQL of the lock's key for the client id that the
// SQL expression expr gives.
func matchLockKey(expr string) string {
	return `hashtextextended('mnv.connect.match.' || ` + expr + `::text, 0)`
}

func (s *Store) lockMatchShared(ctx context.Context, clientID string) error {
	if _, err := s.db.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(`+matchLockKey("$1")+`)`, clientID); err != nil {
		return fmt.Errorf("lock matching: %w", err)
	}
	return nil
}

// InsertProfile stores a new profile, matched at once when the client verified its number
// before. It returns domain.ErrProfileExists when the client already has the number. The
// Store is over a transaction (see matchLockKey).
func (s *Store) InsertProfile(ctx context.Context, p domain.Profile) (domain.Profile, error) {
	if err := s.lockMatchShared(ctx, p.ClientID); err != nil {
		return domain.Profile{}, err
	}
	out, err := scanProfile(s.db.QueryRow(ctx, `INSERT INTO connect.profiles
		(id, client_id, number_sealed, number_hash, number_masked, country_code, external_id, first_name, last_name,
		 email, attributes, source, matched_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12,
			(SELECT verified_at FROM connect.verified_numbers WHERE client_id = $2 AND number_hash = $4))
		RETURNING `+profileColumns,
		p.ID, p.ClientID, p.NumberSealed, p.NumberHash, p.NumberMasked, p.CountryCode, p.ExternalID, p.FirstName, p.LastName,
		p.Email, attributesJSON(p.Attributes), p.Source))
	if pg.IsUniqueViolation(err, "profiles_number_unique") {
		return out, domain.ErrProfileExists
	}
	return out, err
}

// GetProfile reads a profile of a client.
func (s *Store) GetProfile(ctx context.Context, clientID, id string) (domain.Profile, error) {
	return scanProfile(s.db.QueryRow(ctx, `SELECT `+profileColumns+` FROM connect.profiles WHERE id = $1 AND client_id = $2`, id, clientID))
}

// ListProfiles reads a page of a client's profiles, newest first.
func (s *Store) ListProfiles(ctx context.Context, clientID string, f domain.ProfileFilter, limit, offset int64) (domain.Page[domain.Profile], error) {
	where := `client_id = $1 AND ($2::boolean IS NULL OR (matched_at IS NOT NULL) = $2)
		AND ($3::text IS NULL OR source = $3)
		AND ($4::text IS NULL OR external_id ILIKE '%' || $4 || '%' OR email ILIKE '%' || $4 || '%')`
	var page domain.Page[domain.Profile]
	var search *string
	if f.Search != nil {
		s := likeEscape(*f.Search)
		search = &s
	}
	q := pg.PageQuery{Columns: profileColumns, From: `FROM connect.profiles WHERE ` + where,
		Order: "created_at DESC, profiles.id", Args: []any{clientID, f.Matched, f.Source, search}}
	var err error
	if page.Items, page.Total, err = pg.Page(ctx, s.db, q, limit, offset, scanProfile); err != nil {
		return page, fmt.Errorf("list profiles: %w", err)
	}
	return page, nil
}

// likeEscape makes a search text literal inside ILIKE.
func likeEscape(s string) string {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		if r == '%' || r == '_' || r == '\\' {
			out = append(out, '\\')
		}
		out = append(out, r)
	}
	return string(out)
}

// DeleteProfile erases a profile and records the erasure, without its personal data.
func (s *Store) DeleteProfile(ctx context.Context, clientID, id string) (time.Time, error) {
	var at time.Time
	err := s.db.QueryRow(ctx, `WITH d AS (DELETE FROM connect.profiles WHERE id = $1 AND client_id = $2 RETURNING id, client_id)
		INSERT INTO connect.erasures (profile_id, client_id) SELECT id, client_id FROM d RETURNING erased_at`, id, clientID).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return at, fault.ErrNotFound
	}
	if err != nil {
		return at, fmt.Errorf("erase profile: %w", err)
	}
	return at, nil
}

// SetEnrichment stores a profile's enrichment.
func (s *Store) SetEnrichment(ctx context.Context, clientID, id string, e domain.Enrichment) (domain.Profile, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return domain.Profile{}, err
	}
	return scanProfile(s.db.QueryRow(ctx, `UPDATE connect.profiles SET enrichment = $3, enriched_at = $4, updated_at = now()
		WHERE id = $1 AND client_id = $2 RETURNING `+profileColumns, id, clientID, b, e.EnrichedAt))
}

// LastVerified is when a client last verified a number (nil: never).
func (s *Store) LastVerified(ctx context.Context, clientID string, hash []byte) (*time.Time, error) {
	var at time.Time
	err := s.db.QueryRow(ctx, `SELECT verified_at FROM connect.verified_numbers WHERE client_id = $1 AND number_hash = $2`, clientID, hash).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("last verified: %w", err)
	}
	return &at, nil
}

// RecordVerified keeps the latest verification of each number and marks the client's profiles
// with those numbers matched, in one statement. Replays change nothing. It returns the profiles
// newly matched. The Store is over a transaction (see matchLockKey).
func (s *Store) RecordVerified(ctx context.Context, items []domain.VerifiedNumber) ([]domain.MatchedProfile, error) {
	if len(items) == 0 {
		return nil, nil
	}
	// Several clients' locks, always taken in the same order, so two recordings cannot deadlock.
	var clientIDs []string
	for _, it := range items {
		clientIDs = append(clientIDs, it.ClientID)
	}
	// One round trip for them all: unnest yields the array in its order, which the aggregate
	// keeps (a batch of events names tens of clients).
	slices.Sort(clientIDs)
	if _, err := s.db.Exec(ctx, `SELECT count(pg_advisory_xact_lock(`+matchLockKey("c")+`))
		FROM unnest($1::text[]) AS t(c)`, slices.Compact(clientIDs)); err != nil {
		return nil, fmt.Errorf("lock matching: %w", err)
	}
	clients := make([]string, len(items))
	hashes := make([][]byte, len(items))
	ids := make([]string, len(items))
	ats := make([]time.Time, len(items))
	for i, it := range items {
		clients[i], hashes[i], ids[i], ats[i] = it.ClientID, it.NumberHash, it.VerificationID, it.VerifiedAt
	}
	// Ids travel as text[], cast by the server: pgx has no binary plan for []string into uuid[]
	// and would fail one (building an error) on every call before falling back to text.
	rows, err := s.db.Query(ctx, `WITH v AS (
			INSERT INTO connect.verified_numbers AS vn (client_id, number_hash, verification_id, verified_at)
			SELECT DISTINCT ON (c, h) c, h, i, a FROM unnest($1::text[]::uuid[], $2::bytea[], $3::text[]::uuid[], $4::timestamptz[]) AS t(c, h, i, a)
			ORDER BY c, h, a DESC
			ON CONFLICT (client_id, number_hash) DO UPDATE SET verification_id = excluded.verification_id, verified_at = excluded.verified_at
				WHERE vn.verified_at < excluded.verified_at
			RETURNING client_id, number_hash, verified_at)
		UPDATE connect.profiles p SET matched_at = u.verified_at, updated_at = now()
		FROM (SELECT DISTINCT ON (c, h) c, h, a FROM unnest($1::text[]::uuid[], $2::bytea[], $4::timestamptz[]) AS t(c, h, a) ORDER BY c, h, a) u(client_id, number_hash, verified_at)
		WHERE p.client_id = u.client_id AND p.number_hash = u.number_hash AND p.matched_at IS NULL
		RETURNING p.id::text, p.client_id::text`, clients, hashes, ids, ats)
	if err != nil {
		return nil, fmt.Errorf("record verified numbers: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.MatchedProfile, error) {
		var m domain.MatchedProfile
		return m, r.Scan(&m.ProfileID, &m.ClientID)
	})
}
