package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The purges of retention, judged by the database clock. Each removes up to limit rows past
// their time and returns how many it removed. A purge is a sweep across clients: it finds its
// candidates without a lock, oldest first, then removes them with one statement per client, in
// one batch, taking them with SKIP LOCKED (a row a request holds waits for the next round) and
// checking again what made them candidates (docs/operations.md#past-one-postgresql).
// Verifications, the counterpart of ledger charges, and the reveal audit are never purged.

// sweep finds the candidates of a purge (candidates: $1 the age in seconds, $2 the limit;
// answers client_id and id) and runs remove ($1 a client, $2 its candidates' ids, $3 the age)
// for each client of them.
func (st *Store) sweep(ctx context.Context, what, candidates, remove string, age time.Duration, limit int) (int64, error) {
	rows, err := st.db.Query(ctx, candidates, age.Seconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("purge %s: %w", what, err)
	}
	keys, err := pgx.CollectRows(rows, scanRowKey)
	if err != nil {
		return 0, fmt.Errorf("purge %s: %w", what, err)
	}
	n, err := eachClient(ctx, st, keys, remove, age.Seconds())
	if err != nil {
		return 0, fmt.Errorf("purge %s: %w", what, err)
	}
	return n, nil
}

// DropWorkflowNumbers drops the sealed number and its hash of workflows that ended more than
// age ago (a final workflow never needs its number again: no code, no SMS, no step is left).
func (st *Store) DropWorkflowNumbers(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return st.sweep(ctx, "workflow numbers", `SELECT client_id::text, id::text FROM verification.workflows
		WHERE ended_at < now() - make_interval(secs => $1) AND number_sealed IS NOT NULL
		ORDER BY ended_at LIMIT $2`, `UPDATE verification.workflows w SET number_sealed = NULL, number_hash = NULL
		FROM (SELECT id FROM verification.workflows
			WHERE client_id = $1 AND id = ANY ($2::text[]::uuid[]) AND ended_at < now() - make_interval(secs => $3)
				AND number_sealed IS NOT NULL AND status <> 'IN_PROGRESS'
			FOR UPDATE SKIP LOCKED) old
		WHERE w.client_id = $1 AND w.id = old.id`, age, limit)
}

// PurgeTransactions deletes browser transactions that expired more than age ago, with the
// lookups of their ids. A STUCK_PLUS transaction whose capture made a stuck-plus session stays
// with that session (it holds no number: the session does), and so does its lookup.
func (st *Store) PurgeTransactions(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return st.sweep(ctx, "browser transactions", `SELECT client_id::text, id::text FROM verification.transactions x
		WHERE expires_at < now() - make_interval(secs => $1)
			AND NOT EXISTS (SELECT 1 FROM verification.stuck_plus_sessions s WHERE s.client_id = x.client_id AND s.transaction_id = x.id)
		ORDER BY expires_at LIMIT $2`, `WITH d AS (
			DELETE FROM verification.transactions t WHERE t.client_id = $1 AND t.id IN (
				SELECT id FROM verification.transactions x
				WHERE x.client_id = $1 AND x.id = ANY ($2::text[]::uuid[]) AND x.expires_at < now() - make_interval(secs => $3)
					AND NOT EXISTS (SELECT 1 FROM verification.stuck_plus_sessions s WHERE s.client_id = $1 AND s.transaction_id = x.id)
				FOR UPDATE SKIP LOCKED)
			RETURNING t.id),
		l AS (
			DELETE FROM verification.client_lookups WHERE kind = '`+lookupTransaction+`' AND key IN (SELECT uuid_send(id) FROM d))
		SELECT id FROM d`, age, limit)
}

// PurgeSessions deletes capture sessions that expired more than age ago, unless a verification
// (the record of a charge or a decision) or a remaining transaction references them; their
// CAMARA requests and tokens go with them (ON DELETE CASCADE). A blob of a purged session is
// then as unknown as a forged one. The lookups that expired more than age ago go too (OAuth
// states, CAMARA request ids and tokens: their rows are gone or no longer usable), up to
// lookupsPerSession times limit of them: a plain delete by expiry of the coordinator's own
// table.
func (st *Store) PurgeSessions(ctx context.Context, age time.Duration, limit int) (int64, error) {
	n, err := st.sweep(ctx, "capture sessions", `SELECT client_id::text, id::text FROM verification.sessions x
		WHERE expires_at < now() - make_interval(secs => $1)
			AND NOT EXISTS (SELECT 1 FROM verification.verifications v WHERE v.client_id = x.client_id AND v.session_id = x.id)
			AND NOT EXISTS (SELECT 1 FROM verification.transactions t WHERE t.client_id = x.client_id AND t.session_id = x.id)
		ORDER BY expires_at LIMIT $2`, `DELETE FROM verification.sessions s WHERE s.client_id = $1 AND s.id IN (
			SELECT id FROM verification.sessions x
			WHERE x.client_id = $1 AND x.id = ANY ($2::text[]::uuid[]) AND x.expires_at < now() - make_interval(secs => $3)
				AND NOT EXISTS (SELECT 1 FROM verification.verifications v WHERE v.client_id = $1 AND v.session_id = x.id)
				AND NOT EXISTS (SELECT 1 FROM verification.transactions t WHERE t.client_id = $1 AND t.session_id = x.id)
			FOR UPDATE SKIP LOCKED)`, age, limit)
	if err != nil {
		return n, err
	}
	if _, err := st.db.Exec(ctx, `DELETE FROM verification.client_lookups WHERE (kind, key) IN (
			SELECT kind, key FROM verification.client_lookups WHERE expires_at < now() - make_interval(secs => $1)
			ORDER BY expires_at LIMIT $2)`, age.Seconds(), lookupsPerSession*limit); err != nil {
		return n, fmt.Errorf("purge expired lookups: %w", err)
	}
	return n, nil
}

// lookupsPerSession is how many lookups a capture session leads to at most: its OAuth state, and
// a CAMARA session's request and token.
const lookupsPerSession = 3

// DropStuckPlusNumbers removes the sealed number (and its hash) of stuck-plus sessions created
// more than age ago. The session, its masked number and its reveal audit stay; a reveal is then
// ErrNumberNotKept.
func (st *Store) DropStuckPlusNumbers(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return st.sweep(ctx, "stuck-plus numbers", `SELECT client_id::text, id::text FROM verification.stuck_plus_sessions
		WHERE created_at < now() - make_interval(secs => $1) AND number_sealed IS NOT NULL
		ORDER BY created_at LIMIT $2`, `UPDATE verification.stuck_plus_sessions s SET number_sealed = NULL, number_hash = NULL
		FROM (SELECT id FROM verification.stuck_plus_sessions
			WHERE client_id = $1 AND id = ANY ($2::text[]::uuid[]) AND created_at < now() - make_interval(secs => $3)
				AND number_sealed IS NOT NULL
			FOR UPDATE SKIP LOCKED) old
		WHERE s.client_id = $1 AND s.id = old.id`, age, limit)
}
