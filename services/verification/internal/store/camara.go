package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/verification/internal/facade"
)

var _ facade.Store = (*Store)(nil)

const authRequestColumns = `id::text, client_id::text, redirect_uri, state, nonce, scopes, response_mode, code_challenge,
	code_challenge_method, coalesce(session_id::text, ''), blob, created_at, expires_at`

func scanAuthRequest(row pgx.Row) (facade.AuthRequest, error) {
	var a facade.AuthRequest
	err := row.Scan(&a.ID, &a.ClientID, &a.RedirectURI, &a.State, &a.Nonce, &a.Scopes, &a.ResponseMode, &a.CodeChallenge,
		&a.CodeChallengeMethod, &a.SessionID, &a.Blob, &a.CreatedAt, &a.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return a, fault.ErrNotFound
	}
	if err != nil {
		return a, fmt.Errorf("camara auth request: %w", err)
	}
	return a, nil
}

// InsertAuthRequest stores an authorization request, and maps its id (which the provider's
// login callback brings alone) to its client in the same transaction.
func (st *Store) InsertAuthRequest(ctx context.Context, a facade.AuthRequest) error {
	var session any
	if a.SessionID != "" {
		session = a.SessionID
	}
	key, err := uuidKey(a.ID)
	if err != nil {
		return fmt.Errorf("insert camara auth request: malformed id %q", a.ID)
	}
	b := &pgx.Batch{}
	queueLookup(b, lookupCamaraRequest, key, a.ClientID, &a.ExpiresAt)
	b.Queue(`INSERT INTO verification.camara_auth_requests
		(id, client_id, redirect_uri, state, nonce, scopes, response_mode, code_challenge, code_challenge_method,
		 session_id, blob, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		a.ID, a.ClientID, a.RedirectURI, a.State, a.Nonce, a.Scopes, a.ResponseMode, a.CodeChallenge, a.CodeChallengeMethod,
		session, a.Blob, a.CreatedAt, a.ExpiresAt)
	if err := st.sendBatch(ctx, b); err != nil {
		return fmt.Errorf("insert camara auth request: %w", err)
	}
	return nil
}

// AuthRequest reads an unexpired authorization request by its id alone (the client it maps
// to first).
func (st *Store) AuthRequest(ctx context.Context, id string) (facade.AuthRequest, error) {
	clientID, err := st.clientOfID(ctx, lookupCamaraRequest, id)
	if err != nil {
		return facade.AuthRequest{}, err
	}
	return scanAuthRequest(st.db.QueryRow(ctx, `SELECT `+authRequestColumns+` FROM verification.camara_auth_requests
		WHERE client_id = $1 AND id = $2 AND expires_at > now()`, clientID, id))
}

// AuthRequestByCode reads a client's unexpired authorization request whose code has this
// SHA-256.
func (st *Store) AuthRequestByCode(ctx context.Context, clientID string, codeHash []byte) (facade.AuthRequest, error) {
	return scanAuthRequest(st.db.QueryRow(ctx, `SELECT `+authRequestColumns+` FROM verification.camara_auth_requests
		WHERE client_id = $1 AND code_hash = $2 AND expires_at > now()`, clientID, codeHash))
}

// SaveCode records the SHA-256 of a request's code, by the request's id alone (the client it
// maps to first); a request gets one code.
func (st *Store) SaveCode(ctx context.Context, id string, codeHash []byte) error {
	clientID, err := st.clientOfID(ctx, lookupCamaraRequest, id)
	if err != nil {
		return err
	}
	tag, err := st.db.Exec(ctx, `UPDATE verification.camara_auth_requests SET code_hash = $3
		WHERE client_id = $1 AND id = $2 AND code_hash IS NULL AND expires_at > now()`, clientID, id, codeHash)
	if err != nil {
		return fmt.Errorf("save camara code: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fault.ErrNotFound
	}
	return nil
}

// TakeAuthRequest deletes a client's unexpired request and returns it.
func (st *Store) TakeAuthRequest(ctx context.Context, clientID, id string) (facade.AuthRequest, error) {
	return scanAuthRequest(st.db.QueryRow(ctx, `DELETE FROM verification.camara_auth_requests
		WHERE client_id = $1 AND id = $2 AND expires_at > now() RETURNING `+authRequestColumns, clientID, id))
}

// DeleteAuthRequest deletes a request by its id alone (the client it maps to first; nothing
// when it is gone). Its lookup stays until it expires, when the retention purges it.
func (st *Store) DeleteAuthRequest(ctx context.Context, id string) error {
	clientID, err := st.clientOfID(ctx, lookupCamaraRequest, id)
	if errors.Is(err, fault.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := st.db.Exec(ctx, `DELETE FROM verification.camara_auth_requests WHERE client_id = $1 AND id = $2`, clientID, id); err != nil {
		return fmt.Errorf("delete camara auth request: %w", err)
	}
	return nil
}

// CompleteAuthRequest gives the client's unexpired request whose session waited for its
// operator's authorization (no blob yet) the session's blob, once, and returns it.
func (st *Store) CompleteAuthRequest(ctx context.Context, clientID, sessionID, blob string) (facade.AuthRequest, error) {
	return scanAuthRequest(st.db.QueryRow(ctx, `UPDATE verification.camara_auth_requests SET blob = $3
		WHERE client_id = $1 AND session_id = $2 AND blob = '' AND expires_at > now() RETURNING `+authRequestColumns,
		clientID, sessionID, blob))
}

// TakePendingAuthRequest deletes the client's unexpired request whose session waits for its
// operator's authorization and returns it.
func (st *Store) TakePendingAuthRequest(ctx context.Context, clientID, sessionID string) (facade.AuthRequest, error) {
	return scanAuthRequest(st.db.QueryRow(ctx, `DELETE FROM verification.camara_auth_requests
		WHERE client_id = $1 AND session_id = $2 AND blob = '' AND expires_at > now() RETURNING `+authRequestColumns,
		clientID, sessionID))
}

// InsertToken stores an access token, and maps its id (which the API call presents alone, in
// the token) to its client in the same transaction.
func (st *Store) InsertToken(ctx context.Context, t facade.Token) error {
	var session any
	if t.SessionID != "" {
		session = t.SessionID
	}
	key, err := uuidKey(t.ID)
	if err != nil {
		return fmt.Errorf("insert camara token: malformed id %q", t.ID)
	}
	b := &pgx.Batch{}
	queueLookup(b, lookupCamaraToken, key, t.ClientID, &t.ExpiresAt)
	b.Queue(`INSERT INTO verification.camara_tokens
		(id, client_id, session_id, blob, scopes, features, operators, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		t.ID, t.ClientID, session, t.Blob, t.Scopes, t.Features, t.Operators.Map(), t.ExpiresAt)
	if err := st.sendBatch(ctx, b); err != nil {
		return fmt.Errorf("insert camara token: %w", err)
	}
	return nil
}

// Token reads an unexpired, unused access token by its id alone (the client it maps to first).
func (st *Store) Token(ctx context.Context, id string) (facade.Token, error) {
	var t facade.Token
	var ops map[string][]string
	clientID, err := st.clientOfID(ctx, lookupCamaraToken, id)
	if err != nil {
		return t, err
	}
	err = st.db.QueryRow(ctx, `SELECT id::text, client_id::text, coalesce(session_id::text, ''), blob, scopes, features, operators, expires_at
		FROM verification.camara_tokens WHERE client_id = $1 AND id = $2 AND used_at IS NULL AND expires_at > now()`, clientID, id).
		Scan(&t.ID, &t.ClientID, &t.SessionID, &t.Blob, &t.Scopes, &t.Features, &ops, &t.ExpiresAt)
	t.Operators = principal.OperatorsFromMap(ops)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, fault.ErrNotFound
	}
	if err != nil {
		return t, fmt.Errorf("camara token: %w", err)
	}
	return t, nil
}

// UseToken marks a client's unexpired, unused token used.
func (st *Store) UseToken(ctx context.Context, clientID, id string) (bool, error) {
	tag, err := st.db.Exec(ctx, `UPDATE verification.camara_tokens SET used_at = now()
		WHERE client_id = $1 AND id = $2 AND used_at IS NULL AND expires_at > now()`, clientID, id)
	if err != nil {
		return false, fmt.Errorf("use camara token: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// ProviderKeys reads the provider's sealed keys.
func (st *Store) ProviderKeys(ctx context.Context) (string, []byte, error) {
	var id string
	var sealed []byte
	err := st.db.QueryRow(ctx, `SELECT key_id, keys_sealed FROM verification.camara_keys WHERE id = 'provider'`).Scan(&id, &sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil, fault.ErrNotFound
	}
	if err != nil {
		return "", nil, fmt.Errorf("camara keys: %w", err)
	}
	return id, sealed, nil
}

// InsertProviderKeys writes the provider's keys unless a replica did first.
func (st *Store) InsertProviderKeys(ctx context.Context, keyID string, sealed []byte) error {
	if _, err := st.db.Exec(ctx, `INSERT INTO verification.camara_keys (id, key_id, keys_sealed) VALUES ('provider', $1, $2)
		ON CONFLICT (id) DO NOTHING`, keyID, sealed); err != nil {
		return fmt.Errorf("insert camara keys: %w", err)
	}
	return nil
}
