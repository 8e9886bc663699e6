package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/usage"
)

// SpendUsage reads a client's ledger per UTC day of r and kind (reports.Dimensions), credits
// taken and given apart, in one statement and so one snapshot: the days before the roll-up's
// watermark from spend_days, the others from the ledger's entries after its tail_seq, along
// the ledger's key (client_id, seq).
func (s *Store) SpendUsage(ctx context.Context, clientID string, r usage.Range) ([]usage.Row, error) {
	rows, err := s.db.Query(ctx, `WITH w AS (
			SELECT coalesce(rolled_until, '-infinity') AS until, tail_seq FROM accounts.spend_rollup)
		SELECT day::timestamp, kind, count, charged, credited FROM accounts.spend_days
		WHERE client_id = $1 AND day >= $2::date AND day < least($3::date, (SELECT until FROM w))
		UNION ALL
		SELECT (created_at AT TIME ZONE 'UTC')::date::timestamp, kind, count(*),
			sum(greatest(-amount, 0))::bigint, sum(greatest(amount, 0))::bigint
		FROM accounts.ledger
		WHERE client_id = $1 AND seq > (SELECT tail_seq FROM w)
			AND created_at >= greatest($2::date, (SELECT until FROM w))::timestamp AT TIME ZONE 'UTC'
			AND created_at < $3::date::timestamp AT TIME ZONE 'UTC'
		GROUP BY 1, 2`, clientID, r.From, r.End())
	if err != nil {
		return nil, fmt.Errorf("spend usage: %w", err)
	}
	var (
		out                      []usage.Row
		day                      time.Time
		kind                     string
		count, charged, credited int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&day, &kind, &count, &charged, &credited}, func() error {
		out = append(out, usage.Row{Day: day, Values: []string{kind}, Count: count, Charged: charged, Credited: credited})
		return nil
	}); err != nil {
		return nil, fmt.Errorf("spend usage: %w", err)
	}
	return out, nil
}

// RollUpSpend moves the watermark of the spend roll-up forward over at most maxDays days,
// writing every client's rows of those days into spend_days, in the Store's transaction
// (refused outside one). A day is rolled up once it ended at least grace ago and no
// transaction of the service's role on this database that began before its end is still open:
// an entry's day is its transaction's start (created_at's now()), so only such a transaction
// could still append to it. The open transactions are read first, the ledger after, in later
// statements, whose snapshots hold what committed meanwhile.
//
// Each pass first marks the ledger's sequence (spend_marks): its value, then the time. An entry
// of a transaction begun after that time takes a higher seq. The watermark's tail_seq is the
// newest mark at or before it, so every entry from the watermark on is above it; with none yet
// (the first day after the upgrade) it stays where it was, which is below still.
func (s *Store) RollUpSpend(ctx context.Context, grace time.Duration, maxDays int) (until time.Time, days int, err error) {
	if _, ok := s.db.(pgx.Tx); !ok {
		return until, 0, fmt.Errorf("roll up spend: %w", pg.ErrNoTx)
	}
	fail := func(err error) (time.Time, int, error) { return time.Time{}, 0, fmt.Errorf("roll up spend: %w", err) }
	var rolled *time.Time
	if err := s.db.QueryRow(ctx, `SELECT rolled_until::timestamp FROM accounts.spend_rollup FOR UPDATE`).Scan(&rolled); err != nil {
		return fail(err)
	}
	// The first read of pg_stat_activity in a transaction takes its copy of the backends.
	var bound time.Time
	if err := s.db.QueryRow(ctx, `SELECT least((now() - make_interval(secs => $1)) AT TIME ZONE 'UTC',
			(SELECT min(xact_start) AT TIME ZONE 'UTC' FROM pg_stat_activity
			 WHERE datname = current_database() AND usename = current_user AND pid <> pg_backend_pid()))::date::timestamp`,
		grace.Seconds()).Scan(&bound); err != nil {
		return fail(err)
	}
	var last *int64
	if err := s.db.QueryRow(ctx, `SELECT pg_sequence_last_value(pg_get_serial_sequence('accounts.ledger', 'seq'))`).Scan(&last); err != nil {
		return fail(err)
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO accounts.spend_marks (taken_at, seq) VALUES (clock_timestamp(), $1) ON CONFLICT DO NOTHING`,
		func() int64 {
			if last == nil {
				return 0
			}
			return *last
		}()); err != nil {
		return fail(err)
	}
	from := rolled
	if from == nil {
		if err := s.db.QueryRow(ctx, `SELECT coalesce((SELECT min(created_at) AT TIME ZONE 'UTC' FROM accounts.ledger)::date, $1::date)::timestamp`,
			bound).Scan(&from); err != nil {
			return fail(err)
		}
	}
	to := from.AddDate(0, 0, maxDays)
	if bound.Before(to) {
		to = bound
	}
	b := &pgx.Batch{}
	days = 0
	if to.After(*from) {
		days = int(to.Sub(*from) / (24 * time.Hour))
		b.Queue(`INSERT INTO accounts.spend_days (client_id, day, kind, count, charged, credited)
			SELECT client_id, (created_at AT TIME ZONE 'UTC')::date, kind, count(*), sum(greatest(-amount, 0)), sum(greatest(amount, 0))
			FROM accounts.ledger
			WHERE created_at >= $1::date::timestamp AT TIME ZONE 'UTC' AND created_at < $2::date::timestamp AT TIME ZONE 'UTC'
			GROUP BY 1, 2, 3`, *from, to)
	} else {
		// Nothing to write: the watermark stays (or, with no entry yet, starts at the bound,
		// before which none can come now).
		to = *from
	}
	// The tail moves up to the newest mark at or before the watermark, whether or not the
	// watermark moved.
	b.Queue(`WITH m AS (
			SELECT taken_at, seq FROM accounts.spend_marks WHERE taken_at <= $1::date::timestamp AT TIME ZONE 'UTC'
			ORDER BY taken_at DESC LIMIT 1),
		gone AS (
			DELETE FROM accounts.spend_marks WHERE taken_at < (SELECT taken_at FROM m))
		UPDATE accounts.spend_rollup SET rolled_until = $1::date, tail_seq = greatest(tail_seq, coalesce((SELECT seq FROM m), 0))`, to)
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return fail(err)
	}
	return to, days, nil
}
