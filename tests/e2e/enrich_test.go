package e2e_test

import (
	"context"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/mnvhq/mnv/tests/harness"
)

// TestEnrichmentCharges: an enrichment is recorded, charged once under its record's reference
// and written, or not charged at all: nothing is charged unless the enrichment is written, each
// enrichment is charged (also when its Idempotency-Key comes back after the key's record
// expired), an erasure racing an enrichment either waits for it or wins without a charge, and
// what no caller heard is settled by the reconciler.
func TestEnrichmentCharges(t *testing.T) {
	ctx := context.Background()
	s, err := harness.Start(ctx, harness.Options{Env: mainEnv})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	db := dbOf(t, s)

	newProfile := func(t *testing.T, c harness.Client) string {
		t.Helper()
		var p profile
		r := callSuite(t, s, "POST", "/v1/api/me/connect/profiles", meOf(c), `{"mobileNumber":"`+nextNumber()+`"}`)
		if r.status != http.StatusOK {
			t.Fatalf("profile: %d %s", r.status, r.raw)
		}
		r.decode(t, &p)
		return p.ID
	}
	enrichPath := func(id string) string { return "/v1/api/me/connect/profiles/" + id + "/enrich" }
	const reason = `{"reason":"fraud check"}`
	// records lists the statuses of a profile's enrichment records, oldest first, and checks
	// that each charged one has exactly its charge in the ledger and the others none.
	records := func(t *testing.T, c harness.Client, profileID string) []string {
		t.Helper()
		rows, err := db.Query(ctx, `SELECT e.status, e.charged,
				(SELECT count(*) FROM accounts.ledger l WHERE l.client_id = e.client_id AND l.reference = 'enrichment:' || e.id),
				(SELECT count(*) FROM accounts.ledger l WHERE l.client_id = e.client_id AND l.reference = 'refund:enrichment:' || e.id)
			FROM connect.enrichments e WHERE e.profile_id = $1 ORDER BY e.created_at`, profileID)
		if err != nil {
			t.Fatal(err)
		}
		var statuses []string
		for rows.Next() {
			var status string
			var charged int64
			var charges, refunds int
			if err := rows.Scan(&status, &charged, &charges, &refunds); err != nil {
				t.Fatal(err)
			}
			// A PENDING record's charge is not known yet; any other has exactly what it says.
			if settled := status == "SETTLED"; status != "PENDING" && (settled != (charged == 1) || charges-refunds != int(charged)) {
				t.Errorf("a %s record charged %d has %d charges and %d refunds in the ledger: %s", status, charged, charges, refunds, ledgerKinds(t, db, c.ID))
			}
			statuses = append(statuses, status)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return statuses
	}
	enrichmentCharges := func(t *testing.T, c harness.Client) int {
		t.Helper()
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM accounts.ledger WHERE client_id = $1 AND kind = 'CONNECT_ENRICHMENT'`, c.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	enrichedProfile := func(t *testing.T, c harness.Client, id string) *profile {
		t.Helper()
		r := callSuite(t, s, "GET", "/v1/api/me/connect/profiles/"+id, meOf(c), "")
		if r.status == http.StatusNotFound {
			return nil
		}
		var p profile
		r.decode(t, &p)
		return &p
	}
	connectClient := func(t *testing.T, balance int64) harness.Client {
		t.Helper()
		c, err := s.CreateClient(ctx, balance, "--features", "CONNECT")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	t.Run("each enrichment charged once", func(t *testing.T) {
		c := connectClient(t, 10)
		id := newProfile(t, c)
		for range 2 {
			if r := callSuite(t, s, "POST", enrichPath(id), meOf(c), reason); r.status != http.StatusOK {
				t.Fatalf("enrich: %d %s", r.status, r.raw)
			}
		}
		h := meOf(c)
		h["Idempotency-Key"] = "enrich-once"
		first := callSuite(t, s, "POST", enrichPath(id), h, reason)
		again := callSuite(t, s, "POST", enrichPath(id), h, reason)
		if first.status != http.StatusOK || again.status != http.StatusOK || again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("same key twice: %d, then %d replayed=%q", first.status, again.status, again.header.Get("Idempotent-Replayed"))
		}
		if got := records(t, c, id); !slices.Equal(got, []string{"SETTLED", "SETTLED", "SETTLED"}) || enrichmentCharges(t, c) != 3 {
			t.Fatalf("records %v, %d charges; want 3 settled with a charge each", got, enrichmentCharges(t, c))
		}
		if p := enrichedProfile(t, c, id); p == nil || p.Enrichment == nil || p.Enrichment.LineType != "MOBILE" {
			t.Fatalf("profile %+v, want its enrichment", p)
		}
	})

	t.Run("the same key after its record expired is a new enrichment", func(t *testing.T) {
		c := connectClient(t, 10)
		id := newProfile(t, c)
		h := meOf(c)
		h["Idempotency-Key"] = "enrich-daily"
		if r := callSuite(t, s, "POST", enrichPath(id), h, reason); r.status != http.StatusOK {
			t.Fatalf("enrich: %d %s", r.status, r.raw)
		}
		// What 24 hours do to the key.
		if tag, err := db.Exec(ctx, `DELETE FROM connect.idempotency_keys WHERE key = $1`, "enrich-daily"); err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("expire the key: %v (%d rows)", err, tag.RowsAffected())
		}
		r := callSuite(t, s, "POST", enrichPath(id), h, reason)
		if r.status != http.StatusOK || r.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("the key a day later: %d replayed=%q %s", r.status, r.header.Get("Idempotent-Replayed"), r.raw)
		}
		if n := enrichmentCharges(t, c); n != 2 {
			t.Fatalf("%d enrichment charges, want 2: the same key a day later was not charged: %s", n, ledgerKinds(t, db, c.ID))
		}
		if got := records(t, c, id); !slices.Equal(got, []string{"SETTLED", "SETTLED"}) {
			t.Fatalf("records %v, want 2 SETTLED", got)
		}
	})

	t.Run("refused: nothing charged, nothing written", func(t *testing.T) {
		c := connectClient(t, 0)
		id := newProfile(t, c)
		if r := callSuite(t, s, "POST", enrichPath(id), meOf(c), reason); r.status != http.StatusPaymentRequired {
			t.Fatalf("enrich on an empty balance: %d %s", r.status, r.raw)
		}
		if got := records(t, c, id); !slices.Equal(got, []string{"REJECTED"}) || enrichmentCharges(t, c) != 0 {
			t.Fatalf("records %v, %d charges; want one REJECTED, uncharged", got, enrichmentCharges(t, c))
		}
		if p := enrichedProfile(t, c, id); p == nil || p.Enrichment != nil {
			t.Fatalf("profile %+v, want it unenriched", p)
		}
	})

	t.Run("an erasure that came first wins, uncharged", func(t *testing.T) {
		c := connectClient(t, 10)
		id := newProfile(t, c)
		// The erasure queues for the profile's row first, the enrichment behind it.
		release := holdRow(t, s, `SELECT 1 FROM connect.profiles WHERE id = $1 FOR UPDATE`, id)
		erased := inBackground(s, "DELETE", "/v1/api/me/connect/profiles/"+id, meOf(c), "")
		waitLockWaiters(t, db, "mnv-connect", 1, nil)
		enriched := inBackground(s, "POST", enrichPath(id), meOf(c), reason)
		waitLockWaiters(t, db, "mnv-connect", 2, nil)
		release()
		if r := <-erased; r.status != http.StatusOK {
			t.Fatalf("erasure: %d %s", r.status, r.raw)
		}
		if r := <-enriched; r.status != http.StatusNotFound {
			t.Fatalf("enrichment of the profile erased meanwhile: %d %s, want 404", r.status, r.raw)
		}
		if n := enrichmentCharges(t, c); n != 0 || balanceOf(t, s, c) != 10 {
			t.Fatalf("%d enrichment charges, balance %d: the enrichment of an erased profile was charged", n, balanceOf(t, s, c))
		}
		if got := records(t, c, id); !slices.Equal(got, []string{"CANCELLED"}) {
			t.Fatalf("records %v, want one CANCELLED", got)
		}
	})

	// No row of connect is held while accounts answers (the charge saga debits outside any
	// transaction): an erasure meanwhile goes through, and the charge it beat is refunded.
	t.Run("an erasure does not wait for the enrichment being charged: refunded", func(t *testing.T) {
		c := connectClient(t, 10)
		id := newProfile(t, c)
		release := holdBalance(t, s, c.ID)
		enriched := inBackground(s, "POST", enrichPath(id), meOf(c), reason)
		waitLockWaiters(t, db, "mnv-accounts-batch", 1, enriched)
		if r := callSuite(t, s, "DELETE", "/v1/api/me/connect/profiles/"+id, meOf(c), ""); r.status != http.StatusOK {
			t.Fatalf("erasure while the enrichment is charged: %d %s", r.status, r.raw)
		}
		release()
		if r := <-enriched; r.status != http.StatusNotFound {
			t.Fatalf("enrichment of the profile erased during its charge: %d %s, want 404", r.status, r.raw)
		}
		if got := records(t, c, id); !slices.Equal(got, []string{"CANCELLED"}) || balanceOf(t, s, c) != 10 {
			t.Fatalf("records %v, balance %d; want one CANCELLED, its charge refunded: %s", got, balanceOf(t, s, c), ledgerKinds(t, db, c.ID))
		}
		if p := enrichedProfile(t, c, id); p != nil {
			t.Fatalf("the profile outlived its erasure: %+v", p)
		}
	})

	t.Run("a retry with the same key resumes the enrichment", func(t *testing.T) {
		c := connectClient(t, 10)
		id := newProfile(t, c)
		h := meOf(c)
		h["Idempotency-Key"] = "enrich-resume"
		// The enrichment is recorded, then waits for the profile; accounts goes away meanwhile.
		release := holdRow(t, s, `SELECT 1 FROM connect.profiles WHERE id = $1 FOR UPDATE`, id)
		first := inBackground(s, "POST", enrichPath(id), h, reason)
		waitLockWaiters(t, db, "mnv-connect", 1, first)
		if err := s.Kill("accounts", syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		back := func() {
			if err := s.Restart("accounts"); err != nil {
				t.Fatal(err)
			}
			if err := s.WaitReady(ctx, 30*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		restarted := false
		defer func() {
			if !restarted { // for the subtests after a failure
				back()
			}
		}()
		release()
		if r := <-first; r.status != http.StatusServiceUnavailable {
			t.Fatalf("enrichment with accounts away: %d %s, want 503", r.status, r.raw)
		}
		restarted = true
		back()
		if got := records(t, c, id); !slices.Equal(got, []string{"PENDING"}) {
			t.Fatalf("records %v, want one PENDING", got)
		}
		if r := callSuite(t, s, "POST", enrichPath(id), h, reason); r.status != http.StatusOK {
			t.Fatalf("retry: %d %s", r.status, r.raw)
		}
		if got := records(t, c, id); !slices.Equal(got, []string{"SETTLED"}) || enrichmentCharges(t, c) != 1 {
			t.Fatalf("records %v, %d charges; want the one record SETTLED with its charge", got, enrichmentCharges(t, c))
		}
	})

	// Last: it leaves connect with a reconciler that settles within a second.
	t.Run("the reconciler settles what nobody heard", func(t *testing.T) {
		c := connectClient(t, 10)
		kept, erased := newProfile(t, c), newProfile(t, c)
		chargeUnheard(t, s, db, c.ID, "connect", "POST", enrichPath(kept), meOf(c), reason)
		chargeUnheard(t, s, db, c.ID, "connect", "POST", enrichPath(erased), meOf(c), reason)
		if r := callSuite(t, s, "DELETE", "/v1/api/me/connect/profiles/"+erased, meOf(c), ""); r.status != http.StatusOK {
			t.Fatalf("erasure: %d %s", r.status, r.raw)
		}
		if a, b := records(t, c, kept), records(t, c, erased); !slices.Equal(a, []string{"PENDING"}) || !slices.Equal(b, []string{"PENDING"}) || balanceOf(t, s, c) != 8 {
			t.Fatalf("records %v and %v, balance %d; want both PENDING and charged", a, b, balanceOf(t, s, c))
		}
		if err := s.Kill("connect", syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := s.Restart("connect", "MNV_ENRICHMENT_SETTLE_AFTER=200ms", "MNV_ENRICHMENT_RECONCILE_EVERY=100ms"); err != nil {
			t.Fatal(err)
		}
		if err := s.WaitReady(ctx, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(15 * time.Second)
		for {
			a, b := records(t, c, kept), records(t, c, erased)
			if slices.Equal(a, []string{"SETTLED"}) && slices.Equal(b, []string{"CANCELLED"}) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("records %v and %v, want SETTLED and CANCELLED: %s", a, b, ledgerKinds(t, db, c.ID))
			}
			time.Sleep(100 * time.Millisecond)
		}
		if p := enrichedProfile(t, c, kept); p == nil || p.Enrichment == nil {
			t.Fatalf("profile %+v, want the enrichment the reconciler settled", p)
		}
		if b := balanceOf(t, s, c); b != 9 {
			t.Fatalf("balance %d, want 9 (one enrichment kept, the erased one's refunded): %s", b, ledgerKinds(t, db, c.ID))
		}
	})
}
