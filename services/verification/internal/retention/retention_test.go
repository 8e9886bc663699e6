package retention_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/platform/crypto"
	"github.com/mnvhq/mnv/services/platform/money"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/phone"
	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/platform/purge"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
	"github.com/mnvhq/mnv/services/verification/internal/retention"
	"github.com/mnvhq/mnv/services/verification/internal/store"
	"github.com/mnvhq/mnv/services/verification/internal/stuckplus"
	"github.com/mnvhq/mnv/services/verification/internal/verificationtest"
)

// seed writes rows with chosen ages straight into the schema: the purges judge by timestamps,
// and waiting days for them is not a test.
type seed struct {
	t      *testing.T
	pool   *pgxpool.Pool
	vault  *phone.Vault
	client string
}

func (s seed) exec(sql string, args ...any) {
	s.t.Helper()
	if _, err := s.pool.Exec(context.Background(), sql, args...); err != nil {
		s.t.Fatal(err)
	}
}

// session adds a capture session that expired age ago.
func (s seed) session(age time.Duration) string {
	id := uuid.NewString()
	s.exec(`INSERT INTO verification.sessions (id, client_id, source, status, created_at, expires_at)
		VALUES ($1, $2, 'SDK', 'CAPTURED', now() - make_interval(secs => $3) - interval '5 minutes', now() - make_interval(secs => $3))`,
		id, s.client, age.Seconds())
	return id
}

// verification adds a verification of session with status.
func (s seed) verification(session, status string) string {
	id := uuid.NewString()
	outcome := status
	if status == "REJECTED" {
		outcome = "NOT_VERIFIED"
	}
	s.exec(`INSERT INTO verification.verifications (id, client_id, session_id, status, outcome, reason, operator_id, service_type,
		number_sealed, number_hash, charged) VALUES ($1, $2, $3, $4, $5, 'R', 'sandbox', 'HEADER_ENRICHMENT', '\x01', '\x02', 1)`,
		id, s.client, session, status, outcome)
	return id
}

// transaction adds a browser flow of code that expired age ago, captured into session.
func (s seed) transaction(code string, age time.Duration, session *string) string {
	id := uuid.NewString()
	s.exec(`INSERT INTO verification.transactions (id, client_id, service_code, metadata_id, features, status, session_id, blob, expires_at)
		VALUES ($1, $2, $3, 'm', '{}', 'CAPTURED', $4, CASE WHEN $3 = 'VERIFY' THEN 'sealed-blob' END, now() - make_interval(secs => $5))`,
		id, s.client, code, session, age.Seconds())
	return id
}

// stuckPlus adds a stuck-plus session captured age ago, with one reveal audited.
func (s seed) stuckPlus(age time.Duration, e164 string) string {
	id := uuid.NewString()
	tx := s.transaction("STUCK_PLUS", age, nil)
	s.exec(`INSERT INTO verification.stuck_plus_sessions (id, client_id, transaction_id, metadata_id, operator_id, number_sealed,
		number_hash, number_masked, created_at) VALUES ($1, $2, $3, 'm', 'sandbox', $4, $5, $6, now() - make_interval(secs => $7))`,
		id, s.client, tx, s.vault.Seal(e164, "stuck_plus_sessions", id), s.vault.Hash(e164), phone.Mask(e164), age.Seconds())
	s.exec(`INSERT INTO verification.stuck_plus_reveals (id, client_id, session_id, key_id, reason, charged)
		VALUES (gen_random_uuid(), $1, $2, gen_random_uuid(), 'support ticket 42', 5)`, s.client, id)
	return id
}

func (s seed) count(sql string, args ...any) int {
	s.t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	return n
}

// charger stands in for accounts' ledger and counts the debits asked of it; a reveal needs
// nothing else of it.
type charger struct {
	money.Ledger
	debits int
}

func (c *charger) Debit(context.Context, money.Charge) (money.Charged, error) {
	c.debits++
	return money.Charged{Amount: 5}, nil
}

// TestPurgeKeepsWhatMoneyAndAuditNeed: rows past their retention go, younger ones stay, and
// so do verifications (the record of each charge), the sessions they reference, and the reveal
// audit. A stuck-plus session past its retention keeps its row and audit but no number: a
// reveal is NOT_FOUND and charges nothing.
func TestPurgeKeepsWhatMoneyAndAuditNeed(t *testing.T) {
	ctx := context.Background()
	pool := verificationtest.Database(t, 4)
	keyring, _ := crypto.ParseKeyring(crypto.NewKeySpec("t1"))
	hasher, _ := phone.NewHasher([]byte(crypto.NewSecret()))
	s := seed{t: t, pool: pool, vault: phone.NewVault("verification", keyring, hasher), client: uuid.NewString()}

	const day = 24 * time.Hour
	var gone []string
	for range 5 { // more than a batch
		gone = append(gone, s.session(2*day))
	}
	verified := s.session(2 * day)
	verification := s.verification(verified, "NOT_VERIFIED")
	rejected := s.session(2 * day)
	s.verification(rejected, "REJECTED")
	young := s.session(time.Hour)
	txSession := s.session(2 * day)
	oldTx := s.transaction("VERIFY", 2*day, &txSession)
	youngTx := s.transaction("VERIFY", time.Hour, nil)
	oldNumber, youngNumber := s.stuckPlus(40*day, "+971501110001"), s.stuckPlus(time.Hour, "+971501110002")

	rules := retention.Rules(store.New(pool), retention.Config{Sessions: day, StuckPlusNumbers: 30 * day})
	runner := &purge.Runner{Batch: 2, Log: zaptest.NewLogger(t), Rules: rules}
	removed, err := runner.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for rule, want := range map[string]int64{
		"expired browser transactions": 1, "expired capture sessions": 6, "stuck-plus numbers": 1,
	} {
		if removed[rule] != want {
			t.Errorf("%s: %d removed, want %d", rule, removed[rule], want)
		}
	}
	sessions := func(ids ...string) int {
		return s.count(`SELECT count(*) FROM verification.sessions WHERE id = ANY($1::text[]::uuid[])`, ids)
	}
	if n := sessions(append(gone, txSession)...); n != 0 {
		t.Errorf("%d expired, unreferenced sessions kept", n)
	}
	if n := sessions(verified, rejected, young); n != 3 {
		t.Errorf("%d of the 3 referenced or young sessions kept", n)
	}
	if n := s.count(`SELECT count(*) FROM verification.verifications WHERE id = $1`, verification); n != 1 {
		t.Error("a verification was purged")
	}
	if n := s.count(`SELECT count(*) FROM verification.transactions WHERE id = ANY($1::text[]::uuid[])`, []string{oldTx, youngTx}); n != 1 {
		t.Errorf("%d of the old and young VERIFY transactions left, want the young one", n)
	}
	if n := s.count(`SELECT count(*) FROM verification.transactions WHERE service_code = 'STUCK_PLUS'`); n != 2 {
		t.Errorf("%d STUCK_PLUS transactions left, want both (their sessions stay)", n)
	}
	if n := s.count(`SELECT count(*) FROM verification.stuck_plus_sessions WHERE number_sealed IS NULL AND number_hash IS NULL AND number_masked <> ''`); n != 1 {
		t.Errorf("%d stuck-plus sessions without their number, want the old one", n)
	}
	if n := s.count(`SELECT count(*) FROM verification.stuck_plus_reveals`); n != 2 {
		t.Errorf("%d reveal audit rows, want 2", n)
	}
	if again, err := runner.Once(ctx); err != nil || len(again) != 3 || again["expired capture sessions"]+again["stuck-plus numbers"] != 0 {
		t.Fatalf("a second round removed %v (%v), want nothing", again, err)
	}

	c := &charger{}
	stores := pg.NewStores(pool, func(db pg.DB) stuckplus.Store { return store.New(db) })
	sp := stuckplus.New(stores.Pool(), stores, s.vault, c, false)
	admin := principal.Principal{ClientID: s.client, KeyID: uuid.NewString(), Role: principal.RoleAdmin}
	if _, err := sp.Reveal(ctx, admin, oldNumber, "support ticket 43"); !errors.Is(err, domain.ErrNumberNotKept) {
		t.Fatalf("reveal past retention: %v, want ErrNumberNotKept", err)
	}
	if c.debits != 0 || s.count(`SELECT count(*) FROM verification.stuck_plus_reveals WHERE session_id = $1`, oldNumber) != 1 {
		t.Fatalf("a refused reveal charged %d or changed the audit", c.debits)
	}
	if r, err := sp.Reveal(ctx, admin, youngNumber, "support ticket 44"); err != nil || r.MobileNumber != "+971501110002" {
		t.Fatalf("reveal within retention: %+v %v", r, err)
	}
}
