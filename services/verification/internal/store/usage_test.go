package store_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mnvhq/mnv/services/platform/usage"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/reports"
	"github.com/mnvhq/mnv/services/verification/internal/store"
)

// usageCase records one verification: its client (0 or 1), how many days ago, what it is
// recorded as (PENDING with its outcome, or a final free outcome), and the operator and method.
type usageCase struct {
	client   int
	daysAgo  int
	status   domain.Status
	outcome  domain.Status
	operator string
	method   string
}

// TestUsageRollupIsExact: after a mixed workload over several days and two clients (charged
// and free outcomes, verifications settled at once, settled late by the reconciler's path and
// rejected late, new ones today), the usage read from the roll-up and the tail is what a direct
// count over the verifications says, for each client and operator filter, before and after each
// roll-up; a day with a verification waiting for its charge is not rolled up until it is
// settled; the rolled-up rows are the direct count of their days; another client's rows are
// never counted.
func TestUsageRollupIsExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, stores := newStores(t)
	st := stores.Pool()
	clients := []string{uuid.NewString(), uuid.NewString()}
	record := func(t *testing.T, c usageCase) domain.Verification {
		t.Helper()
		client := clients[c.client]
		s := domain.Session{ID: uuid.NewString(), ClientID: client, Source: "SDK", Status: "CAPTURED", CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)}
		if err := st.InsertSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		v := domain.Verification{ID: uuid.NewString(), ClientID: client, SessionID: s.ID, Status: c.status, Outcome: c.outcome,
			Reason: "R", OperatorID: c.operator, ServiceType: c.method, NumberSealed: []byte{1}, NumberHash: []byte{byte(c.client), 7}}
		if rec, err := st.RecordVerifications(ctx, []domain.Verification{v}, domain.NumberLimit{}, nil); err != nil || !rec[0].OK {
			t.Fatalf("record: %v %v", rec, err)
		}
		// Recorded c.daysAgo days ago: the verification and its place in the settle queue.
		if _, err := pool.Exec(ctx, `WITH v AS (UPDATE verification.verifications SET created_at = created_at - make_interval(days => $3)
				WHERE client_id = $1 AND id = $2 RETURNING created_at)
			UPDATE verification.unsettled SET recorded_at = (SELECT created_at FROM v) WHERE client_id = $1 AND id = $2`,
			client, v.ID, c.daysAgo); err != nil {
			t.Fatal(err)
		}
		return v
	}
	settle := func(t *testing.T, v domain.Verification, charged int64) {
		t.Helper()
		// As the reconciler does: the stale PENDING verification locked, then settled, in one transaction.
		if err := stores.InTx(ctx, func(ctx context.Context, st *store.Store) error {
			ok, err := st.SettleVerifications(ctx, []domain.Settlement{{ID: v.ID, ClientID: v.ClientID, Charged: charged, BalanceAfter: 10, Completed: completed(t, v)}})
			if err != nil || !ok[0] {
				t.Fatalf("settle: %v %v", ok, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	reject := func(t *testing.T, v domain.Verification) {
		t.Helper()
		if ok, err := st.RejectVerification(ctx, v.ClientID, v.ID); err != nil || !ok {
			t.Fatalf("reject: %v %v", ok, err)
		}
	}
	rollUp := func(t *testing.T) time.Time {
		t.Helper()
		var until time.Time
		if err := stores.InTx(ctx, func(ctx context.Context, st *store.Store) error {
			var err error
			for {
				var n int
				if until, n, err = st.RollUpUsage(ctx, 0, 2); err != nil || n == 0 {
					return err
				}
			}
		}); err != nil {
			t.Fatal(err)
		}
		return until
	}
	today := usage.Day(time.Now())
	r := usage.Range{From: today.AddDate(0, 0, -9), To: today}
	check := func(t *testing.T, when string) {
		t.Helper()
		for _, client := range clients {
			for _, op := range []*string{nil, ptr("alpha"), ptr("beta"), ptr("nobody")} {
				got, err := st.VerificationUsage(ctx, client, r, op)
				if err != nil {
					t.Fatal(err)
				}
				want := directUsage(t, pool, client, op)
				if g, w := usage.Build(r, reports.Dimensions, got), usage.Build(r, reports.Dimensions, want); !reflect.DeepEqual(g, w) {
					t.Errorf("%s, client %s, operator %v: usage\n%+v\nwant the direct count\n%+v", when, client, op, g.Totals, w.Totals)
				}
			}
		}
	}

	// Settled at once on their days, or free outcomes final at their record.
	for _, c := range []usageCase{
		{0, 5, domain.StatusPending, domain.StatusVerified, "alpha", "HEADER_ENRICHMENT"},
		{0, 5, domain.StatusPending, domain.StatusNotVerified, "beta", "NETWORK_API"},
		{0, 4, domain.StatusUndetermined, domain.StatusUndetermined, "alpha", "HEADER_ENRICHMENT"},
		{0, 4, domain.StatusExpired, domain.StatusExpired, "alpha", "NETWORK_API"},
		{1, 5, domain.StatusPending, domain.StatusVerified, "alpha", "HEADER_ENRICHMENT"},
		{1, 4, domain.StatusUndetermined, domain.StatusUndetermined, "beta", "HEADER_ENRICHMENT"},
	} {
		if v := record(t, c); c.status == domain.StatusPending {
			settle(t, v, 1)
		}
	}
	// Left PENDING three days ago: the reconciler settles or rejects them later.
	late := []domain.Verification{
		record(t, usageCase{0, 3, domain.StatusPending, domain.StatusVerified, "alpha", "HEADER_ENRICHMENT"}),
		record(t, usageCase{0, 3, domain.StatusPending, domain.StatusNotVerified, "beta", "HEADER_ENRICHMENT"}),
		record(t, usageCase{1, 3, domain.StatusPending, domain.StatusVerified, "alpha", "HEADER_ENRICHMENT"}),
	}
	record(t, usageCase{0, 2, domain.StatusUndetermined, domain.StatusUndetermined, "beta", "HEADER_ENRICHMENT"})
	settle(t, record(t, usageCase{1, 1, domain.StatusPending, domain.StatusVerified, "beta", "NETWORK_API"}), 2)
	check(t, "before any roll-up")

	if until := rollUp(t); !until.Equal(today.AddDate(0, 0, -3)) {
		t.Fatalf("rolled up until %v, want %v: the day of the oldest PENDING verification", until, today.AddDate(0, 0, -3))
	}
	check(t, "rolled up to the PENDING day")

	settle(t, late[0], 1)
	reject(t, late[1])
	check(t, "after the late settles, before their day is rolled up")
	settle(t, late[2], 1)
	if until := rollUp(t); !until.Equal(today) {
		t.Fatalf("rolled up until %v, want today %v", until, today)
	}
	check(t, "rolled up to today")

	// Today's, read from the tail: one PENDING, one settled.
	record(t, usageCase{0, 0, domain.StatusPending, domain.StatusVerified, "alpha", "HEADER_ENRICHMENT"})
	settle(t, record(t, usageCase{0, 0, domain.StatusPending, domain.StatusNotVerified, "alpha", "NETWORK_API"}), 1)
	if until := rollUp(t); !until.Equal(today) {
		t.Fatalf("rolled up until %v, want today %v: today is never rolled up", until, today)
	}
	check(t, "with today's")

	// The rolled-up rows are the direct count of their days, client by client.
	var diff int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM (
			(SELECT client_id, day, status, operator_id, service_type, count, charged FROM verification.usage_days
			 EXCEPT SELECT client_id, (created_at AT TIME ZONE 'UTC')::date, status, operator_id, service_type, count(*), sum(charged)
			 FROM verification.verifications GROUP BY 1, 2, 3, 4, 5)
			UNION ALL
			(SELECT client_id, (created_at AT TIME ZONE 'UTC')::date, status, operator_id, service_type, count(*), sum(charged)
			 FROM verification.verifications WHERE created_at < $1 GROUP BY 1, 2, 3, 4, 5
			 EXCEPT SELECT client_id, day, status, operator_id, service_type, count, charged FROM verification.usage_days)) d`,
		today).Scan(&diff); err != nil {
		t.Fatal(err)
	}
	if diff != 0 {
		t.Errorf("%d rows of usage_days differ from the direct count of the rolled-up days", diff)
	}
	// The mixed workload's totals, as a client reads them.
	got, err := st.VerificationUsage(ctx, clients[0], r, nil)
	if err != nil {
		t.Fatal(err)
	}
	tot := usage.Build(r, reports.Dimensions, got).Totals
	if tot.Count != 9 || tot.Charged != 4 {
		t.Errorf("client 0's totals = %+v, want 9 verifications and 4 credits", tot.Figures)
	}
}

func ptr(s string) *string { return &s }

// directUsage counts a client's verifications (only operator's unless nil) straight from their
// rows.
func directUsage(t *testing.T, pool *pgxpool.Pool, client string, operator *string) []usage.Row {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT (created_at AT TIME ZONE 'UTC')::date::timestamp, status, operator_id, service_type,
			count(*), sum(charged)::bigint FROM verification.verifications
		WHERE client_id = $1 AND ($2::text IS NULL OR operator_id = $2) GROUP BY 1, 2, 3, 4`, client, operator)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (usage.Row, error) {
		var u usage.Row
		var status, op, method string
		err := row.Scan(&u.Day, &status, &op, &method, &u.Count, &u.Charged)
		u.Values = []string{status, op, method}
		return u, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
