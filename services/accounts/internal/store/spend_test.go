package store_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mnvhq/mnv/services/accounts/internal/accountstest"
	"github.com/mnvhq/mnv/services/accounts/internal/billing"
	"github.com/mnvhq/mnv/services/accounts/internal/clients"
	"github.com/mnvhq/mnv/services/accounts/internal/domain"
	"github.com/mnvhq/mnv/services/accounts/internal/reports"
	"github.com/mnvhq/mnv/services/accounts/internal/store"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/usage"
)

// TestSpendRollupIsExact: over entries of several kinds on several days for two clients, the
// spend read from the roll-up and the tail is what a direct sum over the ledger says, before
// and after each roll-up and with entries appended after it; the rolled-up rows are the direct
// sums of their days; the tail starts at the newest mark of the sequence before the watermark;
// another client's entries are never counted.
func TestSpendRollupIsExact(t *testing.T) {
	env := accountstest.New(t, billing.DefaultPrices())
	ctx := accountstest.Deadline(t)
	st := store.New(env.Pool)
	stores := pg.NewStores(env.Pool, func(db pg.DB) *store.Store { return store.New(db) })
	var ids []string
	balance := map[string]int64{}
	for range 2 {
		cr, err := env.Clients.Create(ctx, clients.CreateRequest{
			Name: "Test client", Contact: domain.Contact{Name: "Tess Ter", Email: "tess@example.com", Phone: "0011223344"},
			InitialBalance: 1000, WithoutAPIKey: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, cr.Client.ID)
		balance[cr.Client.ID] = 1000
	}
	// The clients' TOP_UPs a week ago, before everything else.
	if _, err := env.Pool.Exec(ctx, `UPDATE accounts.ledger SET created_at = created_at - interval '7 days'`); err != nil {
		t.Fatal(err)
	}
	// appendOn appends an entry to client c, daysAgo days ago (the ledger forbids updates to its
	// owner, not to the superuser the tests run as).
	appendOn := func(t *testing.T, c int, daysAgo int, kind money.Kind, amount int64) {
		t.Helper()
		client := ids[c]
		balance[client] += amount
		id := uuid.NewString()
		if _, err := st.AppendLedger(ctx, []domain.LedgerEntry{{ID: id, ClientID: client, Kind: kind, Amount: amount,
			BalanceAfter: balance[client], Reference: string(kind) + ":" + id}}); err != nil {
			t.Fatal(err)
		}
		if daysAgo > 0 {
			if tag, err := env.Pool.Exec(ctx, `UPDATE accounts.ledger SET created_at = created_at - make_interval(days => $3)
				WHERE client_id = $1 AND reference = $2`, client, string(kind)+":"+id, daysAgo); err != nil || tag.RowsAffected() != 1 {
				t.Fatal(tag, err)
			}
		}
	}
	rollUp := func(t *testing.T) time.Time {
		t.Helper()
		var until time.Time
		if err := stores.InTx(ctx, func(ctx context.Context, st *store.Store) error {
			for {
				var n int
				var err error
				until, n, err = st.RollUpSpend(ctx, 0, 2)
				if err != nil || n == 0 {
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
		for _, client := range ids {
			got, err := st.SpendUsage(ctx, client, r)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := usage.Build(r, reports.Dimensions, got), usage.Build(r, reports.Dimensions, directSpend(t, env.Pool, client)); !reflect.DeepEqual(g, w) {
				t.Errorf("%s, client %s: spend\n%+v\nwant the direct sum\n%+v", when, client, g.Totals, w.Totals)
			}
		}
	}

	for _, e := range []struct {
		c, daysAgo int
		kind       money.Kind
		amount     int64
	}{
		{0, 6, money.KindVerification, -1}, {0, 6, money.KindVerification, -1}, {0, 5, money.KindStuckPlusReveal, -5},
		{0, 5, money.KindRefund, 5}, {0, 4, money.KindConnectEnrichment, -1}, {0, 3, money.KindAdjustment, -7},
		{0, 3, money.KindTopUp, 50}, {1, 6, money.KindVerification, -2}, {1, 2, money.KindAdjustment, 3},
	} {
		appendOn(t, e.c, e.daysAgo, e.kind, e.amount)
	}
	check(t, "before any roll-up")
	// A mark of the sequence from before today, as a pass of yesterday would have left; today's
	// entries come after it, and the tail starts at it.
	var mark int64
	if err := env.Pool.QueryRow(ctx, `INSERT INTO accounts.spend_marks (taken_at, seq)
		SELECT $1::timestamptz - interval '1 minute', pg_sequence_last_value(pg_get_serial_sequence('accounts.ledger', 'seq'))
		RETURNING seq`, today).Scan(&mark); err != nil {
		t.Fatal(err)
	}
	if until := rollUp(t); !until.Equal(today) {
		t.Fatalf("rolled up until %v, want today %v", until, today)
	}
	check(t, "rolled up to today")

	appendOn(t, 0, 0, money.KindVerification, -1)
	appendOn(t, 1, 0, money.KindVerification, -1)
	appendOn(t, 0, 0, money.KindTopUp, 10)
	if until := rollUp(t); !until.Equal(today) {
		t.Fatalf("rolled up until %v, want today %v", until, today)
	}
	var tail int64
	if err := env.Pool.QueryRow(ctx, `SELECT tail_seq FROM accounts.spend_rollup`).Scan(&tail); err != nil || tail != mark {
		t.Fatalf("tail_seq = %d (%v), want the mark's %d", tail, err, mark)
	}
	check(t, "with today's entries in the tail")

	var diff int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM (
			(SELECT client_id, day, kind, count, charged, credited FROM accounts.spend_days
			 EXCEPT SELECT client_id, (created_at AT TIME ZONE 'UTC')::date, kind, count(*), sum(greatest(-amount, 0)), sum(greatest(amount, 0))
			 FROM accounts.ledger GROUP BY 1, 2, 3)
			UNION ALL
			(SELECT client_id, (created_at AT TIME ZONE 'UTC')::date, kind, count(*), sum(greatest(-amount, 0)), sum(greatest(amount, 0))
			 FROM accounts.ledger WHERE created_at < $1 GROUP BY 1, 2, 3
			 EXCEPT SELECT client_id, day, kind, count, charged, credited FROM accounts.spend_days)) d`, today).Scan(&diff); err != nil {
		t.Fatal(err)
	}
	if diff != 0 {
		t.Errorf("%d rows of spend_days differ from the direct sums of the rolled-up days", diff)
	}
	got, err := st.SpendUsage(ctx, ids[0], r)
	if err != nil {
		t.Fatal(err)
	}
	if tot := usage.Build(r, reports.Dimensions, got).Totals; tot.Count != 10 || tot.Charged != 16 || tot.Credited != 1065 {
		t.Errorf("client 0's totals = %+v, want 10 entries, 16 charged, 1065 credited", tot.Figures)
	}
}

// directSpend sums a client's ledger straight from its rows.
func directSpend(t *testing.T, pool *pgxpool.Pool, client string) []usage.Row {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT (created_at AT TIME ZONE 'UTC')::date::timestamp, kind, count(*),
			sum(greatest(-amount, 0))::bigint, sum(greatest(amount, 0))::bigint FROM accounts.ledger
		WHERE client_id = $1 GROUP BY 1, 2`, client)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (usage.Row, error) {
		var u usage.Row
		var kind string
		err := row.Scan(&u.Day, &kind, &u.Count, &u.Charged, &u.Credited)
		u.Values = []string{kind}
		return u, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
