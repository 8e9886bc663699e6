package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/usage"
	"github.com/mnvhq/mnv/services/verification/internal/workflows"
)

// The workflow usage's roll-up (migration 024; docs/architecture.md#usage).

// StepUsage reads a client's workflow steps per UTC day of r (the day each started), channel,
// country and status (workflows.UsageDimensions), with their settled charges, only those f
// keeps (a silent step's charge is its verification's, which the verifications' usage counts:
// left out here and in the roll-up, so the two reports never count one debit twice), in one statement and so one snapshot: the days before the roll-up's watermark from
// workflow_usage_days, the others from the steps themselves along the client's index by time.
func (st *Store) StepUsage(ctx context.Context, clientID string, r usage.Range, f workflows.UsageFilter) ([]usage.Row, error) {
	rows, err := st.db.Query(ctx, `WITH w AS (
			SELECT coalesce(rolled_until, '-infinity') AS until FROM verification.workflow_usage_rollup)
		SELECT day::timestamp, channel, country, status, count, charged FROM verification.workflow_usage_days
		WHERE client_id = $1 AND day >= $2::date AND day < least($3::date, (SELECT until FROM w))
			AND ($4::text IS NULL OR channel = $4) AND ($5::text IS NULL OR country = $5)
		UNION ALL
		SELECT (started_at AT TIME ZONE 'UTC')::date::timestamp, channel, country, status, count(*),
			coalesce(sum(charged) FILTER (WHERE charge_status = 'SETTLED' AND channel <> 'SILENT'), 0)::bigint
		FROM verification.workflow_steps
		WHERE client_id = $1 AND started_at >= greatest($2::date, (SELECT until FROM w))::timestamp AT TIME ZONE 'UTC'
			AND started_at < $3::date::timestamp AT TIME ZONE 'UTC'
			AND ($4::text IS NULL OR channel = $4) AND ($5::text IS NULL OR country = $5)
		GROUP BY 1, 2, 3, 4`, clientID, r.From, r.End(), f.Channel, f.Country)
	if err != nil {
		return nil, fmt.Errorf("workflow usage: %w", err)
	}
	var (
		out                      []usage.Row
		day                      time.Time
		channel, country, status string
		count, charged           int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&day, &channel, &country, &status, &count, &charged}, func() error {
		out = append(out, usage.Row{Day: day, Values: []string{channel, country, status}, Count: count, Charged: charged})
		return nil
	}); err != nil {
		return nil, fmt.Errorf("workflow usage: %w", err)
	}
	return out, nil
}

// stepUsageKey is a row of workflow_usage_days of one client.
type stepUsageKey struct {
	day                      time.Time
	channel, country, status string
}

// CorrectStepUsage applies moves of a client's steps to the rows of the days already rolled up,
// in the Store's transaction (refused outside one); the moves of later days are the steps' own
// and are left out. The watermark's row is read FOR SHARE and held to the end: a pass (which
// locks it FOR UPDATE) then either committed before, and this sees the days it wrote, or waits
// for this to commit and reads the steps as moved. A row counted down to nothing goes.
func (st *Store) CorrectStepUsage(ctx context.Context, clientID string, moves []workflows.UsageMove) error {
	if _, ok := st.db.(pgx.Tx); !ok {
		return fmt.Errorf("correct workflow usage: %w", pg.ErrNoTx)
	}
	var rolled *time.Time
	if err := st.db.QueryRow(ctx, `SELECT rolled_until::timestamp FROM verification.workflow_usage_rollup FOR SHARE`).Scan(&rolled); err != nil {
		return fmt.Errorf("correct workflow usage: %w", err)
	}
	if rolled == nil {
		return nil
	}
	net := map[stepUsageKey][2]int64{}
	var order []stepUsageKey
	for _, m := range moves {
		if !m.Day.Before(*rolled) {
			continue
		}
		k := stepUsageKey{usage.Day(m.Day), string(m.Channel), m.Country, string(m.Status)}
		v, seen := net[k]
		if !seen {
			order = append(order, k)
		}
		net[k] = [2]int64{v[0] + m.Count, v[1] + m.Charged}
	}
	b := &pgx.Batch{}
	var days []time.Time
	for _, k := range order {
		v := net[k]
		if v == [2]int64{} {
			continue
		}
		if v[0] > 0 {
			// Counted up: the key is inserted when its day had none.
			b.Queue(`INSERT INTO verification.workflow_usage_days AS u (client_id, day, channel, country, status, count, charged)
				VALUES ($1, $2::date, $3, $4, $5, $6, $7)
				ON CONFLICT (client_id, day, channel, country, status) DO UPDATE SET count = u.count + EXCLUDED.count, charged = u.charged + EXCLUDED.charged`,
				clientID, k.day, k.channel, k.country, k.status, v[0], v[1])
		} else {
			// Counted down, or only its charge moved: the roll-up counted the step under this
			// key, so its row is there. Should it not be (rows restored behind the watermark),
			// the correction is lost rather than the step's move refused.
			b.Queue(`UPDATE verification.workflow_usage_days SET count = greatest(count + $6, 0), charged = greatest(charged + $7, 0)
				WHERE client_id = $1 AND day = $2::date AND channel = $3 AND country = $4 AND status = $5`,
				clientID, k.day, k.channel, k.country, k.status, v[0], v[1])
		}
		days = append(days, k.day)
	}
	if b.Len() == 0 {
		return nil
	}
	b.Queue(`DELETE FROM verification.workflow_usage_days WHERE client_id = $1 AND day = ANY($2::date[]) AND count = 0`, clientID, days)
	if err := st.db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("correct workflow usage: %w", err)
	}
	return nil
}

// RollUpWorkflowUsage moves the watermark of the workflow usage's roll-up forward over at most
// maxDays days, writing every client's steps of those days into workflow_usage_days, in the
// Store's transaction (refused outside one). A day is rolled up once no step can be added to
// it:
//   - it ended at least grace ago (a step's day is the service's clock when it started; the
//     grace is also the margin over that clock's skew from the database's);
//   - no transaction of the service's role on this database that began before its end is
//     still open: only such a transaction could still insert a step of it, or move one
//     without correcting the roll-up (workflows.usageMoves leaves out the moves of the
//     service's day).
//
// A step moved after its day was rolled up is corrected by its own transaction
// (CorrectStepUsage), so unlike the verifications' roll-up nothing waits here for the steps
// to end. The open transactions are read first, and everything else after, in later
// statements. It answers the watermark and how many days it rolled up (0 when none could be).
func (st *Store) RollUpWorkflowUsage(ctx context.Context, grace time.Duration, maxDays int) (until time.Time, days int, err error) {
	return st.rollUpDays(ctx, dayRollUp{
		name:      "workflow usage",
		watermark: "verification.workflow_usage_rollup",
		start: func(ctx context.Context, rolled *time.Time, bound time.Time) (from *time.Time, _ time.Time, err error) {
			err = st.db.QueryRow(ctx, `SELECT coalesce($1::date,
					(SELECT min(started_at) AT TIME ZONE 'UTC' FROM verification.workflow_steps)::date)::timestamp`,
				rolled).Scan(&from)
			return from, bound, err
		},
		insert: `INSERT INTO verification.workflow_usage_days (client_id, day, channel, country, status, count, charged)
			SELECT client_id, (started_at AT TIME ZONE 'UTC')::date, channel, country, status, count(*),
				coalesce(sum(charged) FILTER (WHERE charge_status = 'SETTLED' AND channel <> 'SILENT'), 0)
			FROM verification.workflow_steps
			WHERE started_at >= $1::date::timestamp AT TIME ZONE 'UTC' AND started_at < $2::date::timestamp AT TIME ZONE 'UTC'
			GROUP BY 1, 2, 3, 4, 5`,
	}, grace, maxDays)
}
