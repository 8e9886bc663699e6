package migrations_test

import (
	"context"
	"io/fs"
	"os"
	"testing"

	"github.com/google/uuid"

	"github.com/mnvhq/mnv/services/platform/idempotency"
	"github.com/mnvhq/mnv/services/platform/jobs"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/services/platform/tenancy"
	"github.com/mnvhq/mnv/services/verification/migrations"
)

// TestUpgradeMatchesFresh: a database created by any shipped version of the migrations
// (testdata/history/<commit>) and migrated to these has the schema of a fresh one.
func TestUpgradeMatchesFresh(t *testing.T) {
	pgtest.CheckUpgrades(t, "verification", migrations.FS, os.DirFS("testdata/history"), idempotency.Migrations())
}

// TestTablesFollowTheTenancyRule: the migrated schema, River's tables included (the app migrates
// them), is what its declaration says it is: every table declared, and each tenant table
// distributable by client_id (docs/operations.md#past-one-postgresql).
func TestTablesFollowTheTenancyRule(t *testing.T) {
	ctx := context.Background()
	pool, err := pg.Open(ctx, pgtest.NewDatabase(t), pg.PoolConfig{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pg.Migrate(ctx, pool, "verification", migrations.FS, idempotency.Migrations()); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Migrate(ctx, pool, "verification"); err != nil {
		t.Fatal(err)
	}
	pgtest.CheckTenancy(t, pool, migrations.Tables)
}

// TestUpgradeKeepsRows: rows written under the schema shipped at 26466c0 survive the migrations
// to the tenant keys, and what they added is filled in: the settle queue's client, and the
// lookups of the capabilities that arrive alone (a transaction id, an OAuth state, a CAMARA
// request and token). The upgraded schema then partitions by client_id with its rows.
func TestUpgradeKeepsRows(t *testing.T) {
	ctx := context.Background()
	pool, err := pg.Open(ctx, pgtest.NewDatabase(t), pg.PoolConfig{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	shipped, err := fs.Sub(os.DirFS("testdata/history"), "26466c0")
	if err != nil {
		t.Fatal(err)
	}
	if err := pg.Migrate(ctx, pool, "verification", shipped, idempotency.Migrations()); err != nil {
		t.Fatal(err)
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
	}
	client, other := uuid.NewString(), uuid.NewString()
	pending, used, captured := uuid.NewString(), uuid.NewString(), uuid.NewString()
	stateHash := []byte("0123456789abcdef0123456789abcdef")
	exec(`INSERT INTO verification.sessions (id, client_id, source, status, method, state_hash, expires_at)
		VALUES ($1, $2, 'WEB', 'AUTHORIZATION_PENDING', 'NETWORK_API', $3, now() + interval '5 minutes')`, pending, client, stateHash)
	exec(`INSERT INTO verification.sessions (id, client_id, source, status, expires_at) VALUES
		($1, $3, 'SDK', 'CAPTURED', now() + interval '5 minutes'),
		($2, $3, 'CAMARA', 'CAPTURED', now() + interval '5 minutes')`, used, captured, client)
	verification := uuid.NewString()
	exec(`INSERT INTO verification.verifications (id, client_id, session_id, status, outcome, reason, operator_id, service_type,
		number_sealed, number_hash) VALUES ($1, $2, $3, 'PENDING', 'VERIFIED', 'MATCH', 'sandbox', 'HEADER_ENRICHMENT', '\x01', '\x02')`,
		verification, client, used)
	exec(`INSERT INTO verification.unsettled (id, recorded_at) SELECT id, created_at FROM verification.verifications`)
	webTx, stuckTx := uuid.NewString(), uuid.NewString()
	exec(`INSERT INTO verification.transactions (id, client_id, service_code, metadata_id, features, status, session_id, expires_at) VALUES
		($1, $3, 'VERIFY', 'm', '{}', 'AUTHORIZATION_PENDING', $4, now() + interval '5 minutes'),
		($2, $3, 'STUCK_PLUS', 'm', '{}', 'CAPTURED', NULL, now() + interval '5 minutes')`, webTx, stuckTx, client, pending)
	stuck := uuid.NewString()
	exec(`INSERT INTO verification.stuck_plus_sessions (id, client_id, transaction_id, metadata_id, operator_id, number_sealed,
		number_hash, number_masked) VALUES ($1, $2, $3, 'm', 'sandbox', '\x01', '\x02', '+97150***0001')`, stuck, client, stuckTx)
	exec(`INSERT INTO verification.stuck_plus_reveals (id, client_id, session_id, key_id, reason, charged, status, reference)
		VALUES (gen_random_uuid(), $1, $2, gen_random_uuid(), 'support ticket 42', 5, 'PENDING', 'reveal:1')`, client, stuck)
	request, token := uuid.NewString(), uuid.NewString()
	exec(`INSERT INTO verification.camara_auth_requests (id, client_id, redirect_uri, state, nonce, scopes, response_mode,
		code_challenge, code_challenge_method, session_id, code_hash, expires_at)
		VALUES ($1, $2, 'https://app.example/cb', 's', 'n', '{}', 'query', 'c', 'S256', $3, '\x03', now() + interval '5 minutes')`,
		request, client, captured)
	exec(`INSERT INTO verification.camara_tokens (id, client_id, session_id, blob, scopes, features, expires_at)
		VALUES ($1, $2, $3, 'blob', '{}', '{}', now() + interval '5 minutes')`, token, client, captured)

	if err := pg.Migrate(ctx, pool, "verification", migrations.FS, idempotency.Migrations()); err != nil {
		t.Fatal(err)
	}
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
		return n
	}
	for table, want := range map[string]int{
		"sessions": 3, "verifications": 1, "transactions": 2, "stuck_plus_sessions": 1, "stuck_plus_reveals": 1,
		"camara_auth_requests": 1, "camara_tokens": 1,
	} {
		if n := count(`SELECT count(*) FROM verification.`+table+` WHERE client_id = $1`, client); n != want {
			t.Errorf("%s: %d rows of the client after the upgrade, want %d", table, n, want)
		}
	}
	if n := count(`SELECT count(*) FROM verification.unsettled WHERE client_id = $1 AND id = $2`, client, verification); n != 1 {
		t.Errorf("the unsettled verification has no client after the upgrade")
	}
	for kind, key := range map[string]any{
		"transaction": uuid.MustParse(webTx), "camara_request": uuid.MustParse(request), "camara_token": uuid.MustParse(token),
	} {
		if n := count(`SELECT count(*) FROM verification.client_lookups WHERE kind = $1 AND key = uuid_send($2) AND client_id = $3`,
			kind, key, client); n != 1 {
			t.Errorf("no %s lookup of the client after the upgrade", kind)
		}
	}
	if n := count(`SELECT count(*) FROM verification.client_lookups WHERE kind = 'transaction' AND key = uuid_send($1) AND client_id = $2`,
		uuid.MustParse(stuckTx), client); n != 1 {
		t.Errorf("no lookup of the STUCK_PLUS transaction after the upgrade")
	}
	if n := count(`SELECT count(*) FROM verification.client_lookups WHERE kind = 'state' AND key = $1 AND client_id = $2`, stateHash, client); n != 1 {
		t.Errorf("no lookup of the pending OAuth state after the upgrade")
	}
	// A row of one client no longer references another's.
	if _, err := pool.Exec(ctx, `INSERT INTO verification.verifications (id, client_id, session_id, status, outcome, reason, operator_id,
		service_type, number_sealed, number_hash) VALUES (gen_random_uuid(), $1, $2, 'VERIFIED', 'VERIFIED', 'MATCH', 'sandbox',
		'HEADER_ENRICHMENT', '\x01', '\x02')`, other, captured); !pg.IsForeignKeyViolation(err) {
		t.Errorf("a verification of another client's session: %v, want a foreign key violation", err)
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := tenancy.Partition(ctx, tx, migrations.Tables, 4); err != nil {
		t.Fatalf("the upgraded schema does not partition by client_id: %v", err)
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM verification.sessions`).Scan(&n); err != nil || n != 3 {
		t.Errorf("%d sessions after partitioning (%v), want 3", n, err)
	}
}
