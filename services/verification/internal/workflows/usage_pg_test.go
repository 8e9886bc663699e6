package workflows_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/usage"
	"github.com/mnvhq/mnv/services/verification/internal/workflows"
)

const frNumber = "+33612345678"

// TestUsageRollupIsExact: the usage of workflow steps read through the roll-up is what a direct
// count over the steps says, over ranges that cross the watermark or not, with every filter, for
// each of two clients: before any roll-up, once the past days are rolled up, and after steps of
// those days moved late (a delivery receipt, the sweep, a code checked after its lifetime, an
// SMS refused on its retry with its charge voided, a silent step timed out whose next step
// starts today). The roll-up's rows are then the direct count of their days, and a client's
// answer never counts another's steps.
func TestUsageRollupIsExact(t *testing.T) {
	e := newEnv(t, 1000, workflows.Ports{})
	ctx := context.Background()
	real := e.svc.Now()
	today := usage.Day(real)
	other := uuid.NewString()
	clients := []string{e.client, other}
	at := func(daysAgo int) { e.clock.Lock(); e.now = real.AddDate(0, 0, -daysAgo); e.clock.Unlock() }
	start := func(t *testing.T, client, number string) workflows.Workflow {
		t.Helper()
		w, err := e.svc.Start(ctx, workflows.StartRequest{ClientID: client, MobileNumber: number, Locale: "en-GB"})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	silent := func(t *testing.T, w workflows.Workflow, status string) workflows.Workflow {
		t.Helper()
		w, err := e.svc.SilentResult(ctx, w.ClientID, w.ID, workflows.SilentOutcome{Status: status})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	// send runs the SMS job of w's step in play once, as River would (an error is a retry).
	send := func(w workflows.Workflow) (string, error) {
		step := w.Steps[len(w.Steps)-1]
		return step.ID, e.svc.SendSMS(ctx, workflows.SMSJob{ClientID: w.ClientID, WorkflowID: w.ID, StepID: step.ID})
	}
	mustSend := func(t *testing.T, w workflows.Workflow) string {
		t.Helper()
		id, err := send(w)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	rollUp := func(t *testing.T) {
		t.Helper()
		for {
			n, err := e.svc.RollUp(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return
			}
		}
	}
	day := func(daysAgo int) *string { s := today.AddDate(0, 0, -daysAgo).Format(time.DateOnly); return &s }
	ranges := []struct {
		name     string
		from, to *string
	}{
		{"the last 30 days", nil, nil},
		{"the rolled-up days only", day(6), day(1)},
		{"one rolled-up day", day(4), day(4)},
		{"across the watermark", day(3), day(0)},
		{"today alone", day(0), day(0)},
		{"a year up to today", day(365), day(0)},
		{"days with no step", day(40), day(35)},
	}
	sms, silentCh, gb, fr := "SMS_OTP", "SILENT", "GB", "FR"
	filters := []workflows.UsageFilter{{}, {Channel: &sms}, {Channel: &silentCh}, {Country: &gb}, {Channel: &sms, Country: &fr}}
	check := func(t *testing.T, when string) {
		t.Helper()
		for _, client := range clients {
			for _, rg := range ranges {
				for _, f := range filters {
					got, err := e.svc.Usage(ctx, client, rg.from, rg.to, f)
					if err != nil {
						t.Fatal(err)
					}
					r, err := usage.ParseRange(rg.from, rg.to, e.svc.Now())
					if err != nil {
						t.Fatal(err)
					}
					if want := usage.Build(r, workflows.UsageDimensions, directStepUsage(t, e, client, f)); !reflect.DeepEqual(got, want) {
						t.Errorf("%s, client %s, %s, channel %v country %v:\n%+v\nwant the direct count\n%+v",
							when, client, rg.name, deref(f.Channel), deref(f.Country), got.Totals, want.Totals)
					}
				}
			}
		}
	}

	// Five days ago: a silent verify, and an SMS whose code was checked (charged 3, GB's price).
	at(5)
	silent(t, start(t, e.client, gbNumber), "VERIFIED")
	w := silent(t, start(t, e.client, gbNumber), "UNDETERMINED")
	if _, err := e.check(t, w.ID, e.smsc.code(t, mustSend(t, w))); err != nil {
		t.Fatal(err)
	}
	silent(t, start(t, other, gbNumber), "VERIFIED")
	// Four days ago: an SMS sent whose receipt comes late; a French one the SMSC takes on
	// its second try only, after the days are rolled up; the other client's SMS.
	at(4)
	receiptLate := silent(t, start(t, e.client, gbNumber), "UNDETERMINED")
	receiptStep := mustSend(t, receiptLate)
	retried := silent(t, start(t, e.client, frNumber), "UNDETERMINED")
	e.smsc.fail = true
	if _, err := send(retried); err == nil {
		t.Fatal("a failing SMSC: want the job retried")
	}
	e.smsc.fail = false
	mustSend(t, silent(t, start(t, other, frNumber), "UNDETERMINED"))
	// Three days ago: a code typed after its lifetime, and one checked wrong.
	at(3)
	lateCode := silent(t, start(t, e.client, gbNumber), "UNDETERMINED")
	mustSend(t, lateCode)
	wrong := silent(t, start(t, e.client, frNumber), "EXPIRED")
	if _, err := e.check(t, wrong.ID, e.smsc.code(t, mustSend(t, wrong))+"9"); err != nil {
		t.Fatal(err)
	}
	// Two days ago: a silent step nobody answers, timed out by the sweep today.
	at(2)
	forgotten := start(t, e.client, gbNumber)
	// Today, read from the steps.
	at(0)
	silent(t, start(t, e.client, frNumber), "VERIFIED")
	silent(t, start(t, other, gbNumber), "UNDETERMINED")

	check(t, "before any roll-up")
	rollUp(t)
	var until time.Time
	if err := e.pool.QueryRow(ctx, `SELECT rolled_until::timestamp FROM verification.workflow_usage_rollup`).Scan(&until); err != nil {
		t.Fatal(err)
	}
	if !until.Equal(today) {
		t.Fatalf("rolled up until %v, want today %v: every past day is closed, today never", until, today)
	}
	check(t, "rolled up to today")

	// The late moves, at today's clock.
	if err := e.svc.Receipt(ctx, "smsc-"+receiptStep, workflows.ReceiptDelivered); err != nil {
		t.Fatal(err)
	}
	if _, err := e.check(t, lateCode.ID, "000000"); err == nil {
		t.Log("late code checked") // final already or expired by the check: either moves a step
	}
	e.smsc.refuse = true
	if _, err := send(retried); err != nil {
		t.Fatal(err)
	}
	e.smsc.refuse = false
	if _, err := e.svc.SweepOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if g := e.get(t, forgotten.ID); len(g.Steps) < 2 || g.Steps[0].Status != workflows.StepTimedOut {
		t.Fatalf("the forgotten workflow's steps: %+v, want its silent step timed out and an SMS step today", g.Steps)
	}
	check(t, "after the late moves")
	rollUp(t)
	check(t, "rolled up again")

	// The roll-up's rows are the direct count of the rolled-up days, client by client.
	var diff int
	if err := e.pool.QueryRow(ctx, `WITH direct AS (
			SELECT client_id, (started_at AT TIME ZONE 'UTC')::date AS day, channel, country, status, count(*) AS count,
				coalesce(sum(charged) FILTER (WHERE charge_status = 'SETTLED' AND channel <> 'SILENT'), 0) AS charged
			FROM verification.workflow_steps WHERE started_at < $1 GROUP BY 1, 2, 3, 4, 5),
		rolled AS (SELECT client_id, day, channel, country, status, count, charged FROM verification.workflow_usage_days)
		SELECT count(*) FROM ((SELECT * FROM direct EXCEPT SELECT * FROM rolled) UNION ALL (SELECT * FROM rolled EXCEPT SELECT * FROM direct)) d`,
		today).Scan(&diff); err != nil {
		t.Fatal(err)
	}
	if diff != 0 {
		t.Errorf("%d rows of workflow_usage_days differ from the direct count of the rolled-up days", diff)
	}
	// The other client's answer counts its own steps only.
	rep, err := e.svc.Usage(ctx, other, day(6), day(0), workflows.UsageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Totals.Count != 5 {
		t.Errorf("the other client's steps: %d, want 5 (a silent step five days ago, a silent and an SMS step four days ago, two today)", rep.Totals.Count)
	}
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

// directStepUsage counts a client's steps (those f keeps) straight from their rows.
func directStepUsage(t *testing.T, e *env, client string, f workflows.UsageFilter) []usage.Row {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT (started_at AT TIME ZONE 'UTC')::date::timestamp, channel, country, status,
			count(*), coalesce(sum(charged) FILTER (WHERE charge_status = 'SETTLED' AND channel <> 'SILENT'), 0)::bigint FROM verification.workflow_steps
		WHERE client_id = $1 AND ($2::text IS NULL OR channel = $2) AND ($3::text IS NULL OR country = $3) GROUP BY 1, 2, 3, 4`,
		client, f.Channel, f.Country)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (usage.Row, error) {
		var u usage.Row
		var channel, country, status string
		err := row.Scan(&u.Day, &channel, &country, &status, &u.Count, &u.Charged)
		u.Values = []string{channel, country, status}
		return u, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUsageFilters: a channel that is none or a country that is not an alpha-2 code is 400
// naming the field, before anything is read.
func TestUsageFilters(t *testing.T) {
	e := newEnv(t, 100, workflows.Ports{})
	bad := func(s string) *string { return &s }
	for _, c := range []struct {
		name  string
		f     workflows.UsageFilter
		field string
	}{
		{"an unknown channel", workflows.UsageFilter{Channel: bad("VOICE")}, "channel"},
		{"a channel in lower case", workflows.UsageFilter{Channel: bad("sms_otp")}, "channel"},
		{"a country in lower case", workflows.UsageFilter{Country: bad("gb")}, "country"},
		{"a three-letter country", workflows.UsageFilter{Country: bad("GBR")}, "country"},
		{"an empty country", workflows.UsageFilter{Country: bad("")}, "country"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.svc.Usage(context.Background(), e.client, nil, nil, c.f)
			f := fault.Find(err, fault.InvalidArgument)
			if f == nil || f.Field != c.field {
				t.Fatalf("usage with %s: %v, want 400 on %s", c.name, err, c.field)
			}
		})
	}
}
