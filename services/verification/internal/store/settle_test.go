package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/store"
)

// TestSettleInPlace follows verifications through their writes against the real schema:
// a settle is a heap-only update (no index entry: PostgreSQL counts it in the transaction's
// own statistics, pg_stat_xact_user_tables); the reconciler finds a PENDING verification, and
// neither a settled nor a rejected one; a rejection releases the session, which then takes a
// new verification, while a session still held takes no second one.
func TestSettleInPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, stores := newStores(t)
	st := stores.Pool()
	stale := func(t *testing.T) []string {
		t.Helper()
		vs, err := st.StalePending(ctx, time.Now().Add(time.Hour), 100)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, v := range vs {
			ids = append(ids, v.ID)
		}
		return ids
	}

	settled, rejected := pending(t, st, domain.StatusVerified), pending(t, st, domain.StatusVerified)
	if got := stale(t); len(got) != 2 {
		t.Fatalf("the reconciler finds %v, want the 2 PENDING verifications", got)
	}

	q, err := jobs.New(pool, jobs.Options{Schema: "verification"})
	if err != nil {
		t.Fatal(err)
	}
	err = pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		ok, err := store.New(tx).WithJobs(q).SettleVerifications(ctx, []domain.Settlement{{ID: settled.ID, ClientID: settled.ClientID, Charged: 5, BalanceAfter: 95, Completed: completed(t, settled)}})
		if err != nil || !ok[0] {
			t.Fatalf("settle: %v %v", ok, err)
		}
		var updates, hot int64
		// The table's own statistics, or its partitions' when it is hash-partitioned by client
		// (MNV_TEST_HASH_PARTITIONS).
		if err := tx.QueryRow(ctx, `SELECT coalesce(sum(n_tup_upd), 0)::bigint, coalesce(sum(n_tup_hot_upd), 0)::bigint
			FROM pg_stat_xact_user_tables WHERE relid = 'verification.verifications'::regclass
				OR relid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'verification.verifications'::regclass)`).
			Scan(&updates, &hot); err != nil {
			t.Fatal(err)
		}
		if updates != 1 || hot != 1 {
			t.Errorf("the settle updated %d row versions, %d of them in place; want 1 and 1: it wrote index entries", updates, hot)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := stale(t); len(got) != 1 || got[0] != rejected.ID {
		t.Fatalf("after the settle the reconciler finds %v, want only %s", got, rejected.ID)
	}

	if ok, err := st.RejectVerification(ctx, rejected.ClientID, rejected.ID); err != nil || !ok {
		t.Fatalf("reject: %v %v", ok, err)
	}
	if got := stale(t); len(got) != 0 {
		t.Fatalf("after the rejection the reconciler finds %v, want none", got)
	}
	if v, err := st.SessionVerification(ctx, rejected.ClientID, rejected.SessionID); err != nil || v != nil {
		t.Fatalf("the released session holds %+v (%v), want none", v, err)
	}

	// The released session takes a new verification; a held one takes no second, even past
	// the session's own guard (used_at), which the index backs.
	again := rejected
	again.ID = uuid.NewString()
	if rec, err := st.RecordVerifications(ctx, []domain.Verification{again}, domain.NumberLimit{}, nil); err != nil || !rec[0].OK {
		t.Fatalf("a verification of the released session: %v %v", rec, err)
	}
	if _, err := pool.Exec(ctx, `UPDATE verification.sessions SET used_at = NULL WHERE id = $1`, again.SessionID); err != nil {
		t.Fatal(err)
	}
	twice := again
	twice.ID = uuid.NewString()
	if _, err := st.RecordVerifications(ctx, []domain.Verification{twice}, domain.NumberLimit{}, nil); err == nil {
		t.Error("a second verification of a held session was recorded")
	}
	if v, err := st.SessionVerification(ctx, again.ClientID, again.SessionID); err != nil || v == nil || v.ID != again.ID {
		t.Fatalf("the session holds %+v (%v), want %s", v, err, again.ID)
	}
}
