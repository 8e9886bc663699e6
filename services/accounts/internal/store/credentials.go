package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/accounts/internal/principals"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/principal"
)

// usable is the condition of a key or token that still works, judged by the database clock.
const usable = `revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`

// ClientOfKey finds the client of the API key with fingerprint fp in client_lookups, for a key
// sent without its client id; it is then looked up with it (KeyByFingerprint). A fingerprint of
// no key is fault.ErrNotFound.
func (s *Store) ClientOfKey(ctx context.Context, fp []byte) (string, error) {
	var clientID string
	err := s.db.QueryRow(ctx, `SELECT client_id::text FROM accounts.client_lookups WHERE kind = 'api_key' AND key = $1`, fp).Scan(&clientID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fault.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("client of key: %w", err)
	}
	return clientID, nil
}

// KeyByFingerprint finds the usable API key of clientID with fingerprint fp.
func (s *Store) KeyByFingerprint(ctx context.Context, clientID string, fp []byte) (domain.KeyAuth, error) {
	var a domain.KeyAuth
	var ops map[string][]string
	var validFor *float64
	err := s.db.QueryRow(ctx, `SELECT k.id::text, k.client_id::text, k.role, c.status, c.features, c.operators,
		extract(epoch FROM k.expires_at - now())::float8
		FROM accounts.api_keys k JOIN accounts.clients c ON c.id = k.client_id
		WHERE k.client_id = $1 AND k.fingerprint = $2 AND k.`+usable, clientID, fp).
		Scan(&a.Key.ID, &a.Key.ClientID, &a.Key.Role, &a.Status, &a.Features, &ops, &validFor)
	a.ValidFor = seconds(validFor)
	if errors.Is(err, pgx.ErrNoRows) {
		return a, fault.ErrNotFound
	}
	if err != nil {
		return a, fmt.Errorf("key by fingerprint: %w", err)
	}
	a.Operators = principal.OperatorsFromMap(ops)
	return a, nil
}

// TouchKeys records that keys (pairs of client id and key id) were used now: one statement per
// client, in client order, in one round trip. Not a change of any principal: no notice.
func (s *Store) TouchKeys(ctx context.Context, keys [][2]string) error {
	byClient := map[string][]string{}
	for _, k := range keys {
		byClient[k[0]] = append(byClient[k[0]], k[1])
	}
	b := &pgx.Batch{}
	for _, c := range slices.Sorted(maps.Keys(byClient)) {
		b.Queue(`UPDATE accounts.api_keys SET last_used_at = now() WHERE client_id = $1 AND id = ANY($2::text[]::uuid[])`, c, byClient[c])
	}
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("touch keys: %w", err)
	}
	return nil
}

// InsertKey stores a new API key, and its entry in client_lookups (ClientOfKey) in the same
// round trip and transaction.
func (s *Store) InsertKey(ctx context.Context, k domain.APIKey, fp []byte) (domain.APIKey, error) {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO accounts.api_keys (id, client_id, name, role, fingerprint, hint, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING created_at`,
		k.ID, k.ClientID, k.Name, k.Role, fp, k.Hint, k.ExpiresAt).QueryRow(func(row pgx.Row) error {
		return row.Scan(&k.CreatedAt)
	})
	b.Queue(`INSERT INTO accounts.client_lookups (kind, key, client_id) VALUES ('api_key', $1, $2)`, fp, k.ClientID)
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return k, fmt.Errorf("insert key: %w", err)
	}
	return k, nil
}

const keyColumns = `id::text, client_id::text, name, role, hint, created_at, last_used_at, expires_at, replaced_by IS NOT NULL`

func scanKey(row pgx.Row) (domain.APIKey, error) {
	var k domain.APIKey
	err := row.Scan(&k.ID, &k.ClientID, &k.Name, &k.Role, &k.Hint, &k.CreatedAt, &k.LastUsedAt, &k.ExpiresAt, &k.Superseded)
	if errors.Is(err, pgx.ErrNoRows) {
		return k, fault.ErrNotFound
	}
	return k, err
}

// UsableKey reads a usable key of a client; another client's key is ErrNotFound.
func (s *Store) UsableKey(ctx context.Context, clientID, keyID string) (domain.APIKey, error) {
	k, err := scanKey(s.db.QueryRow(ctx, `SELECT `+keyColumns+` FROM accounts.api_keys
		WHERE id = $1 AND client_id = $2 AND `+usable, keyID, clientID))
	if err != nil && !errors.Is(err, fault.ErrNotFound) {
		return k, fmt.Errorf("usable key: %w", err)
	}
	return k, err
}

// ListUsableKeys reads a page of a client's usable keys, newest first, with the total, from one
// snapshot (pg.Page).
func (s *Store) ListUsableKeys(ctx context.Context, clientID string, limit, offset int64) ([]domain.APIKey, int64, error) {
	q := pg.PageQuery{
		Columns: keyColumns,
		From:    `FROM accounts.api_keys WHERE client_id = $1 AND ` + usable,
		Order:   `created_at DESC, api_keys.id`,
		Args:    []any{clientID},
	}
	out, total, err := pg.Page(ctx, s.db, q, limit, offset, scanKey)
	if err != nil {
		return nil, 0, fmt.Errorf("list keys: %w", err)
	}
	return out, total, nil
}

// CountUsableKeys counts a client's usable keys, and of them the ADMIN keys that do not expire
// by themselves (excluding exceptID).
func (s *Store) CountUsableKeys(ctx context.Context, clientID, exceptID string) (all, lastingAdmins int, err error) {
	err = s.db.QueryRow(ctx, `SELECT count(*),
		count(*) FILTER (WHERE role = 'ADMIN' AND expires_at IS NULL AND id::text <> $2)
		FROM accounts.api_keys WHERE client_id = $1 AND `+usable, clientID, exceptID).Scan(&all, &lastingAdmins)
	if err != nil {
		return 0, 0, fmt.Errorf("count keys: %w", err)
	}
	return all, lastingAdmins, nil
}

// RevokeKey stops a key at once, and tells the principal caches (queueNotice).
func (s *Store) RevokeKey(ctx context.Context, clientID, keyID string) error {
	b := &pgx.Batch{}
	b.Queue(`UPDATE accounts.api_keys SET revoked_at = now() WHERE client_id = $1 AND id = $2`, clientID, keyID)
	queueNotice(b, principals.APIKeyNotice(clientID, keyID))
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("revoke key: %w", err)
	}
	return nil
}

// RetireKey marks a rotated key of clientID as replaced; it stops at once (grace 0) or after
// grace. Either way the principal caches are told (queueNotice).
func (s *Store) RetireKey(ctx context.Context, clientID, keyID, replacedBy string, grace time.Duration) (*time.Time, error) {
	b := &pgx.Batch{}
	var until *time.Time
	if grace <= 0 {
		b.Queue(`UPDATE accounts.api_keys SET revoked_at = now(), replaced_by = $3 WHERE client_id = $1 AND id = $2`, clientID, keyID, replacedBy)
	} else {
		b.Queue(`UPDATE accounts.api_keys SET replaced_by = $3,
			expires_at = least(coalesce(expires_at, 'infinity'), now() + make_interval(secs => $4))
			WHERE client_id = $1 AND id = $2 RETURNING expires_at`, clientID, keyID, replacedBy, grace.Seconds()).QueryRow(func(row pgx.Row) error {
			return row.Scan(&until)
		})
	}
	queueNotice(b, principals.APIKeyNotice(clientID, keyID))
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("retire key: %w", err)
	}
	return until, nil
}

// SDKTokenByFingerprint finds the usable SDK token of clientID with fingerprint fp.
func (s *Store) SDKTokenByFingerprint(ctx context.Context, clientID string, fp []byte) (domain.SDKTokenAuth, error) {
	var a domain.SDKTokenAuth
	var ops map[string][]string
	var validFor *float64
	err := s.db.QueryRow(ctx, `SELECT t.id::text, t.client_id::text, c.status, c.features, c.operators,
		extract(epoch FROM t.expires_at - now())::float8
		FROM accounts.sdk_tokens t JOIN accounts.clients c ON c.id = t.client_id
		WHERE t.client_id = $1 AND t.fingerprint = $2 AND t.`+usable, clientID, fp).
		Scan(&a.TokenID, &a.ClientID, &a.Status, &a.Features, &ops, &validFor)
	a.ValidFor = seconds(validFor)
	if errors.Is(err, pgx.ErrNoRows) {
		return a, fault.ErrNotFound
	}
	if err != nil {
		return a, fmt.Errorf("sdk token by fingerprint: %w", err)
	}
	a.Operators = principal.OperatorsFromMap(ops)
	return a, nil
}

// InsertSDKToken stores a new SDK token.
func (s *Store) InsertSDKToken(ctx context.Context, t domain.SDKToken, fp []byte) (domain.SDKToken, error) {
	err := s.db.QueryRow(ctx, `INSERT INTO accounts.sdk_tokens (id, client_id, label, fingerprint, hint, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING created_at`,
		t.ID, t.ClientID, t.Label, fp, t.Hint, t.ExpiresAt).Scan(&t.CreatedAt)
	if err != nil {
		return t, fmt.Errorf("insert sdk token: %w", err)
	}
	return t, nil
}

const tokenColumns = `id::text, client_id::text, label, hint, created_at, expires_at`

func scanToken(row pgx.Row) (domain.SDKToken, error) {
	var t domain.SDKToken
	err := row.Scan(&t.ID, &t.ClientID, &t.Label, &t.Hint, &t.CreatedAt, &t.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, fault.ErrNotFound
	}
	return t, err
}

// ListUsableSDKTokens reads a page of a client's usable SDK tokens, newest first, with the total,
// from one snapshot (pg.Page).
func (s *Store) ListUsableSDKTokens(ctx context.Context, clientID string, limit, offset int64) ([]domain.SDKToken, int64, error) {
	q := pg.PageQuery{
		Columns: tokenColumns,
		From:    `FROM accounts.sdk_tokens WHERE client_id = $1 AND ` + usable,
		Order:   `created_at DESC, sdk_tokens.id`,
		Args:    []any{clientID},
	}
	out, total, err := pg.Page(ctx, s.db, q, limit, offset, scanToken)
	if err != nil {
		return nil, 0, fmt.Errorf("list sdk tokens: %w", err)
	}
	return out, total, nil
}

// RevokeSDKToken stops a usable token of a client at once, tells the principal caches
// (queueNotice), and returns the token as it was; another client's token, or one already
// stopped, is ErrNotFound.
func (s *Store) RevokeSDKToken(ctx context.Context, clientID, tokenID string) (domain.SDKToken, error) {
	var t domain.SDKToken
	var scanErr error
	b := &pgx.Batch{}
	b.Queue(`UPDATE accounts.sdk_tokens SET revoked_at = now()
		WHERE client_id = $1 AND id = $2 AND `+usable+` RETURNING `+tokenColumns, clientID, tokenID).QueryRow(func(row pgx.Row) error {
		t, scanErr = scanToken(row)
		if errors.Is(scanErr, fault.ErrNotFound) {
			return nil // told below; a notice for nothing changed is harmless
		}
		return scanErr
	})
	queueNotice(b, principals.SDKTokenNotice(clientID, tokenID))
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return t, fmt.Errorf("revoke sdk token: %w", err)
	}
	return t, scanErr
}

// seconds is a remaining lifetime read as seconds (NULL: none).
func seconds(v *float64) *time.Duration {
	if v == nil {
		return nil
	}
	d := time.Duration(*v * float64(time.Second))
	return &d
}
