package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/tests/harness"
)

// dbOf connects to the suite's database (every schema), for what the API does not show: locks,
// records, the ledger's references.
func dbOf(t *testing.T, s *harness.Suite) *pgx.Conn {
	t.Helper()
	return connectTo(t, s.DatabaseURL)
}

// connectTo connects to the database at url until the test ends.
func connectTo(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	db, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	return db
}

// holdRow locks the row that query (SELECT … FOR UPDATE) selects, in a transaction of its own,
// until the returned release is called (or the test ends).
func holdRow(t *testing.T, s *harness.Suite, query string, args ...any) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn := dbOf(t, s)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tag, err := tx.Exec(ctx, query, args...); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("hold %q: %v (%d rows)", query, err, tag.RowsAffected())
	}
	released := false
	release = func() {
		if !released {
			released = true
			if err := tx.Rollback(ctx); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(release)
	return release
}

const holdBalanceSQL = `SELECT 1 FROM accounts.balances WHERE client_id = $1 FOR UPDATE`

// waitLockWaiters waits until n backends of app (the pool's application name: "mnv-connect";
// "mnv-accounts-batch" for accounts' debit batches, which have a pool of their own) wait for a
// lock. A request answered on early before that fails the test: it did not wait.
func waitLockWaiters(t *testing.T, db *pgx.Conn, app string, n int, early <-chan response) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var waiting int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		select {
		case r := <-early:
			t.Fatalf("answered %d %s before %d %s backends waited for a lock", r.status, r.raw, n, app)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d %s backends wait for a lock, want %d", waiting, app, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// inBackground runs call on its own goroutine; the channel gets its answer.
func inBackground(s *harness.Suite, method, path string, h headers, body string) <-chan response {
	out := make(chan response, 1)
	go func() {
		r, err := send(s, method, path, h, body)
		if err != nil {
			r.status, r.raw = -1, []byte(err.Error())
		}
		out <- r
	}()
	return out
}

func ledgerRows(t *testing.T, db *pgx.Conn, clientID string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM accounts.ledger WHERE client_id = $1`, clientID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// chargeUnheard makes a charge commit that its caller never hears of: it sends the request
// (which debits clientID) while the client's balance row is held, kills victim (the service
// that asked for the debit) once accounts waits for the row, lets the debit commit, and starts
// victim again.
func chargeUnheard(t *testing.T, s *harness.Suite, db *pgx.Conn, clientID, victim, method, path string, h headers, body string) {
	t.Helper()
	before := ledgerRows(t, db, clientID)
	release := holdBalance(t, s, clientID)
	answered := inBackground(s, method, path, h, body)
	waitLockWaiters(t, db, "mnv-accounts-batch", 1, nil)
	if err := s.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if r := <-answered; r.status == http.StatusOK {
		t.Fatalf("%s %s answered although %s was killed: %s", method, path, victim, r.raw)
	}
	release()
	deadline := time.Now().Add(15 * time.Second)
	for ledgerRows(t, db, clientID) == before {
		if time.Now().After(deadline) {
			t.Fatal("the debit whose caller died did not commit")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.Restart(victim); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitReady(context.Background(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

func holdBalance(t *testing.T, s *harness.Suite, clientID string) func() {
	t.Helper()
	return holdRow(t, s, holdBalanceSQL, clientID)
}

// referenceCount counts a client's ledger rows with reference.
func referenceCount(t *testing.T, db *pgx.Conn, clientID, reference string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM accounts.ledger WHERE client_id = $1 AND reference = $2`,
		clientID, reference).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestChargeHeardLate: a charge commits while its caller is gone (verification killed while
// accounts waits for the balance row), then the balance is spent. Whoever settles it later (the
// client's retry, the reconciler) must hear that charge, not a refusal: a refusal would reject
// the verification and release its blob, whose next verify would be charged again. The same
// holds for stuck-plus reveals, first and repeated.
func TestChargeHeardLate(t *testing.T) {
	s, err := harness.Start(context.Background(), harness.Options{Env: append([]string{"MNV_REVEAL_CHARGE_REPEATS=true"}, mainEnv...)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	db := dbOf(t, s)
	ctx := context.Background()

	// lostVerify opens a session and verifies it while verification dies; the charge commits.
	// It returns the verify body (to send again) and the verification's id.
	lostVerify := func(t *testing.T, c harness.Client, token string) (string, string) {
		t.Helper()
		n := nextNumber()
		sess := openSession(t, s, c, token, headers{sandboxHeader: n})
		body := verifyBody(n, *sess.EncryptedMobileNumber)
		chargeUnheard(t, s, db, c.ID, "verification", "POST", "/v1/api/verify", keyOf(c), body)
		var id, status string
		if err := db.QueryRow(ctx, `SELECT id::text, status FROM verification.verifications WHERE session_id = $1`, sess.SessionID).Scan(&id, &status); err != nil {
			t.Fatal(err)
		}
		if status != "PENDING" || referenceCount(t, db, c.ID, "verification:"+id) != 1 {
			t.Fatalf("verification %s is %s with %d charges, want PENDING and charged", id, status, referenceCount(t, db, c.ID, "verification:"+id))
		}
		return body, id
	}
	// spend verifies until the balance is gone.
	spend := func(t *testing.T, c harness.Client, token string) {
		t.Helper()
		for balanceOf(t, s, c) > 0 {
			if !verifyOnce(s, c, token) {
				t.Fatal("a verify failed while spending the balance")
			}
		}
		n := nextNumber()
		sess := openSession(t, s, c, token, headers{sandboxHeader: n})
		if r := callSuite(t, s, "POST", "/v1/api/verify", keyOf(c), verifyBody(n, *sess.EncryptedMobileNumber)); r.status != http.StatusPaymentRequired {
			t.Fatalf("verify on a spent balance: %d %s", r.status, r.raw)
		}
	}
	// checkOnce: the verification is VERIFIED with its one charge, and its blob is used.
	checkOnce := func(t *testing.T, c harness.Client, id, body string) {
		t.Helper()
		var status string
		var charged int64
		if err := db.QueryRow(ctx, `SELECT status, charged FROM verification.verifications WHERE id = $1`, id).Scan(&status, &charged); err != nil {
			t.Fatal(err)
		}
		if status != "VERIFIED" || charged != 1 || referenceCount(t, db, c.ID, "verification:"+id) != 1 {
			t.Fatalf("verification %s: %s charged %d, %d ledger rows; want VERIFIED with its one charge", id, status, charged, referenceCount(t, db, c.ID, "verification:"+id))
		}
		if r := callSuite(t, s, "POST", "/v1/api/verify", keyOf(c), body); r.status != http.StatusConflict {
			t.Fatalf("verifying the blob again: %d %s, want 409", r.status, r.raw)
		}
		if err := checkMoney(t, s, c); err != nil {
			t.Fatal(err)
		}
		if b := balanceOf(t, s, c); b != 0 {
			t.Fatalf("balance %d, want 0", b)
		}
	}

	t.Run("verify retried by the client", func(t *testing.T) {
		c, err := s.CreateClient(ctx, 3, "--features", "VERIFY,SANDBOX")
		if err != nil {
			t.Fatal(err)
		}
		token := sdkToken(t, s, c)
		body, id := lostVerify(t, c, token)
		spend(t, c, token)
		var v verification
		r := callSuite(t, s, "POST", "/v1/api/verify", keyOf(c), body)
		if r.status != http.StatusOK {
			t.Fatalf("retry of a verify whose charge committed: %d %s, want its verification", r.status, r.raw)
		}
		r.decode(t, &v)
		if v.VerificationID != id || v.Status != "VERIFIED" || v.Charged != 1 {
			t.Fatalf("retry answered %+v, want %s VERIFIED, charged 1", v, id)
		}
		checkOnce(t, c, id, body)
	})

	t.Run("verify settled by the reconciler", func(t *testing.T) {
		c, err := s.CreateClient(ctx, 2, "--features", "VERIFY,SANDBOX")
		if err != nil {
			t.Fatal(err)
		}
		token := sdkToken(t, s, c)
		body, id := lostVerify(t, c, token)
		spend(t, c, token)
		// The reconciler only takes verifications older than MNV_SETTLE_AFTER (30s by default).
		if err := s.Kill("verification", syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := s.Restart("verification", "MNV_SETTLE_AFTER=200ms", "MNV_RECONCILE_EVERY=100ms"); err != nil {
			t.Fatal(err)
		}
		if err := s.WaitReady(ctx, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(15 * time.Second)
		for {
			var status string
			if err := db.QueryRow(ctx, `SELECT status FROM verification.verifications WHERE id = $1`, id).Scan(&status); err != nil {
				t.Fatal(err)
			}
			if status != "PENDING" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the reconciler did not settle the verification")
			}
			time.Sleep(100 * time.Millisecond)
		}
		checkOnce(t, c, id, body)
	})

	// reveals opens a stuck-plus session of c and returns its reveal path.
	reveals := func(t *testing.T, c harness.Client) string {
		t.Helper()
		var tr transaction
		r := callSuite(t, s, "POST", "/v1/api/opportunity", keyOf(c), `{"serviceCode":"STUCK_PLUS","metadataId":"lead"}`)
		if r.status != http.StatusOK {
			t.Fatalf("opportunity: %d %s", r.status, r.raw)
		}
		r.decode(t, &tr)
		allowShopOn(t, s, c)
		if r := callSuite(t, s, "POST", "/v1/api/web/transactions/"+tr.TransactionID+"/capture", headers{sandboxHeader: nextNumber(), "Origin": shopOrigin}, ""); r.status != http.StatusOK {
			t.Fatalf("capture: %d %s", r.status, r.raw)
		}
		r = callSuite(t, s, "GET", "/v1/api/opportunity/"+tr.TransactionID, keyOf(c), "")
		r.decode(t, &tr)
		if tr.StuckPlusSessionID == nil {
			t.Fatalf("resolved %s", r.raw)
		}
		return "/v1/api/me/stuck-plus/sessions/" + *tr.StuckPlusSessionID + "/reveal"
	}
	type revealed struct {
		MobileNumber string `json:"mobileNumber"`
		Charged      int64  `json:"charged"`
	}
	// checkReveals: every audited reveal of c has its one charge and no charge lacks its audit.
	checkReveals := func(t *testing.T, c harness.Client, wantAudited int, wantBalance int64) {
		t.Helper()
		var audited, charges int
		var charged int64
		if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM verification.stuck_plus_reveals WHERE client_id = $1),
				(SELECT coalesce(sum(charged), 0)::bigint FROM verification.stuck_plus_reveals WHERE client_id = $1),
				(SELECT count(*) FROM accounts.ledger WHERE client_id = $1 AND kind = 'STUCK_PLUS_REVEAL')`, c.ID).Scan(&audited, &charged, &charges); err != nil {
			t.Fatal(err)
		}
		if audited != wantAudited || charges != wantAudited || charged != 5*int64(wantAudited) {
			t.Fatalf("%d audited reveals charged %d in all, %d reveal charges in the ledger; want %d each charged 5", audited, charged, charges, wantAudited)
		}
		if b := balanceOf(t, s, c); b != wantBalance {
			t.Fatalf("balance %d, want %d", b, wantBalance)
		}
	}

	t.Run("first reveal retried on a spent balance", func(t *testing.T) {
		c, err := s.CreateClient(ctx, 6, "--features", "STUCK_PLUS,SANDBOX")
		if err != nil {
			t.Fatal(err)
		}
		reveal := reveals(t, c)
		reason := `{"reason":"customer called support, ticket 9"}`
		chargeUnheard(t, s, db, c.ID, "verification", "POST", reveal, meOf(c), reason)
		var got revealed
		r := callSuite(t, s, "POST", reveal, meOf(c), reason)
		if r.status != http.StatusOK {
			t.Fatalf("retry of a reveal whose charge committed, on a balance of 1: %d %s, want the reveal", r.status, r.raw)
		}
		r.decode(t, &got)
		if got.Charged != 5 || got.MobileNumber == "" {
			t.Fatalf("reveal %+v, want the number, charged 5", got)
		}
		checkReveals(t, c, 1, 1)
	})

	t.Run("repeat reveal retried", func(t *testing.T) {
		c, err := s.CreateClient(ctx, 20, "--features", "STUCK_PLUS,SANDBOX")
		if err != nil {
			t.Fatal(err)
		}
		reveal := reveals(t, c)
		first := callSuite(t, s, "POST", reveal, meOf(c), `{"reason":"first look for ticket 10"}`)
		if first.status != http.StatusOK {
			t.Fatalf("first reveal: %d %s", first.status, first.raw)
		}
		reason := `{"reason":"second look for ticket 10"}`
		chargeUnheard(t, s, db, c.ID, "verification", "POST", reveal, meOf(c), reason)
		// Charged, not audited: the retry must be this charge.
		if b := balanceOf(t, s, c); b != 10 {
			t.Fatalf("balance %d after a repeat reveal that was charged and not heard, want 10", b)
		}
		var got revealed
		r := callSuite(t, s, "POST", reveal, meOf(c), reason)
		if r.status != http.StatusOK {
			t.Fatalf("retry of the repeat reveal: %d %s", r.status, r.raw)
		}
		r.decode(t, &got)
		if got.Charged != 5 {
			t.Fatalf("repeat reveal %+v, want charged 5", got)
		}
		checkReveals(t, c, 2, 10)
		// The next repeat is a new reveal, with a charge of its own.
		if r := callSuite(t, s, "POST", reveal, meOf(c), `{"reason":"third look for ticket 10"}`); r.status != http.StatusOK {
			t.Fatalf("third reveal: %d %s", r.status, r.raw)
		}
		checkReveals(t, c, 3, 5)
	})
}

// ledgerKinds lists a client's ledger as "KIND amount reference" lines, oldest first, for
// failure messages.
func ledgerKinds(t *testing.T, db *pgx.Conn, clientID string) string {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT kind, amount, reference FROM accounts.ledger WHERE client_id = $1 ORDER BY seq`, clientID)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for rows.Next() {
		var kind, ref string
		var amount int64
		if err := rows.Scan(&kind, &amount, &ref); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %+d %s; ", kind, amount, ref)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
