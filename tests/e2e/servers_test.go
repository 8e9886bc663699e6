package e2e_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/tests/harness"
)

// TestServerPerService runs the whole flow with each service on a PostgreSQL server of its own
// (three private clusters, reached through MNV_ACCOUNTS_DATABASE_URL and its kin, no
// DATABASE_URL), as a deployment past one server does (docs/operations.md#past-one-postgresql):
// a service that reached another's tables through the database instead of its API would fail
// here. A verify is charged (accounts' server), its event reaches the client's webhook
// receiver (verification's server to connect's), a CSV import completes (connect's server),
// and each server holds its own service's schema and rows, and no other's.
func TestServerPerService(t *testing.T) {
	ctx := context.Background()
	s := ownSuite(t, harness.Options{Env: append(append([]string{}, mainEnv...), webhookEnv...), ServerPerService: true})
	rc := harness.StartReceiver(t)
	const within = 30 * time.Second
	c, err := s.CreateClient(ctx, 10, "--features", "VERIFY,SANDBOX,CONNECT")
	if err != nil {
		t.Fatal(err)
	}
	hook(t, s, rc, c, "/servers", harness.ReceiverConfig{})

	// A verify, charged by accounts.
	n := nextNumber()
	sess := openSession(t, s, c, sdkToken(t, s, c), headers{sandboxHeader: n})
	var v verification
	expect(t, s, http.StatusOK, "POST", "/v1/api/verify", keyOf(c), verifyBody(n, *sess.EncryptedMobileNumber)).decode(t, &v)
	if v.Status != "VERIFIED" || v.Charged != 1 || v.BalanceAfter == nil || *v.BalanceAfter != 9 {
		t.Fatalf("verification %+v, want VERIFIED, charged 1, balance after 9", v)
	}
	if b := balanceOf(t, s, c); b != 9 {
		t.Fatalf("balance %d after one verify from 10", b)
	}
	charges, sum, err := ledgerCharges(t, s, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(charges) != 1 || charges[v.VerificationID] != 1 || sum != 9 {
		t.Fatalf("ledger: charges %v summing to %d, want %s charged 1, 9 in all", charges, sum, v.VerificationID)
	}

	// Its event, through connect's deliveries.
	var completed struct {
		Status  string `json:"status"`
		Charged int64  `json:"charged"`
	}
	awaitEvent(t, rc, "/servers", "verification.completed", within, &completed, field("verificationId", v.VerificationID))
	if completed.Status != "VERIFIED" || completed.Charged != 1 {
		t.Fatalf("verification.completed %+v", completed)
	}

	// A CSV import, and its event.
	csv := "mobileNumber,externalId\n" + nextNumber() + ",s-1\n" + nextNumber() + ",s-2\n"
	job := waitJob(t, s, c, upload(t, s, c, "servers.csv", []byte(csv)).ID)
	if job.Status != "COMPLETED" || job.ImportedRows != 2 || job.FailedRows != 0 {
		t.Fatalf("import %+v, want COMPLETED with 2 rows imported", job)
	}
	awaitEvent(t, rc, "/servers", "import.completed", within, nil, field("importId", job.ID))

	// Where everything is.
	db := map[string]*pgx.Conn{}
	ids := map[string]string{}
	for _, name := range []string{"accounts", "verification", "connect"} {
		db[name] = connectTo(t, s.Databases[name])
		// Three servers, not three databases of one: each initdb gives its cluster an id.
		var id string
		if err := db[name].QueryRow(ctx, `SELECT system_identifier::text FROM pg_control_system()`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		for other, otherID := range ids {
			if id == otherID {
				t.Fatalf("%s and %s share a server (%s)", name, other, id)
			}
		}
		ids[name] = id
		var schemas []string
		if err := db[name].QueryRow(ctx, `SELECT coalesce(array_agg(nspname::text ORDER BY nspname), '{}')
			FROM pg_namespace WHERE nspname IN ('accounts', 'verification', 'connect')`).Scan(&schemas); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(schemas, []string{name}) {
			t.Fatalf("%s's server has the schemas %v, want only %s", name, schemas, name)
		}
	}
	count := func(name, query string, args ...any) int {
		t.Helper()
		var n int
		if err := db[name].QueryRow(ctx, query, args...).Scan(&n); err != nil {
			t.Fatalf("%s's server: %v", name, err)
		}
		return n
	}
	if n := referenceCount(t, db["accounts"], c.ID, "verification:"+v.VerificationID); n != 1 {
		t.Fatalf("%d ledger rows for the verification on accounts' server, want 1: %s", n, ledgerKinds(t, db["accounts"], c.ID))
	}
	if n := count("verification", `SELECT count(*) FROM verification.verifications
		WHERE client_id = $1 AND id = $2 AND status = 'VERIFIED' AND charged = 1`, c.ID, v.VerificationID); n != 1 {
		t.Fatalf("%d charged VERIFIED rows of the verification on its server, want 1", n)
	}
	if n := count("verification", `SELECT count(*) FROM verification.verifications WHERE client_id = $1`, c.ID); n != 1 {
		t.Fatalf("%d verifications of the client on verification's server, want 1", n)
	}
	if n := count("connect", `SELECT count(*) FROM connect.profiles WHERE client_id = $1`, c.ID); n != 2 {
		t.Fatalf("%d profiles of the client on connect's server, want the import's 2", n)
	}

	// Stopped with the suite: no server answers any more.
	s.Stop()
	for name, url := range s.Databases {
		if conn, err := pgx.Connect(ctx, url); err == nil {
			conn.Close(ctx)
			t.Errorf("%s's server still answers after the suite stopped", name)
		}
	}
}
