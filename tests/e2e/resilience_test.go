package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/tests/harness"
)

// TestRestartsLoseNoMoney keeps a steady load of SDK sessions and verifies running while
// accounts, then verification, is stopped (killed, or stopped gracefully) and started again.
// Once the reconciler has run, every charge in the ledger is a kept verification, every
// charged verification is in the ledger, and the balance is the ledger's sum; the services that
// were not restarted serve again on their own.
func TestRestartsLoseNoMoney(t *testing.T) {
	s, err := harness.Start(context.Background(), harness.Options{Env: []string{
		"MNV_CLIENT_RATE=100000", "MNV_CLIENT_BURST=100000", "MNV_NUMBER_ATTEMPTS_PER_HOUR=100000",
		"MNV_SETTLE_AFTER=500ms", "MNV_RECONCILE_EVERY=200ms",
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c, err := s.CreateClient(context.Background(), 100_000, "--features", "VERIFY,SANDBOX")
	if err != nil {
		t.Fatal(err)
	}
	token := sdkToken(t, s, c)

	for _, tt := range []struct {
		victim string
		sig    syscall.Signal
	}{
		{"accounts", syscall.SIGKILL},
		{"accounts", syscall.SIGTERM},
		{"verification", syscall.SIGKILL},
	} {
		t.Run(tt.victim+"/"+tt.sig.String(), func(t *testing.T) {
			stop := make(chan struct{})
			var (
				wg               sync.WaitGroup
				verified, failed atomic.Int32
			)
			// Four callers, each opening a session and verifying it about 25 times a second.
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						case <-time.After(40 * time.Millisecond):
						}
						if verifyOnce(s, c, token) {
							verified.Add(1)
						} else {
							failed.Add(1)
						}
					}
				}()
			}
			time.Sleep(time.Second)
			if err := s.Kill(tt.victim, tt.sig); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
			if err := s.Restart(tt.victim); err != nil {
				t.Fatal(err)
			}
			if err := s.WaitReady(context.Background(), 30*time.Second); err != nil {
				t.Fatal(err)
			}
			before := verified.Load()
			time.Sleep(time.Second)
			close(stop)
			wg.Wait()
			t.Logf("%d verified, %d failed across the restart of %s", verified.Load(), failed.Load(), tt.victim)
			if verified.Load() == before {
				t.Fatalf("no verification succeeded in the second after %s came back", tt.victim)
			}
			// The reconciler settles what was left PENDING within a second or so.
			deadline := time.Now().Add(20 * time.Second)
			for {
				err := checkMoney(t, s, c)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal(err)
				}
				time.Sleep(300 * time.Millisecond)
			}
		})
	}
}

// verifyOnce opens a sandbox session and verifies its number, as an app and its backend
// would; it reports whether the verification succeeded. It may run on any goroutine.
func verifyOnce(s *harness.Suite, c harness.Client, token string) bool {
	number := nextNumber()
	r, err := send(s, "POST", "/v1/api/sdk/session", headers{"X-Sdk-Token": token, "X-Client-Id": c.ID, sandboxHeader: number},
		`{"platform":"ANDROID","appVersion":"1.2.3"}`)
	if err != nil || r.status != http.StatusOK {
		return false
	}
	var sess session
	if json.Unmarshal(r.env.Data, &sess) != nil || sess.EncryptedMobileNumber == nil {
		return false
	}
	r, err = send(s, "POST", "/v1/api/verify", keyOf(c), verifyBody(number, *sess.EncryptedMobileNumber))
	return err == nil && r.status == http.StatusOK
}

// TestReadinessIsTheGateways stops each service behind the gateway in turn: the gateway's
// /readyz stays 200 (one service away must not take every gateway out of rotation) and names
// the service as UNREACHABLE; that service's routes answer 503 in the envelope within a second or so, the
// others' routes keep working; all is SERVING again once it is back, without the gateway being
// restarted.
func TestReadinessIsTheGateways(t *testing.T) {
	s, err := harness.Start(context.Background(), harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if err := s.WaitReady(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	c, err := s.CreateClient(context.Background(), 10, "--features", "VERIFY,CONNECT,STUCK_PLUS")
	if err != nil {
		t.Fatal(err)
	}
	waitState := func(name, state string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			states, err := s.Backends(context.Background())
			if err != nil {
				t.Fatalf("/readyz while %s is %s: %v", name, state, err)
			}
			if states[name] == state {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz still lists %s as %s, want %s", name, states[name], state)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	type route struct{ method, path, body string }
	clients := route{"GET", "/v1/api/clients", ""}
	for _, tt := range []struct {
		victim string
		dead   route // a route of the victim
		live   route // a route that does not need it
	}{
		// Every credential is checked by accounts: without it only the gateway's own routes work.
		{"accounts", clients, route{"GET", "/v1/api/openapi.json", ""}},
		{"verification", route{"POST", "/v1/api/opportunity", `{"serviceCode":"STUCK_PLUS","metadataId":"lead-1"}`}, clients},
		{"connect", route{"GET", "/v1/api/me/connect/profiles", ""}, clients},
	} {
		t.Run(tt.victim, func(t *testing.T) {
			if err := s.Kill(tt.victim, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			waitState(tt.victim, "UNREACHABLE")

			began := time.Now()
			r, err := send(s, tt.dead.method, tt.dead.path, keyOf(c), tt.dead.body)
			if err != nil {
				t.Fatal(err)
			}
			if took := time.Since(began); took > 3*time.Second {
				t.Errorf("%s %s answered in %v, want within a second or so", tt.dead.method, tt.dead.path, took)
			}
			if r.status != http.StatusServiceUnavailable || r.code() != "UNAVAILABLE" || r.env.Success {
				t.Errorf("%s %s with %s away: %d %s, want the 503 envelope", tt.dead.method, tt.dead.path, tt.victim, r.status, r.raw)
			}
			req, _ := http.NewRequest(tt.live.method, s.GatewayURL+tt.live.path, strings.NewReader(tt.live.body))
			for k, v := range keyOf(c) {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s %s with %s away: %d, want 200", tt.live.method, tt.live.path, tt.victim, resp.StatusCode)
			}

			if err := s.Restart(tt.victim); err != nil {
				t.Fatal(err)
			}
			if err := s.WaitReady(context.Background(), 20*time.Second); err != nil {
				t.Fatal(err)
			}
			if r, err := send(s, tt.dead.method, tt.dead.path, keyOf(c), tt.dead.body); err != nil || r.status != http.StatusOK {
				t.Fatalf("%s %s once %s is back: %v %d %s", tt.dead.method, tt.dead.path, tt.victim, err, r.status, r.raw)
			}
		})
	}
}

// TestGracefulStopFinishesInFlight stops the gateway, then connect, with SIGTERM while an
// upload is streaming through both: the upload must still be answered 202 and its file
// imported whole.
func TestGracefulStopFinishesInFlight(t *testing.T) {
	s, err := harness.Start(context.Background(), harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	for _, victim := range []string{"gateway", "connect"} {
		t.Run(victim, func(t *testing.T) {
			c, err := s.CreateClient(context.Background(), 0, "--features", "CONNECT")
			if err != nil {
				t.Fatal(err)
			}
			const rows = 2_000
			pr, pw := io.Pipe()
			type answer struct {
				status int
				body   []byte
				err    error
			}
			answered := make(chan answer, 1)
			go func() {
				req, _ := http.NewRequest("POST", s.GatewayURL+"/v1/api/me/connect/import", pr)
				req.Header.Set("Content-Type", "text/csv")
				req.Header.Set("X-Api-Key", c.APIKey)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					answered <- answer{err: err}
					return
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				answered <- answer{resp.StatusCode, b, err}
			}()
			write := func(from, to int) {
				for i := from; i < to; i++ {
					if _, err := fmt.Fprintf(pw, "+97155%07d,E%d\n", i, i); err != nil {
						t.Fatal(err)
					}
				}
			}
			if _, err := io.WriteString(pw, "mobileNumber,externalId\n"); err != nil {
				t.Fatal(err)
			}
			write(0, rows/2)
			time.Sleep(300 * time.Millisecond) // the request is in flight, through to connect
			stopped := make(chan error, 1)
			go func() { stopped <- s.Kill(victim, syscall.SIGTERM) }()
			time.Sleep(500 * time.Millisecond) // the stop has begun and waits for the upload
			select {
			case err := <-stopped:
				t.Fatalf("%s stopped with an upload in flight: %v", victim, err)
			default:
			}
			write(rows/2, rows)
			pw.Close()
			a := <-answered
			if a.err != nil || a.status != http.StatusAccepted {
				t.Fatalf("upload across the stop of %s: %d %v %s", victim, a.status, a.err, a.body)
			}
			if err := <-stopped; err != nil {
				t.Fatal(err)
			}
			if err := s.Restart(victim); err != nil {
				t.Fatal(err)
			}
			if err := s.WaitReady(context.Background(), 30*time.Second); err != nil {
				t.Fatal(err)
			}
			var env struct {
				Data importJob `json:"data"`
			}
			if err := json.Unmarshal(a.body, &env); err != nil {
				t.Fatal(err)
			}
			if j := waitJob(t, s, c, env.Data.ID); j.Status != "COMPLETED" || j.ImportedRows != rows {
				t.Fatalf("the upload made across the stop imported %+v, want %d rows", j, rows)
			}
		})
	}
}

// checkMoney compares the ledger's VERIFICATION rows with the kept verifications.
func checkMoney(t *testing.T, s *harness.Suite, c harness.Client) error {
	t.Helper()
	charges, sum, err := ledgerCharges(t, s, c)
	if err != nil {
		return err
	}
	kept := map[string]int64{}
	for page := 0; ; page++ {
		var l struct {
			Items      []verification `json:"items"`
			TotalPages int            `json:"totalPages"`
		}
		r := callSuite(t, s, "GET", fmt.Sprintf("/v1/api/verifications?size=100&page=%d", page), keyOf(c), "")
		if r.status != http.StatusOK {
			return fmt.Errorf("verifications: %d %s", r.status, r.raw)
		}
		r.decode(t, &l)
		for _, v := range l.Items {
			kept[v.VerificationID] = v.Charged
		}
		if page+1 >= l.TotalPages {
			break
		}
	}
	for id, amount := range charges {
		if got, ok := kept[id]; !ok || got != amount {
			return fmt.Errorf("charge %s (%d) has no kept verification (%d, %v)", id, amount, got, ok)
		}
	}
	for id, amount := range kept {
		if amount > 0 && charges[id] != amount {
			return fmt.Errorf("verification %s charged %d is not in the ledger", id, amount)
		}
	}
	if b := balanceOf(t, s, c); b != sum {
		return fmt.Errorf("balance %d != ledger sum %d", b, sum)
	}
	return nil
}

// TestImportSurvivesRestart stops connect in the middle of a large import, gracefully and by
// SIGKILL, and checks that the job then completes with every row imported exactly once: the
// rows committed before the stop are neither lost nor imported again (they would count as
// updates), and no profile is duplicated.
func TestImportSurvivesRestart(t *testing.T) {
	s, err := harness.Start(context.Background(), harness.Options{ProcessEnv: map[string][]string{
		"connect": {"MNV_IMPORT_LEASE=3s"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	conn, err := pgx.Connect(context.Background(), s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	const rows = 100_000
	var file bytes.Buffer
	file.WriteString("mobileNumber,externalId\n")
	for i := range rows {
		fmt.Fprintf(&file, "+97150%07d,E%d\n", i, i)
	}

	for _, tt := range []struct {
		sig               syscall.Signal
		wantInterruptions int
	}{
		{syscall.SIGTERM, 0}, // handed back at once, not a crash
		{syscall.SIGKILL, 1}, // resumed once the lease ran out
	} {
		t.Run(tt.sig.String(), func(t *testing.T) {
			c, err := s.CreateClient(context.Background(), 0, "--features", "CONNECT")
			if err != nil {
				t.Fatal(err)
			}
			job := upload(t, s, c, "big.csv", file.Bytes())
			deadline := time.Now().Add(30 * time.Second)
			for {
				j := getJob(t, s, c, job.ID)
				if j.Status == "COMPLETED" || j.Status == "FAILED" {
					t.Fatalf("the import ended before the stop (%+v): make the file bigger", j)
				}
				if j.Status == "RUNNING" && j.ImportedRows > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the import did not start running: %+v", j)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := s.Kill("connect", tt.sig); err != nil {
				t.Fatal(err)
			}
			var status string
			var processed int64
			if err := conn.QueryRow(context.Background(), `SELECT status, processed_records FROM connect.import_jobs WHERE id = $1`,
				job.ID).Scan(&status, &processed); err != nil {
				t.Fatal(err)
			}
			t.Logf("stopped with %d of %d records processed, job %s", processed, rows, status)
			if wantStatus := map[syscall.Signal]string{syscall.SIGTERM: "QUEUED", syscall.SIGKILL: "RUNNING"}[tt.sig]; status != wantStatus {
				t.Errorf("job %s after %v, want %s", status, tt.sig, wantStatus)
			}
			if err := s.Restart("connect"); err != nil {
				t.Fatal(err)
			}
			if err := s.WaitReady(context.Background(), 30*time.Second); err != nil {
				t.Fatal(err)
			}
			j := waitJob(t, s, c, job.ID)
			if j.Status != "COMPLETED" || j.TotalRows != rows || j.ImportedRows != rows || j.UpdatedRows != 0 || j.FailedRows != 0 {
				t.Fatalf("after the restart: %+v, want %d rows imported once", j, rows)
			}
			var profiles, interruptions int
			if err := conn.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM connect.profiles WHERE client_id = $1),
				(SELECT interruptions FROM connect.import_jobs WHERE id = $2)`, c.ID, job.ID).Scan(&profiles, &interruptions); err != nil {
				t.Fatal(err)
			}
			if profiles != rows || interruptions != tt.wantInterruptions {
				t.Fatalf("%d profiles (want %d), %d interruptions (want %d)", profiles, rows, interruptions, tt.wantInterruptions)
			}
		})
	}
}

// TestDatabaseOutageIsUnavailable gives verification a database of its own, as a deployment
// may, and closes it to connections: verification's routes answer 503 UNAVAILABLE (a condition
// to retry, not an internal error), accounts' routes keep working, and once the database
// accepts connections again verification serves without a restart.
func TestDatabaseOutageIsUnavailable(t *testing.T) {
	ctx := context.Background()
	// Dropped by a t.Cleanup, which runs after every defer below: the suite is stopped and the
	// database open to connections again by then.
	own := pgtest.NewDatabase(t)
	s, err := harness.Start(ctx, harness.Options{ProcessEnv: map[string][]string{
		"verification": {"MNV_VERIFICATION_DATABASE_URL=" + own},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c, err := s.CreateClient(ctx, 10, "--features", "VERIFY,SANDBOX")
	if err != nil {
		t.Fatal(err)
	}
	server, err := pgtest.ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	cfg, err := pgx.ParseConfig(own)
	if err != nil {
		t.Fatal(err)
	}
	db := pgx.Identifier{cfg.Database}.Sanitize()
	setOpen := func(open bool) {
		t.Helper()
		if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s ALLOW_CONNECTIONS %t", db, open)); err != nil {
			t.Fatal(err)
		}
		if !open {
			if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, cfg.Database); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer setOpen(true) // so drop can connect whatever happened

	expect := func(path string, status int, code string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := callSuite(t, s, "GET", path, keyOf(c), "")
			if r.status == status && (code == "" || r.code() == code) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s: %d %s, want %d %s", path, r.status, r.raw, status, code)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	expect("/v1/api/verifications", http.StatusOK, "")
	setOpen(false)
	expect("/v1/api/verifications", http.StatusServiceUnavailable, "UNAVAILABLE")
	expect("/v1/api/clients", http.StatusOK, "")
	if logs := s.Logs("verification"); !strings.Contains(logs, "database unreachable") {
		t.Error("verification did not log the unreachable database")
	}
	setOpen(true)
	expect("/v1/api/verifications", http.StatusOK, "")
}

// TestReconcilerSkipsAPoisonedCharge leaves two verifications PENDING, as a crash between
// recording and charging would: the older one for a client accounts does not know, whose debit
// accounts refuses every time, and a newer one of a real client. The reconciler must settle the
// second (one charge) and keep retrying the first without letting it block the queue.
func TestReconcilerSkipsAPoisonedCharge(t *testing.T) {
	ctx := context.Background()
	s, err := harness.Start(ctx, harness.Options{Env: []string{"MNV_SETTLE_AFTER=200ms", "MNV_RECONCILE_EVERY=100ms"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c, err := s.CreateClient(ctx, 10, "--features", "VERIFY,SANDBOX")
	if err != nil {
		t.Fatal(err)
	}
	db, err := pgx.Connect(ctx, s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	pending := func(client string, age time.Duration) string {
		t.Helper()
		var id string
		// As a record left it: the verification, and its place among the unsettled ones.
		err := db.QueryRow(ctx, `WITH s AS (
				INSERT INTO verification.sessions (id, client_id, source, operator_id, status, expires_at, used_at)
				VALUES (gen_random_uuid(), $1, 'SDK', 'sandbox', 'CAPTURED', now(), now() - $2::interval) RETURNING id),
			v AS (
				INSERT INTO verification.verifications (id, client_id, session_id, status, outcome, reason, operator_id,
					service_type, number_sealed, number_hash, created_at)
				SELECT gen_random_uuid(), $1, s.id, 'PENDING', 'VERIFIED', 'NUMBER_MATCH', 'sandbox', 'HEADER_ENRICHMENT',
					'\x00', decode(md5(random()::text), 'hex'), now() - $2::interval FROM s
				RETURNING id, created_at),
			u AS (INSERT INTO verification.unsettled (client_id, id, recorded_at) SELECT $1, id, created_at FROM v)
			SELECT id::text FROM v`, client, age.String()).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	poisoned := pending("0b0f5a40-4c2f-4f8e-9d3c-1a2b3c4d5e6f", time.Hour)
	real := pending(c.ID, time.Minute)

	statusOf := func(id string) (string, int64) {
		var st string
		var charged int64
		if err := db.QueryRow(ctx, `SELECT status, charged FROM verification.verifications WHERE id = $1`, id).Scan(&st, &charged); err != nil {
			t.Fatal(err)
		}
		return st, charged
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, charged := statusOf(real)
		if st == "VERIFIED" && charged == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the real client's verification is still %s (charged %d) behind a charge that always fails", st, charged)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st, _ := statusOf(poisoned); st != "PENDING" {
		t.Errorf("the unchargeable verification is %s; it must stay PENDING", st)
	}
	var balance int64
	if err := db.QueryRow(ctx, `SELECT balance FROM accounts.balances WHERE client_id = $1`, c.ID).Scan(&balance); err != nil {
		t.Fatal(err)
	}
	if balance != 9 {
		t.Errorf("balance %d after one settled verification of 1 credit, want 9", balance)
	}
}
