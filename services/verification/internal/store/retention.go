package store

import (
	"context"
	"time"

	"github.com/mnvhq/mnv/services/platform/pg"
)

// The purges of retention, judged by the database clock. Each removes up to limit rows past
// their time in one statement, taking them with SKIP LOCKED (a row a request holds waits for
// the next round), and returns how many it removed. Verifications, the counterpart of ledger
// charges, and the reveal audit are never purged.

// PurgeTransactions deletes browser transactions that expired more than age ago. A STUCK_PLUS
// transaction whose capture made a stuck-plus session stays with that session (it holds no
// number: the session does).
func (st *Store) PurgeTransactions(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return pg.Purge(ctx, st.db, "browser transactions", `DELETE FROM verification.transactions t USING (
			SELECT id FROM verification.transactions x WHERE expires_at < now() - make_interval(secs => $1)
				AND NOT EXISTS (SELECT 1 FROM verification.stuck_plus_sessions s WHERE s.transaction_id = x.id)
			ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) old
		WHERE t.id = old.id`, age, limit)
}

// PurgeSessions deletes capture sessions that expired more than age ago, unless a verification
// (the record of a charge or a decision) or a remaining transaction references them. A blob of
// a purged session is then as unknown as a forged one.
func (st *Store) PurgeSessions(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return pg.Purge(ctx, st.db, "capture sessions", `DELETE FROM verification.sessions s USING (
			SELECT id FROM verification.sessions x WHERE expires_at < now() - make_interval(secs => $1)
				AND NOT EXISTS (SELECT 1 FROM verification.verifications v WHERE v.session_id = x.id)
				AND NOT EXISTS (SELECT 1 FROM verification.transactions t WHERE t.session_id = x.id)
			ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) old
		WHERE s.id = old.id`, age, limit)
}

// DropStuckPlusNumbers removes the sealed number (and its hash) of stuck-plus sessions created
// more than age ago. The session, its masked number and its reveal audit stay; a reveal is then
// ErrNumberNotKept.
func (st *Store) DropStuckPlusNumbers(ctx context.Context, age time.Duration, limit int) (int64, error) {
	return pg.Purge(ctx, st.db, "stuck-plus numbers", `UPDATE verification.stuck_plus_sessions s SET number_sealed = NULL, number_hash = NULL
		FROM (SELECT id FROM verification.stuck_plus_sessions WHERE created_at < now() - make_interval(secs => $1) AND number_sealed IS NOT NULL
			ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED) old
		WHERE s.id = old.id`, age, limit)
}
