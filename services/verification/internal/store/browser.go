package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
)

// InsertTransaction stores a new browser flow, and maps its id (the browser's capability, which
// it brings alone) to its client in the same transaction.
func (st *Store) InsertTransaction(ctx context.Context, t domain.Transaction) (domain.Transaction, error) {
	key, err := uuidKey(t.ID)
	if err != nil {
		return t, fmt.Errorf("insert transaction: malformed id %q", t.ID)
	}
	b := &pgx.Batch{}
	queueLookup(b, lookupTransaction, key, t.ClientID, nil)
	b.Queue(`INSERT INTO verification.transactions (id, client_id, service_code, metadata_id, features, operators, status, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING created_at`,
		t.ID, t.ClientID, t.ServiceCode, t.MetadataID, t.Features, storedOperatorsOf(t.Operators), t.Status, t.ExpiresAt).
		QueryRow(func(row pgx.Row) error { return row.Scan(&t.CreatedAt) })
	if err := st.sendBatch(ctx, b); err != nil {
		return t, fmt.Errorf("insert transaction: %w", err)
	}
	return t, nil
}

// storedOperators is the form of transactions.operators.
type storedOperators struct {
	Default bool                `json:"default,omitempty"`
	Grants  map[string][]string `json:"grants,omitempty"`
}

func storedOperatorsOf(o principal.Operators) storedOperators {
	if o.Default {
		return storedOperators{Default: true}
	}
	return storedOperators{Grants: o.Map()}
}

// operators reads transactions.operators; NULL is a row from before operators were enabled per
// client, which every client's enablement then was.
func (s *storedOperators) operators() principal.Operators {
	switch {
	case s == nil:
		return principal.LegacyOperators()
	case s.Default:
		return principal.DefaultOperators()
	case s.Grants == nil:
		return principal.Operators{}
	}
	return principal.OperatorsFromMap(s.Grants)
}

const transactionColumns = `id::text, client_id::text, service_code, metadata_id, features, operators, status, operator_id,
	session_id::text, blob, stuck_plus_session_id::text, return_url, code_challenge, completion_hash, created_at, expires_at`

func scanTransaction(row pgx.Row) (domain.Transaction, error) {
	var t domain.Transaction
	var ops *storedOperators
	err := row.Scan(&t.ID, &t.ClientID, &t.ServiceCode, &t.MetadataID, &t.Features, &ops, &t.Status, &t.OperatorID,
		&t.SessionID, &t.Blob, &t.StuckPlusSessionID, &t.ReturnURL, &t.CodeChallenge, &t.CompletionHash, &t.CreatedAt, &t.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, fault.ErrNotFound
	}
	if err != nil {
		return t, fmt.Errorf("read transaction: %w", err)
	}
	t.Operators = ops.operators()
	return t, nil
}

// GetTransaction reads a transaction of a client.
func (st *Store) GetTransaction(ctx context.Context, clientID, id string) (domain.Transaction, error) {
	return scanTransaction(st.db.QueryRow(ctx, `SELECT `+transactionColumns+` FROM verification.transactions
		WHERE id = $1 AND client_id = $2`, id, clientID))
}

// TransactionClient returns the client a transaction belongs to, whatever its state, from its
// id alone (the browser's capability): fault.ErrNotFound for an unknown one.
func (st *Store) TransactionClient(ctx context.Context, id string) (string, error) {
	return st.clientOfID(ctx, lookupTransaction, id)
}

// LockTransaction reads a client's transaction (the client its id maps to: TransactionClient)
// and, inside a transaction, locks it until that ends.
func (st *Store) LockTransaction(ctx context.Context, clientID, id string) (domain.Transaction, error) {
	return scanTransaction(st.db.QueryRow(ctx, `SELECT `+transactionColumns+` FROM verification.transactions
		WHERE client_id = $1 AND id = $2 FOR UPDATE`, clientID, id))
}

// LockSessionTransaction reads the transaction of a client's session and, inside a
// transaction, locks it until that ends. fault.ErrNotFound when the session has none.
func (st *Store) LockSessionTransaction(ctx context.Context, clientID, sessionID string) (domain.Transaction, error) {
	return scanTransaction(st.db.QueryRow(ctx, `SELECT `+transactionColumns+` FROM verification.transactions
		WHERE session_id = $1 AND client_id = $2 FOR UPDATE`, sessionID, clientID))
}

// CompleteCapture records what a capture gave a transaction: its outcome, or the authorization
// it waits for (AUTHORIZATION_PENDING, then the callback's completion code), or, when that
// authorization could not finish, the transaction as it was before (PENDING, no session: not
// captured).
func (st *Store) CompleteCapture(ctx context.Context, t domain.Transaction) error {
	_, err := st.db.Exec(ctx, `UPDATE verification.transactions SET status = $2, operator_id = $3, session_id = $4,
		blob = $5, stuck_plus_session_id = $6, return_url = $7, code_challenge = $8, completion_hash = $9,
		captured_at = CASE WHEN $2 = 'PENDING' THEN NULL ELSE now() END WHERE client_id = $10 AND id = $1`,
		t.ID, t.Status, t.OperatorID, t.SessionID, t.Blob, t.StuckPlusSessionID, t.ReturnURL, t.CodeChallenge, t.CompletionHash, t.ClientID)
	if err != nil {
		return fmt.Errorf("complete capture: %w", err)
	}
	return nil
}

// InsertStuckPlusSession stores a captured stuck-plus number (sealed).
func (st *Store) InsertStuckPlusSession(ctx context.Context, s domain.StuckPlusSession, hash []byte) error {
	_, err := st.db.Exec(ctx, `INSERT INTO verification.stuck_plus_sessions
		(id, client_id, transaction_id, metadata_id, operator_id, number_sealed, number_hash, number_masked)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		s.ID, s.ClientID, s.TransactionID, s.MetadataID, s.OperatorID, s.NumberSealed, hash, s.NumberMasked)
	if err != nil {
		return fmt.Errorf("insert stuck-plus session: %w", err)
	}
	return nil
}

const stuckPlusColumns = `id::text, client_id::text, transaction_id::text, metadata_id, operator_id,
	number_sealed, number_masked, created_at, revealed_at`

func scanStuckPlus(row pgx.Row) (domain.StuckPlusSession, error) {
	var s domain.StuckPlusSession
	err := row.Scan(&s.ID, &s.ClientID, &s.TransactionID, &s.MetadataID, &s.OperatorID,
		&s.NumberSealed, &s.NumberMasked, &s.CreatedAt, &s.RevealedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, fault.ErrNotFound
	}
	if err != nil {
		return s, fmt.Errorf("read stuck-plus session: %w", err)
	}
	return s, nil
}

// ListStuckPlusSessions reads a page of a client's stuck-plus sessions, newest first, with its
// total, from one snapshot (pg.Page).
func (st *Store) ListStuckPlusSessions(ctx context.Context, clientID string, limit, offset int64) (domain.Page[domain.StuckPlusSession], error) {
	var p domain.Page[domain.StuckPlusSession]
	var err error
	p.Items, p.Total, err = pg.Page(ctx, st.db, pg.PageQuery{
		Columns: stuckPlusColumns,
		From:    `FROM verification.stuck_plus_sessions WHERE client_id = $1`,
		Order:   "created_at DESC, stuck_plus_sessions.id",
		Args:    []any{clientID},
	}, limit, offset, scanStuckPlus)
	if err != nil {
		return p, fmt.Errorf("list stuck-plus sessions: %w", err)
	}
	return p, nil
}

// LockStuckPlusSession reads a client's stuck-plus session and locks it: reveals of one
// session are serialised, so exactly one of them is the first. ErrNumberNotKept: the session's
// number was dropped after its retention.
func (st *Store) LockStuckPlusSession(ctx context.Context, clientID, id string) (domain.StuckPlusSession, error) {
	s, err := scanStuckPlus(st.db.QueryRow(ctx, `SELECT `+stuckPlusColumns+` FROM verification.stuck_plus_sessions
		WHERE id = $1 AND client_id = $2 FOR UPDATE`, id, clientID))
	if err == nil && s.NumberSealed == nil {
		return s, domain.ErrNumberNotKept
	}
	return s, err
}

// CountReveals counts the reveals of a session, refused ones aside. Called under the
// session's lock (in a statement after the lock's, so it sees the reveals committed while it
// waited), it numbers the next reveal.
func (st *Store) CountReveals(ctx context.Context, clientID, sessionID string) (int, error) {
	var n int
	if err := st.db.QueryRow(ctx, `SELECT count(*) FROM verification.stuck_plus_reveals
		WHERE client_id = $1 AND session_id = $2 AND status <> 'REJECTED'`, clientID, sessionID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count reveals: %w", err)
	}
	return n, nil
}

const revealColumns = `id::text, client_id::text, session_id::text, coalesce(key_id::text, ''), coalesce(person_id::text, ''),
	reason, charged, status, coalesce(reference, ''), unheard, created_at`

func scanReveal(row pgx.Row) (domain.Reveal, error) {
	var r domain.Reveal
	err := row.Scan(&r.ID, &r.ClientID, &r.SessionID, &r.KeyID, &r.PersonID, &r.Reason, &r.Charged, &r.Status, &r.Reference, &r.Unheard, &r.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fault.ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("read reveal: %w", err)
	}
	return r, nil
}

// OpenReveals reads a session's reveals that are PENDING or unheard.
func (st *Store) OpenReveals(ctx context.Context, clientID, sessionID string) ([]domain.Reveal, error) {
	rows, err := st.db.Query(ctx, `SELECT `+revealColumns+` FROM verification.stuck_plus_reveals
		WHERE client_id = $1 AND session_id = $2 AND (status = 'PENDING' OR unheard) ORDER BY created_at`, clientID, sessionID)
	if err != nil {
		return nil, fmt.Errorf("open reveals: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.Reveal, error) { return scanReveal(r) })
	if err != nil {
		return nil, fmt.Errorf("open reveals: %w", err)
	}
	return out, nil
}

// HearReveal marks a client's unheard reveal heard: its request's retry was answered with it.
func (st *Store) HearReveal(ctx context.Context, clientID, id string) error {
	if _, err := st.db.Exec(ctx, `UPDATE verification.stuck_plus_reveals SET unheard = false WHERE client_id = $1 AND id = $2`,
		clientID, id); err != nil {
		return fmt.Errorf("hear reveal: %w", err)
	}
	return nil
}

// RecordReveal writes the audit row of a reveal as r.Status says: PENDING until its charge
// settles, or SETTLED (free) at once, which marks the session revealed (the first time).
func (st *Store) RecordReveal(ctx context.Context, r domain.Reveal) (domain.Reveal, error) {
	var ref *string
	if r.Reference != "" {
		ref = &r.Reference
	}
	err := st.db.QueryRow(ctx, `INSERT INTO verification.stuck_plus_reveals (id, client_id, session_id, key_id, person_id, reason, charged, status, reference)
		VALUES ($1, $2, $3, nullif($4, '')::uuid, nullif($5, '')::uuid, $6, $7, $8, $9) RETURNING created_at`,
		r.ID, r.ClientID, r.SessionID, r.KeyID, r.PersonID, r.Reason, r.Charged, r.Status, ref).Scan(&r.CreatedAt)
	if err != nil {
		return r, fmt.Errorf("record reveal: %w", err)
	}
	if r.Status == domain.RevealSettled {
		return r, st.markRevealed(ctx, r.ClientID, r.SessionID, r.CreatedAt)
	}
	return r, nil
}

func (st *Store) markRevealed(ctx context.Context, clientID, sessionID string, at time.Time) error {
	if _, err := st.db.Exec(ctx, `UPDATE verification.stuck_plus_sessions SET revealed_at = $3
		WHERE client_id = $1 AND id = $2 AND revealed_at IS NULL`, clientID, sessionID, at); err != nil {
		return fmt.Errorf("mark revealed: %w", err)
	}
	return nil
}

// SettleReveal records the charge of a client's PENDING reveal (unheard, when its request is
// not there to hear it) and marks its session revealed, in one statement, and answers the
// reveal's status after it: SETTLED, or REJECTED when it was refused before (nothing written
// then).
func (st *Store) SettleReveal(ctx context.Context, clientID, id string, charged int64, unheard bool) (status domain.RevealStatus, err error) {
	err = st.db.QueryRow(ctx, `WITH r AS (
			UPDATE verification.stuck_plus_reveals SET status = 'SETTLED', charged = $3, unheard = $4
			WHERE client_id = $1 AND id = $2 AND status = 'PENDING' RETURNING session_id, created_at),
		s AS (
			UPDATE verification.stuck_plus_sessions s SET revealed_at = coalesce(s.revealed_at, r.created_at)
			FROM r WHERE s.client_id = $1 AND s.id = r.session_id)
		SELECT coalesce((SELECT 'SETTLED' FROM r),
			(SELECT status FROM verification.stuck_plus_reveals WHERE client_id = $1 AND id = $2), '')`,
		clientID, id, charged, unheard).Scan(&status)
	if err != nil {
		return "", fmt.Errorf("settle reveal: %w", err)
	}
	if status == "" {
		return "", fmt.Errorf("settle reveal %s: %w", id, fault.ErrNotFound)
	}
	return status, nil
}

// RejectReveal marks a client's PENDING reveal REJECTED (its charge refused: it is no reveal,
// and out of the audit); rejected is false when it was no longer PENDING.
func (st *Store) RejectReveal(ctx context.Context, clientID, id string) (rejected bool, err error) {
	tag, err := st.db.Exec(ctx, `UPDATE verification.stuck_plus_reveals SET status = 'REJECTED'
		WHERE client_id = $1 AND id = $2 AND status = 'PENDING'`, clientID, id)
	if err != nil {
		return false, fmt.Errorf("reject reveal: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// StaleReveals reads up to limit reveals PENDING since before, oldest first, that no other
// transaction holds, and holds them until the transaction ends. The candidates are found across
// clients without a lock (a sweep may read every client's rows), then each is taken by its
// client and id (docs/operations.md#past-one-postgresql).
func (st *Store) StaleReveals(ctx context.Context, before time.Time, limit int) ([]domain.Reveal, error) {
	rows, err := st.db.Query(ctx, `SELECT client_id::text, id::text FROM verification.stuck_plus_reveals
		WHERE status = 'PENDING' AND created_at < $1 ORDER BY created_at LIMIT $2`, before, limit)
	if err != nil {
		return nil, fmt.Errorf("stale reveals: %w", err)
	}
	keys, err := pgx.CollectRows(rows, scanRowKey)
	if err != nil {
		return nil, fmt.Errorf("stale reveals: %w", err)
	}
	out, err := lockEach(ctx, st, keys, `SELECT `+revealColumns+` FROM verification.stuck_plus_reveals
		WHERE client_id = $1 AND id = $2 AND status = 'PENDING' FOR UPDATE SKIP LOCKED`, scanReveal)
	if err != nil {
		return nil, fmt.Errorf("stale reveals: %w", err)
	}
	return out, nil
}

// ListReveals reads a page of a client's reveal audit, newest first, with its total, from one
// snapshot (pg.Page).
func (st *Store) ListReveals(ctx context.Context, clientID string, limit, offset int64) (domain.Page[domain.Reveal], error) {
	var p domain.Page[domain.Reveal]
	var err error
	p.Items, p.Total, err = pg.Page(ctx, st.db, pg.PageQuery{
		Columns: revealColumns,
		From:    `FROM verification.stuck_plus_reveals WHERE client_id = $1 AND status = 'SETTLED'`,
		Order:   "created_at DESC, stuck_plus_reveals.id",
		Args:    []any{clientID},
	}, limit, offset, scanReveal)
	if err != nil {
		return p, fmt.Errorf("list reveals: %w", err)
	}
	return p, nil
}
