package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/usage"
)

// VerificationUsage reads a client's verifications per UTC day of r, status, operator and
// method (reports.Dimensions), only operator's when it is not nil, in one statement and so one
// snapshot: the days before the roll-up's watermark from usage_days, the others from the
// verifications themselves, along the client's index by time.
func (st *Store) VerificationUsage(ctx context.Context, clientID string, r usage.Range, operator *string) ([]usage.Row, error) {
	rows, err := st.db.Query(ctx, `WITH w AS (
			SELECT coalesce(rolled_until, '-infinity') AS until FROM verification.usage_rollup)
		SELECT day::timestamp, status, operator_id, service_type, count, charged FROM verification.usage_days
		WHERE client_id = $1 AND day >= $2::date AND day < least($3::date, (SELECT until FROM w))
			AND ($4::text IS NULL OR operator_id = $4)
		UNION ALL
		SELECT (created_at AT TIME ZONE 'UTC')::date::timestamp, status, operator_id, service_type, count(*), sum(charged)::bigint
		FROM verification.verifications
		WHERE client_id = $1 AND created_at >= greatest($2::date, (SELECT until FROM w))::timestamp AT TIME ZONE 'UTC'
			AND created_at < $3::date::timestamp AT TIME ZONE 'UTC' AND ($4::text IS NULL OR operator_id = $4)
		GROUP BY 1, 2, 3, 4`, clientID, r.From, r.End(), operator)
	if err != nil {
		return nil, fmt.Errorf("verification usage: %w", err)
	}
	var (
		out                []usage.Row
		day                time.Time
		status, op, method string
		count, charged     int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&day, &status, &op, &method, &count, &charged}, func() error {
		out = append(out, usage.Row{Day: day, Values: []string{status, op, method}, Count: count, Charged: charged})
		return nil
	}); err != nil {
		return nil, fmt.Errorf("verification usage: %w", err)
	}
	return out, nil
}

// RollUpUsage moves the watermark of the usage roll-up forward over at most maxDays days,
// writing every client's rows of those days into usage_days, in the Store's transaction
// (refused outside one). A day is rolled up once it can no longer change:
//   - it ended at least grace ago;
//   - none of its verifications waits for its charge (the unsettled queue lists every PENDING
//     one; a settle or a rejection, late or not, is the last change a verification sees);
//   - no transaction of the service's role on this database that began before its end is
//     still open: a verification's day is its record's transaction start (created_at's
//     now()), so only such a transaction could still add one to it.
//
// The open transactions are read first, and everything else after, in later statements: what
// committed meanwhile is then in their snapshots. It answers the watermark and how many days
// it rolled up (0 when none could be).
func (st *Store) RollUpUsage(ctx context.Context, grace time.Duration, maxDays int) (until time.Time, days int, err error) {
	return st.rollUpDays(ctx, dayRollUp{
		name:      "usage",
		watermark: "verification.usage_rollup",
		start: func(ctx context.Context, rolled *time.Time, bound time.Time) (from *time.Time, _ time.Time, err error) {
			// A day with a verification still waiting for its charge is not rolled up yet.
			err = st.db.QueryRow(ctx, `SELECT least($1::date,
					(SELECT min(recorded_at) AT TIME ZONE 'UTC' FROM verification.unsettled)::date)::timestamp,
					coalesce($2::date, (SELECT min(created_at) AT TIME ZONE 'UTC' FROM verification.verifications)::date)::timestamp`,
				bound, rolled).Scan(&bound, &from)
			return from, bound, err
		},
		insert: `INSERT INTO verification.usage_days (client_id, day, status, operator_id, service_type, count, charged)
			SELECT client_id, (created_at AT TIME ZONE 'UTC')::date, status, operator_id, service_type, count(*), sum(charged)
			FROM verification.verifications
			WHERE created_at >= $1::date::timestamp AT TIME ZONE 'UTC' AND created_at < $2::date::timestamp AT TIME ZONE 'UTC'
			GROUP BY 1, 2, 3, 4, 5`,
	}, grace, maxDays)
}

// dayRollUp is what differs between the usage roll-ups (verifications', workflow steps'): the
// rest of a pass, rollUpDays, is one.
type dayRollUp struct {
	name      string // for errors: "roll up <name>: …"
	watermark string // the one-row table holding rolled_until
	// start answers the first day to roll up (nil: nothing recorded yet) from the watermark
	// (nil: none yet), and the bound, which it may lower for days that must wait.
	start func(ctx context.Context, rolled *time.Time, bound time.Time) (from *time.Time, _ time.Time, err error)
	// insert writes every client's rows of the days [$1, $2) into the roll-up's table.
	insert string
}

// rollUpDays is one pass of a roll-up r, in the Store's transaction (refused outside one): it
// locks the watermark, takes the bound (grace ago, and no earlier than the start of the oldest
// open transaction of the service's role, read first so that what committed meanwhile is in
// the later statements' snapshots), rolls up at most maxDays days from the watermark to the
// bound, and moves the watermark. It answers the watermark and how many days it rolled up.
func (st *Store) rollUpDays(ctx context.Context, r dayRollUp, grace time.Duration, maxDays int) (until time.Time, days int, err error) {
	fail := func(err error) (time.Time, int, error) {
		return until, 0, fmt.Errorf("roll up %s: %w", r.name, err)
	}
	if _, ok := st.db.(pgx.Tx); !ok {
		return fail(pg.ErrNoTx)
	}
	var rolled *time.Time
	if err := st.db.QueryRow(ctx, `SELECT rolled_until::timestamp FROM `+r.watermark+` FOR UPDATE`).Scan(&rolled); err != nil {
		return fail(err)
	}
	// The first read of pg_stat_activity in a transaction takes its copy of the backends.
	var bound time.Time
	if err := st.db.QueryRow(ctx, `SELECT least((now() - make_interval(secs => $1)) AT TIME ZONE 'UTC',
			(SELECT min(xact_start) AT TIME ZONE 'UTC' FROM pg_stat_activity
			 WHERE datname = current_database() AND usename = current_user AND pid <> pg_backend_pid()))::date::timestamp`,
		grace.Seconds()).Scan(&bound); err != nil {
		return fail(err)
	}
	from, bound, err := r.start(ctx, rolled, bound)
	if err != nil {
		return fail(err)
	}
	if from == nil {
		// Nothing recorded yet, nor can be before the bound: the watermark starts there.
		if _, err := st.db.Exec(ctx, `UPDATE `+r.watermark+` SET rolled_until = $1::date`, bound); err != nil {
			return fail(err)
		}
		return bound, 0, nil
	}
	to := from.AddDate(0, 0, maxDays)
	if bound.Before(to) {
		to = bound
	}
	if !to.After(*from) {
		return *from, 0, nil
	}
	if _, err := st.db.Exec(ctx, r.insert, *from, to); err != nil {
		return fail(err)
	}
	if _, err := st.db.Exec(ctx, `UPDATE `+r.watermark+` SET rolled_until = $1::date`, to); err != nil {
		return fail(err)
	}
	return to, int(to.Sub(*from) / (24 * time.Hour)), nil
}
