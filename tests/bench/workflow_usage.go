package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/tests/harness"
)

// workflowUsageSeedChunk is how many workflows one seeding statement writes, with their steps.
const workflowUsageSeedChunk = 500_000

// benchWorkflowUsage is benchmark G's second part: steps workflow steps of one client over the
// last 365 days seeded straight into the verification schema (a workflow per silent step, a
// third of them with an SMS step after an UNDETERMINED silent one; five countries), then GET
// /v1/api/me/usage/workflows through the gateway over the last 30 and 365 days and with the
// channel and country filters (a channel's conversion in one country), calls times each: live
// 365-day calls first, read from the steps alone, then again once verification's restart rolled
// the year up.
func benchWorkflowUsage(ctx context.Context, s *harness.Suite, steps, calls, live int, progress io.Writer) (UsageResult, error) {
	var res UsageResult
	c, err := s.CreateClient(ctx, 10, "--features", "VERIFY,SANDBOX")
	if err != nil {
		return res, err
	}
	conn, err := pgx.Connect(ctx, s.Databases["verification"])
	if err != nil {
		return res, err
	}
	defer conn.Close(ctx)
	// Every third workflow (i % 3 = 0) has an SMS step after its silent one: n workflows are
	// 4n/3 steps, so steps*3/4 of them.
	flows := steps * 3 / 4
	fmt.Fprintf(progress, "  seeding %d workflows (about %d steps) of one client over 365 days\n", flows, flows+flows/3)
	t0 := time.Now()
	// A restore, not traffic, as G's seed: without the foreign-key triggers.
	if _, err := conn.Exec(ctx, `SET session_replication_role = replica`); err != nil {
		return res, err
	}
	for lo := 1; lo <= flows; lo += workflowUsageSeedChunk {
		hi := min(lo+workflowUsageSeedChunk-1, flows)
		if _, err := conn.Exec(ctx, `WITH g AS (
				SELECT i, md5($1 || 'w' || i)::uuid AS id, (ARRAY['GB', 'FR', 'DE', 'ES', 'AE'])[i % 5 + 1] AS country,
					now() - make_interval(secs => i::float8 / $2 * 365 * 86400) AS at,
					CASE WHEN i % 3 = 0 THEN 'UNDETERMINED' WHEN i % 10 = 1 THEN 'NOT_VERIFIED' ELSE 'VERIFIED' END AS silent,
					CASE WHEN i % 3 <> 0 THEN NULL WHEN i % 7 = 0 THEN 'EXPIRED' WHEN i % 11 = 0 THEN 'UNDELIVERABLE' ELSE 'VERIFIED' END AS sms
				FROM generate_series($3::int, $4::int, -1) AS i),
			w AS (
				INSERT INTO verification.workflows (client_id, id, masked_number, country, policy, status, decided_by, reason,
					step_seq, created_at, updated_at, ended_at)
				SELECT $1::uuid, id, '+44*******456', country, '{}'::jsonb,
					CASE coalesce(sms, silent) WHEN 'VERIFIED' THEN 'VERIFIED' WHEN 'NOT_VERIFIED' THEN 'NOT_VERIFIED' WHEN 'EXPIRED' THEN 'EXPIRED' ELSE 'FAILED' END,
					CASE WHEN sms IS NULL THEN 'SILENT' WHEN sms = 'VERIFIED' THEN 'SMS_OTP' END, 'SEEDED',
					CASE WHEN sms IS NULL THEN 1 ELSE 2 END, at, at, at + interval '1 minute' FROM g)
			INSERT INTO verification.workflow_steps (client_id, workflow_id, seq, id, channel, country, status, reason,
				charge_status, charged, started_at, deadline, ended_at)
			SELECT $1::uuid, id, 1, md5($1 || 's' || i)::uuid, 'SILENT', country, silent, 'SEEDED', 'NONE', 0,
				at, at + interval '60 seconds', at + interval '2 seconds' FROM g
			UNION ALL
			SELECT $1::uuid, id, 2, md5($1 || 'm' || i)::uuid, 'SMS_OTP', country, sms, 'SEEDED',
				CASE WHEN sms = 'UNDELIVERABLE' THEN 'VOIDED' ELSE 'SETTLED' END, CASE WHEN sms = 'UNDELIVERABLE' THEN 0 ELSE 3 END,
				at + interval '2 seconds', at + interval '602 seconds', at + interval '1 minute' FROM g WHERE sms IS NOT NULL
			ORDER BY 11`, c.ID, flows, flows-lo+1, flows-hi+1); err != nil {
			return res, fmt.Errorf("seed: %w", err)
		}
		fmt.Fprintf(progress, "  %d of %d workflows seeded (%s)\n", hi, flows, time.Since(t0).Round(time.Second))
	}
	if _, err := conn.Exec(ctx, `RESET session_replication_role`); err != nil {
		return res, err
	}
	if _, err := conn.Exec(ctx, `ANALYZE verification.workflow_steps`); err != nil {
		return res, err
	}
	var seeded int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM verification.workflow_steps WHERE client_id = $1`, c.ID).Scan(&seeded); err != nil {
		return res, err
	}
	// A backfill into days the roll-up closed: it starts again (docs/operations.md).
	for _, q := range []string{`UPDATE verification.workflow_usage_rollup SET rolled_until = NULL`, `DELETE FROM verification.workflow_usage_days`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return res, err
		}
	}
	res.Notes = append(res.Notes, fmt.Sprintf("G (workflows): %d workflow steps (%d workflows) of one client over 365 days seeded with generate_series in %s",
		seeded, flows, time.Since(t0).Round(time.Second)))

	today := time.Now().UTC()
	path := func(days int, filter string) string {
		return fmt.Sprintf("/v1/api/me/usage/workflows?from=%s&to=%s%s", today.AddDate(0, 0, 1-days).Format(time.DateOnly), today.Format(time.DateOnly), filter)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	type call struct {
		name   string
		days   int
		filter string
	}
	year := call{"workflow usage 365 days", 365, ""}
	if live > 0 {
		p50, p99, count, err := timeUsage(ctx, s, c.APIKey, path(year.days, year.filter), live)
		if err != nil {
			return res, err
		}
		fmt.Fprintf(progress, "  workflow usage, 365 days before the roll-up: p50 %s p99 %s\n", p50, p99)
		res.Notes = append(res.Notes, fmt.Sprintf("G (workflows): before the roll-up, the 365-day usage read from the steps alone (%d steps): p50 %.1f ms, p99 %.1f ms over %d calls",
			count, ms(p50), ms(p99), live))
	}

	t0 = time.Now()
	if err := restartForRollup(ctx, s, conn, "verification.workflow_usage_rollup", today); err != nil {
		return res, err
	}
	res.Notes = append(res.Notes, fmt.Sprintf("G (workflows): the roll-up caught up with the seeded year in %s (from verification's restart, its start-up and the verifications' roll-up included)",
		time.Since(t0).Round(100*time.Millisecond)))
	for _, r := range []call{
		{"workflow usage 30 days", 30, ""}, year,
		{"workflow usage 365 days, SMS_OTP in GB", 365, "&channel=SMS_OTP&country=GB"},
	} {
		if _, _, err := usageGet(ctx, s, c.APIKey, path(r.days, r.filter)); err != nil { // one uncounted call
			return res, err
		}
		p50, p99, count, err := timeUsage(ctx, s, c.APIKey, path(r.days, r.filter), calls)
		if err != nil {
			return res, err
		}
		fmt.Fprintf(progress, "  %s: p50 %s p99 %s (%d steps)\n", r.name, p50, p99, count)
		res.Goals = append(res.Goals, Goal{Name: r.name + ", p99", Value: ms(p99), Unit: "ms", Bound: usageP99Goal, Below: true,
			Detail: fmt.Sprintf("p50 %.1f ms over %d calls through the gateway, one at a time; %d steps in the range", ms(p50), calls, count)})
	}
	return res, nil
}
