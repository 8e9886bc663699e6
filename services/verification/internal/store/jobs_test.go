package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/outbox"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/tenancy"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/relay"
	"github.com/mnvhq/mnv/services/verification/internal/store"
	"github.com/mnvhq/mnv/services/verification/internal/verificationtest"
	"github.com/mnvhq/mnv/services/verification/migrations"
)

// newStores is the real schema with River's tables beside it, and stores that write jobs and
// write batches as the app would on this database (tenancy.SpreadOf).
func newStores(t testing.TB) (*pgxpool.Pool, pg.Stores[*store.Store]) {
	t.Helper()
	pool := verificationtest.Database(t, 4)
	spread, err := tenancy.SpreadOf(context.Background(), pool, migrations.Tables)
	if err != nil {
		t.Fatal(err)
	}
	return pool, spreadStores(t, pool, spread)
}

// spreadStores is pool's stores, writing batches as spread says.
func spreadStores(t testing.TB, pool *pgxpool.Pool, spread tenancy.Spread) pg.Stores[*store.Store] {
	t.Helper()
	q, err := jobs.New(pool, jobs.Options{Schema: "verification"})
	if err != nil {
		t.Fatal(err)
	}
	return pg.NewStores(pool, func(db pg.DB) *store.Store { return store.New(db).WithJobs(q).WithSpread(spread) })
}

// eachSpread runs test once for each way of writing a batch of several clients' rows, on a
// fresh database each.
func eachSpread(t *testing.T, test func(t *testing.T, pool *pgxpool.Pool, stores pg.Stores[*store.Store])) {
	for _, spread := range tenancy.Spreads {
		t.Run(spread.String(), func(t *testing.T) {
			pool := verificationtest.Database(t, 4)
			test(t, pool, spreadStores(t, pool, spread))
		})
	}
}

// jobArgs reads the args of the jobs of kinds, oldest first.
func jobArgs(t *testing.T, pool *pgxpool.Pool, kinds ...string) []string {
	t.Helper()
	var out []string
	rows, err := pool.Query(context.Background(), `SELECT args::text FROM verification.river_job WHERE kind = ANY($1) ORDER BY id`, kinds)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

// forwarded are the events of every forward job and settle job, in the order of the jobs.
func forwarded(t *testing.T, pool *pgxpool.Pool) []outbox.EventArgs {
	t.Helper()
	var out []outbox.EventArgs
	for _, a := range jobArgs(t, pool, outbox.Kind, relay.SettledKind) {
		var args outbox.Args
		if err := json.Unmarshal([]byte(a), &args); err != nil {
			t.Fatal(err)
		}
		out = append(out, args.Events...)
	}
	for _, q := range relayQueue(t, pool) {
		var e outbox.EventArgs
		if err := json.Unmarshal(q.Event, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// relayed are the numbers of every relay job and settle job, in the order of the jobs, then
// those of the relay queue, in its order.
func relayed(t *testing.T, pool *pgxpool.Pool) []relay.Number {
	t.Helper()
	var out []relay.Number
	for _, a := range jobArgs(t, pool, relay.Kind, relay.SettledKind) {
		var args relay.Args
		if err := json.Unmarshal([]byte(a), &args); err != nil {
			t.Fatal(err)
		}
		out = append(out, args.Numbers...)
	}
	for _, q := range relayQueue(t, pool) {
		if n := q.Number; n != nil {
			out = append(out, relay.NewArgs(*n).Numbers...)
		}
	}
	return out
}

// relayQueue is what the relay queue holds, in its order, read as a drain takes it (and left
// in place: the transaction rolls back).
func relayQueue(t *testing.T, pool *pgxpool.Pool) []relay.Item {
	t.Helper()
	var items []relay.Item
	stores := pg.NewStores(pool, store.New)
	err := stores.InTx(context.Background(), func(ctx context.Context, st *store.Store) (err error) {
		items, err = st.TakeRelay(ctx, 1_000_000)
		if err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	return items
}

// drains is how many drain jobs there are.
func drains(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	return len(jobArgs(t, pool, relay.DrainKind))
}

// pending records a PENDING verification of a fresh session with outcome.
func pending(t testing.TB, st *store.Store, outcome domain.Status) domain.Verification {
	t.Helper()
	ctx := context.Background()
	client := uuid.NewString()
	s := domain.Session{ID: uuid.NewString(), ClientID: client, Source: "SDK", Status: "CAPTURED", CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)}
	if err := st.InsertSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	v := domain.Verification{ID: uuid.NewString(), ClientID: client, SessionID: s.ID, Status: domain.StatusPending, Outcome: outcome,
		Reason: "NUMBER_MATCH", OperatorID: "alpha", ServiceType: "HEADER_ENRICHMENT", NumberSealed: []byte{1}, NumberHash: []byte{7, 7}}
	if rec, err := st.RecordVerifications(ctx, []domain.Verification{v}, domain.NumberLimit{}, nil); err != nil || !rec[0].OK {
		t.Fatalf("record: %v %v", rec, err)
	}
	return v
}

func completed(t testing.TB, v domain.Verification) events.Event {
	t.Helper()
	ev, err := events.New(v.ClientID, events.VerificationCompleted, events.VerificationCompletedData{VerificationID: v.ID, Status: string(v.Outcome)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

var errRollback = errors.New("the rest of the transaction failed")

// TestSettleWritesItsJobs: a settle writes its event and, for VERIFIED alone, Connect's record,
// with the row and never without it: rolled back together inside a transaction, one atomic
// statement outside one, nothing written by a settle that finds the row settled.
func TestSettleWritesItsJobs(t *testing.T) {
	pool, stores := newStores(t)
	ctx := context.Background()
	tests := []struct {
		outcome    domain.Status
		wantRecord bool
	}{
		{domain.StatusVerified, true},
		{domain.StatusNotVerified, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.outcome), func(t *testing.T) {
			v := pending(t, stores.Pool(), tt.outcome)
			ev := completed(t, v)
			eventsBefore, recordsBefore := len(forwarded(t, pool)), len(relayed(t, pool))
			settle := func(ctx context.Context, st *store.Store) (bool, error) {
				settled, err := st.SettleVerifications(ctx, []domain.Settlement{{ID: v.ID, ClientID: v.ClientID, Charged: 5, BalanceAfter: 95, Completed: ev}})
				if err != nil {
					return false, err
				}
				return settled[0], nil
			}
			err := stores.InTx(ctx, func(ctx context.Context, st *store.Store) error {
				if ok, err := settle(ctx, st); err != nil || !ok {
					t.Fatalf("settle: %v %v", ok, err)
				}
				return errRollback
			})
			if !errors.Is(err, errRollback) {
				t.Fatal(err)
			}
			status := func() domain.Status {
				var s domain.Status
				if err := pool.QueryRow(ctx, `SELECT status FROM verification.verifications WHERE id = $1`, v.ID).Scan(&s); err != nil {
					t.Fatal(err)
				}
				return s
			}
			if s, e, r := status(), len(forwarded(t, pool)), len(relayed(t, pool)); s != domain.StatusPending || e != eventsBefore || r != recordsBefore {
				t.Fatalf("after a rollback: %s, %d events, %d records; want PENDING and nothing new", s, e-eventsBefore, r-recordsBefore)
			}
			// Outside a transaction the statement is its own: the second settle finds it settled.
			for i, want := range []bool{true, false} {
				if settled, err := settle(ctx, stores.Pool()); err != nil || settled != want {
					t.Fatalf("settle %d = %v (%v), want %v", i, settled, err, want)
				}
			}
			evs, records := forwarded(t, pool)[eventsBefore:], relayed(t, pool)[recordsBefore:]
			if len(evs) != 1 || evs[0].ID != ev.ID || evs[0].ClientID != v.ClientID || evs[0].Data != string(ev.Data) {
				t.Errorf("events forwarded %+v, want the one of %s", evs, ev.ID)
			}
			if !tt.wantRecord {
				if len(records) != 0 {
					t.Errorf("a %s settle told Connect %v", tt.outcome, records)
				}
				return
			}
			if len(records) != 1 || records[0].VerificationID != v.ID || records[0].ClientID != v.ClientID ||
				string(records[0].NumberHash) != string(v.NumberHash) || records[0].VerifiedAt.IsZero() {
				t.Errorf("numbers relayed %+v, want the one of %s", records, v.ID)
			}
		})
	}
	t.Run("Emit outside a transaction", func(t *testing.T) {
		if err := stores.Pool().Emit(ctx, completed(t, pending(t, stores.Pool(), domain.StatusVerified))); !errors.Is(err, pg.ErrNoTx) {
			t.Fatalf("Emit = %v, want ErrNoTx", err)
		}
	})
}

// TestMoveOutbox: the numbers an earlier version left unrelayed become relay jobs, once, and
// leave the table with them; relayed rows stay where they are (the table is dropped later).
func TestMoveOutbox(t *testing.T) {
	pool, stores := newStores(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO verification.outbox (client_id, verification_id, number_hash, verified_at, relayed_at)
		SELECT gen_random_uuid(), gen_random_uuid(), '\x0102', now(), CASE WHEN i = 3 THEN now() END FROM generate_series(1, 3) i`); err != nil {
		t.Fatal(err)
	}
	move := func() (n int, err error) {
		err = stores.InTx(ctx, func(ctx context.Context, st *store.Store) error {
			n, err = st.MoveOutbox(ctx)
			return err
		})
		return n, err
	}
	if err := stores.InTx(ctx, func(ctx context.Context, st *store.Store) error {
		if n, err := st.MoveOutbox(ctx); err != nil || n != 2 {
			t.Fatalf("move = %d, %v", n, err)
		}
		return errRollback
	}); !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	if n := len(relayed(t, pool)); n != 0 {
		t.Fatalf("a rolled back move left %d numbers to relay", n)
	}
	for i, want := range []int{2, 0} {
		if n, err := move(); err != nil || n != want {
			t.Fatalf("move %d = %d (%v), want %d", i, n, err, want)
		}
	}
	var pendingLeft, relayedLeft int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE relayed_at IS NULL), count(*) FILTER (WHERE relayed_at IS NOT NULL)
		FROM verification.outbox`).Scan(&pendingLeft, &relayedLeft); err != nil {
		t.Fatal(err)
	}
	records := relayed(t, pool)
	if len(records) != 2 || pendingLeft != 0 || relayedLeft != 1 {
		t.Fatalf("%d numbers to relay, %d pending and %d relayed rows left; want 2, 0, 1", len(records), pendingLeft, relayedLeft)
	}
	if string(records[0].NumberHash) != "\x01\x02" || records[0].VerificationID == "" {
		t.Errorf("moved number %+v", records[0])
	}
	if _, err := stores.Pool().MoveOutbox(ctx); !errors.Is(err, pg.ErrNoTx) {
		t.Errorf("move outside a transaction = %v, want ErrNoTx", err)
	}
}

// TestSettleBatchJobs: a batch's settle writes one job with the events of what it settled, in
// the batch's order, and its verified numbers, which read back as relay.NewArgs of them (a real
// 32-byte hash, the database's settled_at); an item it did not settle (settled before, or a
// second item of one verification) has nothing in it.
func TestSettleBatchJobs(t *testing.T) {
	pool, stores := newStores(t)
	ctx := context.Background()
	st := stores.Pool()
	hash := make([]byte, 32)
	for i := range hash {
		hash[i] = byte(250 - i)
	}
	var vs []domain.Verification
	for _, o := range []domain.Status{domain.StatusVerified, domain.StatusNotVerified, domain.StatusVerified, domain.StatusVerified} {
		v := pending(t, st, o)
		if _, err := pool.Exec(ctx, `UPDATE verification.verifications SET number_hash = $2 WHERE id = $1`, v.ID, hash); err != nil {
			t.Fatal(err)
		}
		v.NumberHash = hash
		vs = append(vs, v)
	}
	settlement := func(v domain.Verification) domain.Settlement {
		return domain.Settlement{ID: v.ID, ClientID: v.ClientID, Charged: 5, BalanceAfter: 95, Completed: completed(t, v)}
	}
	// vs[3] is settled before the batch.
	if ok, err := st.SettleVerifications(ctx, []domain.Settlement{settlement(vs[3])}); err != nil || !ok[0] {
		t.Fatalf("settle first: %v %v", ok, err)
	}
	eventsBefore, numbersBefore := len(forwarded(t, pool)), len(relayed(t, pool))
	batch := []domain.Settlement{settlement(vs[2]), settlement(vs[0]), settlement(vs[3]), settlement(vs[1]), settlement(vs[2])}
	settled, err := st.SettleVerifications(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, true, false, true, false}; !slices.Equal(settled, want) {
		t.Fatalf("settled %v, want %v", settled, want)
	}
	var gotEvents []string
	for _, e := range forwarded(t, pool)[eventsBefore:] {
		gotEvents = append(gotEvents, e.ID)
	}
	if want := []string{batch[0].Completed.ID, batch[1].Completed.ID, batch[3].Completed.ID}; !slices.Equal(gotEvents, want) {
		t.Errorf("events %v, want %v", gotEvents, want)
	}
	// The first settle of a process inserts a drain job; the next, within the notification
	// period, leaves its rows to that drain, unless the period ended in between.
	if n, other := drains(t, pool), len(jobArgs(t, pool, outbox.Kind, relay.Kind, relay.SettledKind)); n < 1 || n > 2 || other != 0 {
		t.Errorf("%d drain jobs and %d others after two settles, want one or two drains and no other", n, other)
	}
	var want []domain.VerifiedNumber
	for _, v := range []domain.Verification{vs[2], vs[0]} {
		n := domain.VerifiedNumber{ClientID: v.ClientID, VerificationID: v.ID, NumberHash: hash}
		if err := pool.QueryRow(ctx, `SELECT settled_at FROM verification.verifications WHERE id = $1`, v.ID).Scan(&n.VerifiedAt); err != nil {
			t.Fatal(err)
		}
		want = append(want, n)
	}
	got := relayed(t, pool)[numbersBefore:]
	if wantArgs := relay.NewArgs(want...).Numbers; len(got) != len(wantArgs) {
		t.Fatalf("numbers relayed %+v, want %+v", got, wantArgs)
	} else {
		for i := range got {
			g, w := got[i], wantArgs[i]
			if g.ClientID != w.ClientID || g.VerificationID != w.VerificationID || string(g.NumberHash) != string(w.NumberHash) || !g.VerifiedAt.Equal(w.VerifiedAt) {
				t.Errorf("number %d relayed %+v, want %+v", i, g, w)
			}
		}
	}
}

// TestSettleWithoutDrains settles through a Store of a process that does not reach Connect: the
// settle queues its row for Connect as always, but inserts no drain job, where the first settle
// of a process that relays inserts one (TestBatchesKeepEachVerificationsAnswer).
func TestSettleWithoutDrains(t *testing.T) {
	pool := verificationtest.Database(t, 4)
	q, err := jobs.New(pool, jobs.Options{Schema: "verification"})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(pool).WithJobs(q).WithoutDrains()
	for range 3 {
		v := pending(t, st, domain.StatusVerified)
		if ok, err := st.SettleVerifications(context.Background(), []domain.Settlement{{ID: v.ID, ClientID: v.ClientID, Charged: 5, BalanceAfter: 95, Completed: completed(t, v)}}); err != nil || !ok[0] {
			t.Fatalf("settle: %v %v", ok, err)
		}
		time.Sleep(110 * time.Millisecond) // past the queue's notification period, when a relaying store would insert another
	}
	if got := len(relayQueue(t, pool)); got != 3 {
		t.Errorf("%d rows in the relay queue, want 3 (one per settle)", got)
	}
	if got := drains(t, pool); got != 0 {
		t.Errorf("%d drain jobs written, want none: no worker of this process would take them", got)
	}
}
