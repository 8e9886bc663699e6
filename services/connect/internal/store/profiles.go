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

// profilePColumns are profileColumns of the table named p (a statement that reads another row
// of profiles beside it).
const profilePColumns = `p.id::text, p.client_id::text, p.number_sealed, p.number_hash, p.number_masked, p.country_code,
	p.external_id, p.first_name, p.last_name, p.email, p.attributes, p.source, p.matched_at, p.enrichment, p.created_at, p.updated_at`

func scanProfile(row pgx.Row) (domain.Profile, error) { return scanProfileWith(row) }

// scanProfileWith reads a row of profileColumns, then the row's further columns into extra.
func scanProfileWith(row pgx.Row, extra ...any) (domain.Profile, error) {
	var p domain.Profile
	var attrs, enrichment []byte
	err := row.Scan(append([]any{&p.ID, &p.ClientID, &p.NumberSealed, &p.NumberHash, &p.NumberMasked, &p.CountryCode,
		&p.ExternalID, &p.FirstName, &p.LastName, &p.Email, &attrs, &p.Source, &p.MatchedAt, &enrichment, &p.CreatedAt, &p.UpdatedAt}, extra...)...)
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
// before, and counts it. It returns domain.ErrProfileExists when the client already has the
// number. The Store is over a transaction (see matchLockKey).
func (s *Store) InsertProfile(ctx context.Context, p domain.Profile) (domain.Profile, error) {
	// The lock and the lookup in one round trip, the insert and its count in another. The
	// verified time is read before the insert rather than by a subquery inside it, which a
	// database distributed by client does not take in an INSERT; the shared lock keeps it true.
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock_shared(`+matchLockKey("$1")+`)`, p.ClientID)
	b.Queue(`SELECT verified_at FROM connect.verified_numbers WHERE client_id = $1 AND number_hash = $2`, p.ClientID, p.NumberHash)
	br := s.db.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return domain.Profile{}, fmt.Errorf("lock matching: %w", err)
	}
	var matchedAt *time.Time
	if err := br.QueryRow().Scan(&matchedAt); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		_ = br.Close()
		return domain.Profile{}, fmt.Errorf("insert profile: %w", err)
	}
	if err := br.Close(); err != nil {
		return domain.Profile{}, fmt.Errorf("insert profile: %w", err)
	}
	// A number the client has already is no row (ON CONFLICT names the key by its columns:
	// a partition or a shard reports its own name for the constraint), and no count.
	b = &pgx.Batch{}
	b.Queue(`INSERT INTO connect.profiles
		(id, client_id, number_sealed, number_hash, number_masked, country_code, external_id, first_name, last_name,
		 email, attributes, source, matched_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
		ON CONFLICT (client_id, number_hash) DO NOTHING
		RETURNING `+profileColumns,
		p.ID, p.ClientID, p.NumberSealed, p.NumberHash, p.NumberMasked, p.CountryCode, p.ExternalID, p.FirstName, p.LastName,
		p.Email, attributesJSON(p.Attributes), p.Source, matchedAt)
	b.Queue(`INSERT INTO connect.client_stats AS s (client_id, profiles, matched, enriched)
		SELECT $1, 1, $3, 0 WHERE EXISTS (SELECT FROM connect.profiles WHERE client_id = $1 AND id = $2)
		ON CONFLICT (client_id) DO UPDATE SET profiles = s.profiles + 1, matched = s.matched + excluded.matched`,
		p.ClientID, p.ID, one(matchedAt != nil))
	br = s.db.SendBatch(ctx, b)
	defer br.Close()
	out, err := scanProfile(br.QueryRow())
	if errors.Is(err, fault.ErrNotFound) {
		return out, domain.ErrProfileExists
	}
	if err != nil {
		return out, err
	}
	if _, err := br.Exec(); err != nil {
		return out, fmt.Errorf("count profiles: %w", err)
	}
	return out, br.Close()
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

// DeleteProfile erases a profile, records the erasure without its personal data, and counts
// it out.
func (s *Store) DeleteProfile(ctx context.Context, clientID, id string) (time.Time, error) {
	var matched, enriched bool
	err := s.db.QueryRow(ctx, `DELETE FROM connect.profiles WHERE client_id = $1 AND id = $2
		RETURNING matched_at IS NOT NULL, enriched_at IS NOT NULL`, clientID, id).Scan(&matched, &enriched)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, fault.ErrNotFound
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("erase profile: %w", err)
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO connect.erasures (profile_id, client_id) VALUES ($1, $2) RETURNING erased_at`, id, clientID)
	queueCount(b, clientID, profileCounts{profiles: -1, matched: -one(matched), enriched: -one(enriched)})
	br := s.db.SendBatch(ctx, b)
	defer br.Close()
	var at time.Time
	if err := br.QueryRow().Scan(&at); err != nil {
		return at, fmt.Errorf("erase profile: %w", err)
	}
	if _, err := br.Exec(); err != nil {
		return at, fmt.Errorf("count profiles: %w", err)
	}
	return at, br.Close()
}

// SetEnrichment stores a profile's enrichment, and counts the profile enriched the first time.
func (s *Store) SetEnrichment(ctx context.Context, clientID, id string, e domain.Enrichment) (domain.Profile, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return domain.Profile{}, err
	}
	// The row as it was, locked, tells whether it was enriched before.
	var first bool
	out, err := scanProfileWith(s.db.QueryRow(ctx, `UPDATE connect.profiles p SET enrichment = $3, enriched_at = $4, updated_at = now()
		FROM (SELECT enriched_at IS NULL AS first FROM connect.profiles WHERE client_id = $1 AND id = $2 FOR UPDATE) old
		WHERE p.client_id = $1 AND p.id = $2 RETURNING `+profilePColumns+`, old.first`, clientID, id, b, e.EnrichedAt), &first)
	if err != nil || !first {
		return out, err
	}
	return out, s.countProfiles(ctx, clientID, profileCounts{enriched: 1})
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
// with those numbers matched, and counts them. Replays change nothing. It returns the profiles
// newly matched. The Store is over a transaction (see matchLockKey).
func (s *Store) RecordVerified(ctx context.Context, items []domain.VerifiedNumber) ([]domain.MatchedProfile, error) {
	if len(items) == 0 {
		return nil, nil
	}
	// A batch of events names tens of clients: each client's numbers go in statements of their
	// own, which name the client (docs/operations.md#past-one-postgresql), all in one round trip.
	byClient := map[string][]domain.VerifiedNumber{}
	var clientIDs []string
	for _, it := range items {
		if _, ok := byClient[it.ClientID]; !ok {
			clientIDs = append(clientIDs, it.ClientID)
		}
		byClient[it.ClientID] = append(byClient[it.ClientID], it)
	}
	// Several clients' locks, always taken in the same order, so two recordings cannot
	// deadlock; unnest yields the array in its order, which the aggregate keeps.
	slices.Sort(clientIDs)
	b := &pgx.Batch{}
	b.Queue(`SELECT count(pg_advisory_xact_lock(`+matchLockKey("c")+`)) FROM unnest($1::text[]) AS t(c)`, clientIDs)
	for _, c := range clientIDs {
		its := byClient[c]
		hashes := make([][]byte, len(its))
		ids := make([]string, len(its))
		ats := make([]time.Time, len(its))
		for i, it := range its {
			hashes[i], ids[i], ats[i] = it.NumberHash, it.VerificationID, it.VerifiedAt
		}
		// Ids travel as text[], cast by the server: pgx has no binary plan for []string into
		// uuid[] and would fail one (building an error) on every call before falling back to
		// text.
		b.Queue(`INSERT INTO connect.verified_numbers AS vn (client_id, number_hash, verification_id, verified_at)
			SELECT DISTINCT ON (h) $1, h, i, a FROM unnest($2::bytea[], $3::text[]::uuid[], $4::timestamptz[]) AS t(h, i, a)
			ORDER BY h, a DESC
			ON CONFLICT (client_id, number_hash) DO UPDATE SET verification_id = excluded.verification_id, verified_at = excluded.verified_at
				WHERE vn.verified_at < excluded.verified_at`, c, hashes, ids, ats)
		b.Queue(`UPDATE connect.profiles p SET matched_at = u.verified_at, updated_at = now()
			FROM (SELECT DISTINCT ON (h) h, a FROM unnest($2::bytea[], $3::timestamptz[]) AS t(h, a) ORDER BY h, a) u(number_hash, verified_at)
			WHERE p.client_id = $1 AND p.number_hash = u.number_hash AND p.matched_at IS NULL
			RETURNING p.id::text`, c, hashes, ats)
	}
	var matched []domain.MatchedProfile
	newly := map[string]int64{}
	err := func() error {
		br := s.db.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("lock matching: %w", err)
		}
		for _, c := range clientIDs {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("record verified numbers: %w", err)
			}
			rows, err := br.Query()
			if err != nil {
				return fmt.Errorf("match profiles: %w", err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return fmt.Errorf("match profiles: %w", err)
			}
			for _, id := range ids {
				matched = append(matched, domain.MatchedProfile{ProfileID: id, ClientID: c})
			}
			newly[c] = int64(len(ids))
		}
		return br.Close()
	}()
	if err != nil {
		return nil, err
	}
	b = &pgx.Batch{}
	for _, c := range clientIDs {
		queueCount(b, c, profileCounts{matched: newly[c]})
	}
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("count profiles: %w", err)
	}
	return matched, nil
}

// profileCounts is what a change of a client's profiles does to its counts in client_stats:
// profiles added (negative: removed), and of them matched and enriched. Each row counts as its
// new version minus its old one, as the statement triggers that kept client_stats counted.
type profileCounts struct{ profiles, matched, enriched int64 }

// one is 1 for true.
func one(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// queueCount queues the statement that adds c to the client's counts; nothing when c changes
// nothing. client_stats is kept by the statements that change profiles, in their transaction,
// not by triggers: a table distributed by client runs none (docs/operations.md#past-one-postgresql).
func queueCount(b *pgx.Batch, clientID string, c profileCounts) {
	if c == (profileCounts{}) {
		return
	}
	b.Queue(`INSERT INTO connect.client_stats AS s (client_id, profiles, matched, enriched) VALUES ($1, $2, $3, $4)
		ON CONFLICT (client_id) DO UPDATE SET
			profiles = s.profiles + excluded.profiles,
			matched  = s.matched + excluded.matched,
			enriched = s.enriched + excluded.enriched`, clientID, c.profiles, c.matched, c.enriched)
}

// countProfiles adds c to the client's counts (see queueCount).
func (s *Store) countProfiles(ctx context.Context, clientID string, c profileCounts) error {
	b := &pgx.Batch{}
	queueCount(b, clientID, c)
	if b.Len() == 0 {
		return nil
	}
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("count profiles: %w", err)
	}
	return nil
}
