package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/tests/harness"
)

// usageP99Goal is the usage route's p99 over a year at ten million verifications, in ms: a
// chart's read, well under what a person notices.
const usageP99Goal = 100

// usageSeedChunk is how many verifications one seeding statement writes: a few statements
// rather than one, so each commits in bounded time and memory.
const usageSeedChunk = 2_000_000

// UsageResult is benchmark G's: the usage route's latency over each range, and how long the
// roll-up took to catch up with the seeded rows.
type UsageResult struct {
	Goals []Goal
	Notes []string
}

// benchUsage seeds rows verifications of one client over the last 365 days straight into the
// verification schema (generate_series, with a session each: the schema requires it), restarts
// verification so its roll-up starts at once and waits for it to reach today, then times GET
// /v1/api/me/usage/verifications through the gateway over the last 30 and the last 365 days,
// calls times each. With live > 0 it first times that many 365-day calls before the roll-up,
// read from the rows alone.
func benchUsage(ctx context.Context, s *harness.Suite, rows, calls, live int, progress io.Writer) (UsageResult, error) {
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
	fmt.Fprintf(progress, "  seeding %d verifications of one client over 365 days\n", rows)
	t0 := time.Now()
	// The seed is a restore, not traffic: without the foreign-key triggers (the suite runs as a
	// superuser), as pg_restore loads rows.
	if _, err := conn.Exec(ctx, `SET session_replication_role = replica`); err != nil {
		return res, err
	}
	// Oldest first, as they would have been recorded: i from rows down to 1 is now - i/rows years.
	for lo := 1; lo <= rows; lo += usageSeedChunk {
		hi := min(lo+usageSeedChunk-1, rows)
		if _, err := conn.Exec(ctx, `WITH g AS (
				SELECT i, md5($1 || 's' || i)::uuid AS session_id, md5($1 || 'v' || i)::uuid AS id,
					now() - make_interval(secs => i::float8 / $2 * 365 * 86400) AS at
				FROM generate_series($3::int, $4::int, -1) AS i),
			s AS (
				INSERT INTO verification.sessions (id, client_id, source, operator_id, status, created_at, expires_at, used_at)
				SELECT session_id, $1::uuid, 'SDK', 'sandbox', 'CAPTURED', at, at + interval '5 minutes', at FROM g)
			INSERT INTO verification.verifications (id, client_id, session_id, status, outcome, reason, operator_id, service_type,
				number_sealed, number_hash, charged, balance_after, created_at, settled_at)
			SELECT id, $1::uuid, session_id, st, st, 'SEEDED', CASE WHEN i % 4 = 0 THEN 'sandbox-camara' ELSE 'sandbox' END,
				CASE WHEN i % 4 = 0 THEN 'NETWORK_API' ELSE 'HEADER_ENRICHMENT' END, '\x00', decode(md5(i::text), 'hex'),
				CASE WHEN st IN ('VERIFIED', 'NOT_VERIFIED') THEN 1 ELSE 0 END, 0, at, at
			FROM g CROSS JOIN LATERAL (SELECT (ARRAY['VERIFIED', 'VERIFIED', 'VERIFIED', 'VERIFIED', 'VERIFIED', 'VERIFIED',
				'NOT_VERIFIED', 'NOT_VERIFIED', 'UNDETERMINED', 'EXPIRED'])[i % 10 + 1] AS st) x
			ORDER BY at`, c.ID, rows, rows-lo+1, rows-hi+1); err != nil {
			return res, fmt.Errorf("seed: %w", err)
		}
		fmt.Fprintf(progress, "  %d of %d seeded (%s)\n", hi, rows, time.Since(t0).Round(time.Second))
	}
	if _, err := conn.Exec(ctx, `RESET session_replication_role`); err != nil {
		return res, err
	}
	if _, err := conn.Exec(ctx, `ANALYZE verification.verifications`); err != nil {
		return res, err
	}
	// Rows written into days the roll-up had closed (at start, with none) are a backfill: the
	// roll-up starts again, as docs/operations.md says for a restore.
	for _, q := range []string{`UPDATE verification.usage_rollup SET rolled_until = NULL`, `DELETE FROM verification.usage_days`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return res, err
		}
	}
	res.Notes = append(res.Notes, fmt.Sprintf("G: %d verifications (and their sessions) of one client over 365 days seeded with generate_series in %s",
		rows, time.Since(t0).Round(time.Second)))

	today := time.Now().UTC()
	path := func(days int) string {
		return fmt.Sprintf("/v1/api/me/usage/verifications?from=%s&to=%s", today.AddDate(0, 0, 1-days).Format(time.DateOnly), today.Format(time.DateOnly))
	}
	get := func(p string) (time.Duration, int64, error) { return usageGet(ctx, s, c.APIKey, p) }
	timeCalls := func(days, n int) (p50, p99 time.Duration, count int64, err error) {
		return timeUsage(ctx, s, c.APIKey, path(days), n)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	if live > 0 {
		p50, p99, count, err := timeCalls(365, live)
		if err != nil {
			return res, err
		}
		fmt.Fprintf(progress, "  365 days before the roll-up: p50 %s p99 %s\n", p50, p99)
		res.Notes = append(res.Notes, fmt.Sprintf("G: before the roll-up, the 365-day usage read from the rows alone (%d verifications): p50 %.1f ms, p99 %.1f ms over %d calls",
			count, ms(p50), ms(p99), live))
	}

	// The roll-up runs when verification starts: restart it, and wait for the watermark.
	t0 = time.Now()
	if err := restartForRollup(ctx, s, conn, "verification.usage_rollup", today); err != nil {
		return res, err
	}
	res.Notes = append(res.Notes, fmt.Sprintf("G: the roll-up caught up with the seeded year in %s (from verification's restart, its start-up included)", time.Since(t0).Round(100*time.Millisecond)))
	for _, r := range []struct {
		name string
		days int
	}{{"usage 30 days", 30}, {"usage 365 days", 365}} {
		if _, _, err := get(path(r.days)); err != nil { // one uncounted call
			return res, err
		}
		p50, p99, count, err := timeCalls(r.days, calls)
		if err != nil {
			return res, err
		}
		fmt.Fprintf(progress, "  %s: p50 %s p99 %s (%d verifications)\n", r.name, p50, p99, count)
		res.Goals = append(res.Goals, Goal{Name: r.name + ", p99", Value: ms(p99), Unit: "ms", Bound: usageP99Goal, Below: true,
			Detail: fmt.Sprintf("p50 %.1f ms over %d calls through the gateway, one at a time; %d verifications in the range", ms(p50), calls, count)})
	}
	return res, nil
}

// usageGet calls a usage route through the gateway with key, and answers how long it took and
// the answer's total count.
func usageGet(ctx context.Context, s *harness.Suite, key, p string) (time.Duration, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.GatewayURL+p, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("X-API-KEY", key)
	t := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t)
	if err != nil {
		return 0, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("GET %s: %d %s", p, resp.StatusCode, body)
	}
	var env struct {
		Data struct {
			Totals struct {
				Count int64 `json:"count"`
			} `json:"totals"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return 0, 0, err
	}
	return d, env.Data.Totals.Count, nil
}

// timeUsage calls a usage route n times one at a time and answers the p50, the p99 and the
// answer's total count.
func timeUsage(ctx context.Context, s *harness.Suite, key, p string, n int) (p50, p99 time.Duration, count int64, err error) {
	var ds []time.Duration
	for range n {
		d, got, err := usageGet(ctx, s, key, p)
		if err != nil {
			return 0, 0, 0, err
		}
		ds, count = append(ds, d), got
	}
	return percentileUnsorted(ds, 50), percentileUnsorted(ds, 99), count, nil
}

// restartForRollup restarts verification, whose roll-ups run at its start, and waits until the
// watermark of table (one row, rolled_until) reaches today's day.
func restartForRollup(ctx context.Context, s *harness.Suite, conn *pgx.Conn, table string, today time.Time) error {
	t0 := time.Now()
	if err := s.Kill("verification", syscall.SIGTERM); err != nil {
		return err
	}
	if err := s.Restart("verification"); err != nil {
		return err
	}
	if err := s.WaitReady(ctx, time.Minute); err != nil {
		return err
	}
	want := today.Format(time.DateOnly)
	for {
		var until *time.Time
		if err := conn.QueryRow(ctx, `SELECT rolled_until::timestamp FROM `+table).Scan(&until); err != nil {
			return err
		}
		if until != nil && until.Format(time.DateOnly) >= want {
			return nil
		}
		if time.Since(t0) > 10*time.Minute {
			return fmt.Errorf("the roll-up of %s did not reach %s within 10 minutes (at %v)", table, want, until)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
