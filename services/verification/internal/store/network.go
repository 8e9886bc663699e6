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
// second callback with it finds nothing. A session past its expiry is not claimed, nor one of
// another source (the facade's sessions have a callback of their own). fault.ErrNotFound when
// none.
func (st *Store) ClaimAuthorization(ctx context.Context, stateHash []byte, sources []string) (domain.Session, error) {
	var s domain.Session
	err := st.db.QueryRow(ctx, `UPDATE verification.sessions SET state_hash = NULL
		WHERE state_hash = $1 AND source = ANY ($2) AND status = 'AUTHORIZATION_PENDING' AND expires_at > now()
		RETURNING id::text, client_id::text, source, method, operator_id, status, oauth_sealed, created_at, expires_at`, stateHash, sources).
		Scan(&s.ID, &s.ClientID, &s.Source, &s.Method, &s.OperatorID, &s.Status, &s.OAuthSealed, &s.CreatedAt, &s.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, fault.ErrNotFound
	}
	if err != nil {
		return s, fmt.Errorf("claim authorization: %w", err)
	}
	return s, nil
}

// CompleteAuthorization records what a claimed authorization gave a session: its status
// (CAPTURED with the sealed access token, or NO_NETWORK_IDENTITY without).
func (st *Store) CompleteAuthorization(ctx context.Context, sessionID string, status domain.Status, sealedToken []byte, tokenExpires *time.Time) error {
	_, err := st.db.Exec(ctx, `UPDATE verification.sessions SET status = $2, oauth_sealed = $3, token_expires_at = $4
		WHERE id = $1 AND status = 'AUTHORIZATION_PENDING'`, sessionID, status, sealedToken, tokenExpires)
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
