package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
)

// ClaimAuthorization takes the pending NETWORK_API authorization of a session of one of sources
// whose state hashes to stateHash, once: the state is cleared in the same statement, so a
// second callback with it finds nothing. The operator's redirect brings the state alone: its
// client is the one the state maps to (client_lookups; the lookup stays until it expires with
// the session, and leads to no pending state once claimed). A session past its expiry is not
// claimed, nor one of another source (the facade's sessions have a callback of their own).
// fault.ErrNotFound when none.
func (st *Store) ClaimAuthorization(ctx context.Context, stateHash []byte, sources []string) (domain.Session, error) {
	var s domain.Session
	clientID, err := st.clientOf(ctx, lookupState, stateHash)
	if err != nil {
		return s, err
	}
	err = st.db.QueryRow(ctx, `UPDATE verification.sessions SET state_hash = NULL
		WHERE client_id = $1 AND state_hash = $2 AND source = ANY ($3) AND status = 'AUTHORIZATION_PENDING' AND expires_at > now()
		RETURNING id::text, client_id::text, source, method, operator_id, status, oauth_sealed, created_at, expires_at`,
		clientID, stateHash, sources).
		Scan(&s.ID, &s.ClientID, &s.Source, &s.Method, &s.OperatorID, &s.Status, &s.OAuthSealed, &s.CreatedAt, &s.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, fault.ErrNotFound
	}
	if err != nil {
		return s, fmt.Errorf("claim authorization: %w", err)
	}
	return s, nil
}

// CompleteAuthorization records what a claimed authorization gave a client's session: its
// status (CAPTURED with the sealed access token, or NO_NETWORK_IDENTITY without).
func (st *Store) CompleteAuthorization(ctx context.Context, clientID, sessionID string, status domain.Status, sealedToken []byte, tokenExpires *time.Time) error {
	_, err := st.db.Exec(ctx, `UPDATE verification.sessions SET status = $3, oauth_sealed = $4, token_expires_at = $5
		WHERE client_id = $1 AND id = $2 AND status = 'AUTHORIZATION_PENDING'`, clientID, sessionID, status, sealedToken, tokenExpires)
	if err != nil {
		return fmt.Errorf("complete authorization: %w", err)
	}
	return nil
}

// GetSession reads a client's session: its method, status, sealed OAuth secret and whether it
// was used. fault.ErrNotFound for no such session of the client.
func (st *Store) GetSession(ctx context.Context, clientID, id string) (domain.Session, error) {
	var s domain.Session
	err := st.db.QueryRow(ctx, `SELECT id::text, client_id::text, source, method, operator_id, status, oauth_sealed,
			created_at, expires_at, used_at
		FROM verification.sessions WHERE id = $1 AND client_id = $2`, id, clientID).
		Scan(&s.ID, &s.ClientID, &s.Source, &s.Method, &s.OperatorID, &s.Status, &s.OAuthSealed, &s.CreatedAt, &s.ExpiresAt, &s.UsedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, fault.ErrNotFound
	}
	if err != nil {
		return s, fmt.Errorf("get session: %w", err)
	}
	return s, nil
}

// RefusedAnswer reads what the operator answered for a client's NETWORK_API session when the
// charge of that answer was then refused (402): the outcome and reason of the latest REJECTED
// NETWORK_API verification of the session for the number whose hash is numberHash. The
// operator's token was spent by that call; its answer is all a retry can have.
// fault.ErrNotFound when there is none.
func (st *Store) RefusedAnswer(ctx context.Context, clientID, sessionID string, numberHash []byte) (outcome domain.Status, reason string, err error) {
	err = st.db.QueryRow(ctx, `SELECT outcome, reason FROM verification.verifications
		WHERE session_id = $1 AND client_id = $2 AND status = 'REJECTED' AND service_type = 'NETWORK_API' AND number_hash = $3
		ORDER BY created_at DESC LIMIT 1`, sessionID, clientID, numberHash).Scan(&outcome, &reason)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", fault.ErrNotFound
	}
	if err != nil {
		return "", "", fmt.Errorf("refused answer: %w", err)
	}
	return outcome, reason, nil
}
