package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/tests/harness"
)

// TestCrashesLoseNoMoney kills accounts, then verification, in the middle of a burst of
// verifies, restarts them, and checks the money once the reconciler has run: every charge in
// the ledger is a kept verification, every charged verification is in the ledger, and the
// balance is the ledger's sum. Where the crash lands is up to the scheduler; the invariant must
// hold wherever it does.
func TestCrashesLoseNoMoney(t *testing.T) {
	s, err := harness.Start(context.Background(), harness.Options{Env: []string{
		"MNV_CLIENT_RATE=100000", "MNV_CLIENT_BURST=100000", "MNV_NUMBER_ATTEMPTS_PER_HOUR=100000",
		"MNV_SETTLE_AFTER=500ms", "MNV_RECONCILE_EVERY=200ms",
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c, err := s.CreateClient(context.Background(), 1000, "--features", "VERIFY,SANDBOX")
	if err != nil {
		t.Fatal(err)
	}
	token := sdkToken(t, s, c)

	for _, victim := range []string{"accounts", "verification"} {
		t.Run(victim, func(t *testing.T) {
			const n = 60
			blobs, numbers := make([]string, n), make([]string, n)
			for i := range n {
				numbers[i] = nextNumber()
				blobs[i] = *openSession(t, s, c, token, headers{sandboxHeader: numbers[i]}).EncryptedMobileNumber
			}
			// Eight workers verify one blob after another; the victim is killed once a quarter
			// have been answered, so others are in flight at that moment.
			var (
				wg       sync.WaitGroup
				answered atomic.Int32
				killed   = make(chan error, 1)
				next     = make(chan int, n)
			)
			statuses := make([]int, n)
			for i := range n {
				next <- i
			}
			close(next)
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range next {
						statuses[i] = callSuite(t, s, "POST", "/v1/api/verify", keyOf(c), verifyBody(numbers[i], blobs[i])).status
						if answered.Add(1) == n/4 {
							killed <- s.Kill(victim, syscall.SIGKILL)
						}
					}
				}()
			}
			wg.Wait()
			if err := <-killed; err != nil {
				t.Fatal(err)
			}
			if err := s.Restart(victim); err != nil {
				t.Fatal(err)
			}
			if err := s.WaitReady(context.Background(), 30*time.Second); err != nil {
				t.Fatal(err)
			}
			failed := 0
			for _, st := range statuses {
				if st != http.StatusOK {
					failed++
				}
			}
			t.Logf("%d of %d verifies failed while %s was down", failed, n, victim)
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

// checkMoney compares the ledger's VERIFICATION rows with the kept verifications.
func checkMoney(t *testing.T, s *harness.Suite, c harness.Client) error {
	t.Helper()
	charges := map[string]int64{}
	var sum int64
	for page := 0; ; page++ {
		var l struct {
			Items []struct {
				Kind      string `json:"kind"`
				Amount    int64  `json:"amount"`
				Reference string `json:"reference"`
			} `json:"items"`
			TotalPages int `json:"totalPages"`
		}
		r := callSuite(t, s, "GET", fmt.Sprintf("/v1/api/me/ledger?size=100&page=%d", page), meOf(c), "")
		if r.status != http.StatusOK {
			return fmt.Errorf("ledger: %d %s", r.status, r.raw)
		}
		r.decode(t, &l)
		for _, e := range l.Items {
			sum += e.Amount
			if e.Kind == "VERIFICATION" {
				charges[strings.TrimPrefix(e.Reference, "verification:")] = -e.Amount
			}
		}
		if page+1 >= l.TotalPages {
			break
		}
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
			for {
				j := getJob(t, s, c, job.ID)
				if j.Status == "COMPLETED" || j.Status == "FAILED" {
					t.Fatalf("the import ended before the stop (%+v): make the file bigger", j)
				}
				if j.Status == "RUNNING" && j.ImportedRows > 0 {
					break
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
