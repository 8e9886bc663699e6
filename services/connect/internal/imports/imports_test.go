package imports_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/connect/internal/connecttest"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/imports"
	"github.com/mnvhq/mnv/services/connect/internal/profiles"
	"github.com/mnvhq/mnv/services/connect/internal/store"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/pg"
	"github.com/mnvhq/mnv/services/platform/phone"
)

const file = "mobileNumber,externalId\n+971501234567,A\nnot-a-number,B\n+971552345678,C\n"

// setup returns an import service on a fresh, migrated database, and the pool and numbers
// it uses.
func setup(t *testing.T) (*imports.Service, *pgxpool.Pool, *phone.Vault) {
	t.Helper()
	return setupPool(t, 4)
}

// setupPool is setup with a pool of maxConns connections.
func setupPool(t *testing.T, maxConns int32) (*imports.Service, *pgxpool.Pool, *phone.Vault) {
	t.Helper()
	pool := connecttest.Pool(t, maxConns)
	vault, keyring := connecttest.Keys(t)
	stores := newStores(t, pool)
	return imports.New(stores.Pool(), stores, vault, keyring, imports.Config{Poll: 10 * time.Millisecond, Lease: time.Minute}, zaptest.NewLogger(t)), pool, vault
}

// newStores are the import stores as the app opens them: deliveries queued with their jobs,
// events written with their facts.
func newStores(t *testing.T, pool *pgxpool.Pool) pg.Stores[imports.Store] {
	t.Helper()
	q, box := connecttest.Queue(t, pool)
	return pg.NewStores(pool, func(db pg.DB) imports.Store { return store.New(db).WithJobs(q).WithOutbox(box) })
}

func upload(t *testing.T, svc *imports.Service, client string) domain.ImportJob {
	t.Helper()
	job, err := svc.Upload(context.Background(), client, "f.csv", strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	return job
}

func TestRunOnceImports(t *testing.T) {
	svc, pool, numbers := setup(t)
	ctx := context.Background()
	client := uuid.NewString()
	job := upload(t, svc, client)
	if ran, err := svc.RunOnce(ctx); !ran || err != nil {
		t.Fatalf("RunOnce: %v %v", ran, err)
	}
	got, err := svc.Get(ctx, client, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != domain.ImportCompleted || got.TotalRows != 3 || got.ImportedRows != 2 || got.FailedRows != 1 ||
		len(got.Errors) != 1 || got.Errors[0].Row != 3 || got.Errors[0].Column != "mobileNumber" {
		t.Fatalf("job %+v", got)
	}
	page, err := store.New(pool).ListProfiles(ctx, client, domain.ProfileFilter{}, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "+971501234567", "C": "+971552345678"}
	for _, p := range page.Items {
		n, err := profiles.OpenNumber(numbers, p)
		if err != nil || p.ExternalID == nil || want[*p.ExternalID] != n || p.NumberMasked != phone.Mask(n) {
			t.Errorf("profile %v: number %q (%v), masked %q", p.ExternalID, phone.Mask(n), err, p.NumberMasked)
		}
	}
	if len(page.Items) != 2 {
		t.Fatalf("%d profiles, want 2", len(page.Items))
	}
	if ran, err := svc.RunOnce(ctx); ran || err != nil {
		t.Fatalf("RunOnce with nothing queued: %v %v", ran, err)
	}
}

// TestLeaseFencing: a worker whose lease ran out, and whose job another worker has claimed
// since, can neither commit a batch nor finish the job.
func TestLeaseFencing(t *testing.T) {
	svc, pool, _ := setup(t)
	ctx := context.Background()
	client := uuid.NewString()
	job := upload(t, svc, client)

	stale, err := store.New(pool).ClaimJob(ctx, time.Millisecond)
	if err != nil || stale.ID != job.ID {
		t.Fatalf("first claim: %+v %v", stale, err)
	}
	time.Sleep(20 * time.Millisecond)
	fresh, err := store.New(pool).ClaimJob(ctx, time.Minute)
	if err != nil || fresh.ID != job.ID {
		t.Fatalf("second claim: %+v %v", fresh, err)
	}
	if fresh.LeaseToken != stale.LeaseToken+1 || fresh.Interruptions != 1 {
		t.Fatalf("tokens %d then %d, interruptions %d", stale.LeaseToken, fresh.LeaseToken, fresh.Interruptions)
	}
	if _, err := store.New(pool).ClaimJob(ctx, time.Minute); !errors.Is(err, fault.ErrNotFound) {
		t.Fatalf("a job under a live lease was claimed again: %v", err)
	}

	row := domain.StageRow{ID: uuid.New(), NumberSealed: []byte{1}, NumberHash: []byte("h"), NumberMasked: "+97150*****67",
		CountryCode: "AE", Attributes: []byte("{}")}
	p := domain.Progress{Records: 1, MaxKept: 100, Lease: time.Minute, Token: stale.LeaseToken}
	err = pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		return store.New(tx).UpsertBatch(ctx, client, job.ID, []domain.StageRow{row}, &p)
	})
	if !errors.Is(err, domain.ErrLeaseLost) {
		t.Fatalf("stale batch: %v, want ErrLeaseLost", err)
	}
	if page, _ := store.New(pool).ListProfiles(ctx, client, domain.ProfileFilter{}, 10, 0); page.Total != 0 {
		t.Fatalf("the stale batch left %d profiles", page.Total)
	}
	if _, err := store.New(pool).FinishJob(ctx, client, job.ID, stale.LeaseToken, nil); !errors.Is(err, domain.ErrLeaseLost) {
		t.Fatalf("stale finish: %v, want ErrLeaseLost", err)
	}
	if err := store.New(pool).ReleaseJob(ctx, client, job.ID, stale.LeaseToken); err != nil {
		t.Fatal(err)
	}
	if got, _ := svc.Get(ctx, client, job.ID); got.Status != domain.ImportRunning || got.ProcessedRecords != 0 {
		t.Fatalf("after the stale worker's writes: %+v", got)
	}
	// The holder of the live token can.
	p.Token = fresh.LeaseToken
	err = pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		return store.New(tx).UpsertBatch(ctx, client, job.ID, []domain.StageRow{row}, &p)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.New(pool).FinishJob(ctx, client, job.ID, fresh.LeaseToken, nil); err != nil {
		t.Fatal(err)
	}
}

// TestGivesUpAfterInterruptions: a job whose workers keep dying is FAILED with a reason,
// rather than resumed forever.
func TestGivesUpAfterInterruptions(t *testing.T) {
	svc, pool, _ := setup(t)
	ctx := context.Background()
	client := uuid.NewString()
	job := upload(t, svc, client)
	for range imports.MaxInterruptions + 1 { // the first claim, then one per crash
		if _, err := store.New(pool).ClaimJob(ctx, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ran, err := svc.RunOnce(ctx); !ran || err != nil {
		t.Fatalf("RunOnce: %v %v", ran, err)
	}
	got, err := svc.Get(ctx, client, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != domain.ImportFailed || got.Failure == nil || !strings.Contains(*got.Failure, "stopped unexpectedly 4 times") {
		t.Fatalf("job %+v", got)
	}
}

// trickle is a slow client's upload: a header, then one row per tick.
type trickle struct {
	rows int
	tick time.Duration
	sent int
	buf  []byte
}

func (r *trickle) Read(p []byte) (int, error) {
	if len(r.buf) == 0 {
		switch {
		case r.sent == 0:
			r.buf = []byte("mobileNumber,externalId\n")
		case r.sent > r.rows:
			return 0, io.EOF
		default:
			time.Sleep(r.tick)
			r.buf = fmt.Appendf(nil, "+9715012%05d,T%02d\n", r.sent, r.sent)
		}
		r.sent++
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// TestSlowUploadsDoNotHoldThePool: uploads are stored without holding a connection while they
// read, so 40 slow uploads on a pool of 3 leave it free for every other query (an upload used
// to hold a transaction from its first byte to its last).
func TestSlowUploadsDoNotHoldThePool(t *testing.T) {
	svc, pool, _ := setupPool(t, 3)
	ctx := context.Background()
	client := uuid.NewString()
	const uploads, rows = 40, 20
	var wg sync.WaitGroup
	errs := make(chan error, uploads)
	for range uploads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := svc.Upload(ctx, client, "slow.csv", &trickle{rows: rows, tick: 100 * time.Millisecond})
			errs <- err
		}()
	}
	time.Sleep(300 * time.Millisecond) // every upload has begun and is reading
	for i := range 3 {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		start := time.Now()
		_, err := svc.List(qctx, client, 10, 0)
		cancel()
		if err != nil {
			t.Errorf("query %d during the uploads: %v after %v", i, err, time.Since(start).Round(time.Millisecond))
		}
		time.Sleep(200 * time.Millisecond)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("upload: %v", err)
		}
	}
	var queued int
	var size int64
	if err := pool.QueryRow(ctx, `SELECT count(*), min(size_bytes) FROM connect.import_jobs WHERE client_id = $1 AND status = 'QUEUED'`,
		client).Scan(&queued, &size); err != nil {
		t.Fatal(err)
	}
	if want := int64(len("mobileNumber,externalId\n") + rows*len("+971501200001,T01\n")); queued != uploads || size != want {
		t.Fatalf("%d jobs queued of %d bytes, want %d of %d", queued, size, uploads, want)
	}
}

// TestUploadChunksAreSealed: the file waiting for its job is not stored in clear, and the
// job still reads it.
func TestUploadChunksAreSealed(t *testing.T) {
	svc, pool, _ := setup(t)
	ctx := context.Background()
	client := uuid.NewString()
	job := upload(t, svc, client)
	rows, err := pool.Query(ctx, `SELECT data FROM connect.import_chunks WHERE job_id = $1`, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil || len(chunks) != 1 {
		t.Fatalf("%d chunks, %v", len(chunks), err)
	}
	for _, clear := range []string{"mobileNumber", "+971501234567", "971501234567"} {
		if bytes.Contains(chunks[0], []byte(clear)) {
			t.Fatalf("the stored chunk holds %q in clear", clear)
		}
	}
	if ran, err := svc.RunOnce(ctx); !ran || err != nil {
		t.Fatalf("RunOnce: %v %v", ran, err)
	}
	if got, _ := svc.Get(ctx, client, job.ID); got.Status != domain.ImportCompleted || got.ImportedRows != 2 {
		t.Fatalf("job %+v", got)
	}
	// A chunk moved to another job does not open: that job fails, saying why, at once.
	other := upload(t, svc, client)
	if _, err := pool.Exec(ctx, `UPDATE connect.import_chunks SET data = $2 WHERE job_id = $1`, other.ID, chunks[0]); err != nil {
		t.Fatal(err)
	}
	if ran, err := svc.RunOnce(ctx); !ran || err != nil {
		t.Fatalf("RunOnce: %v %v", ran, err)
	}
	got, _ := svc.Get(ctx, client, other.ID)
	if got.Status != domain.ImportFailed || got.Failure == nil || !strings.Contains(*got.Failure, "cannot be opened") {
		t.Fatalf("job with another job's chunk: %+v", got)
	}
}

// blockingUpload sends more than one chunk, then waits for release and ends with err.
type blockingUpload struct {
	sent    int
	reached chan struct{}
	release chan error
}

func (r *blockingUpload) Read(p []byte) (int, error) {
	const size = 3 << 20 // three chunks
	if r.sent >= size {
		close(r.reached)
		return 0, <-r.release
	}
	n := min(len(p), size-r.sent)
	for i := range p[:n] {
		p[i] = '1'
	}
	if r.sent == 0 {
		copy(p, "mobileNumber\n")
	}
	r.sent += n
	return n, nil
}

// TestAbortedUploadLeavesNothing: an upload shows nowhere until its last byte is in, and one
// that fails leaves no job and no chunk behind.
func TestAbortedUploadLeavesNothing(t *testing.T) {
	svc, pool, _ := setup(t)
	ctx := context.Background()
	client := uuid.NewString()
	r := &blockingUpload{reached: make(chan struct{}), release: make(chan error)}
	done := make(chan error, 1)
	go func() { _, err := svc.Upload(ctx, client, "big.csv", r); done <- err }()
	<-r.reached
	// Errorf, not Fatalf, until the upload is released: it would hold the pool forever.
	var stored int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM connect.import_chunks c JOIN connect.import_jobs j ON j.id = c.job_id
		WHERE j.client_id = $1`, client).Scan(&stored); err != nil || stored < 2 {
		t.Errorf("%d chunks stored mid-upload (%v): the upload should be written as it arrives", stored, err)
	}
	if page, err := svc.List(ctx, client, 10, 0); err != nil || page.Total != 0 || len(page.Items) != 0 {
		t.Errorf("a half-received upload is listed: %+v %v", page, err)
	}
	if o, err := store.New(pool).OverviewCounts(ctx, client); err != nil || o.Imports != 0 || o.RunningImports != 0 {
		t.Errorf("a half-received upload is counted: %+v %v", o, err)
	}
	if ran, err := svc.RunOnce(ctx); ran || err != nil {
		t.Errorf("a worker took a half-received upload: %v %v", ran, err)
	}
	r.release <- errors.New("connection reset")
	if err := <-done; err == nil {
		t.Fatal("the aborted upload succeeded")
	}
	var jobs, chunks int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM connect.import_jobs), (SELECT count(*) FROM connect.import_chunks)`).
		Scan(&jobs, &chunks); err != nil || jobs != 0 || chunks != 0 {
		t.Fatalf("the aborted upload left %d jobs and %d chunks (%v)", jobs, chunks, err)
	}
}

// observedTx reads the job back from the database after each transaction the importer commits.
type observedTx struct {
	imports.Tx
	read func() domain.ImportJob
	seen []domain.ImportJob
}

func (o *observedTx) InTx(ctx context.Context, fn func(ctx context.Context, st imports.Store) error) error {
	if err := o.Tx.InTx(ctx, fn); err != nil {
		return err
	}
	o.seen = append(o.seen, o.read())
	return nil
}

// TestProgressIsCommittedPerBatch: as each batch of a file of three commits, the job read from
// the database is RUNNING with more of the file behind it (rows, bytes, a percentage strictly
// between 0 and 100, an estimated finish); the end is the whole file, 100%, and no estimate.
func TestProgressIsCommittedPerBatch(t *testing.T) {
	pool := connecttest.Pool(t, 4)
	vault, keyring := connecttest.Keys(t)
	stores := newStores(t, pool)
	ctx := context.Background()
	client := uuid.NewString()
	var jobID string
	tx := &observedTx{Tx: stores}
	tx.read = func() domain.ImportJob {
		j, err := store.New(pool).GetJob(ctx, client, jobID)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	svc := imports.New(stores.Pool(), tx, vault, keyring, imports.Config{Poll: 10 * time.Millisecond, Lease: time.Minute}, zaptest.NewLogger(t))

	var body strings.Builder
	body.WriteString("mobileNumber\n")
	for i := range 12_000 { // batches of 5000, 5000 and 2000
		fmt.Fprintf(&body, "+97150%07d\n", i)
	}
	size := int64(body.Len())
	job, err := svc.Upload(ctx, client, "big.csv", strings.NewReader(body.String()))
	if err != nil {
		t.Fatal(err)
	}
	jobID = job.ID
	queued, err := svc.Get(ctx, client, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if queued.Status != domain.ImportQueued || queued.SizeBytes != size || queued.BytesProcessed != 0 || imports.PercentComplete(queued) != 0 {
		t.Fatalf("queued job %s of %d bytes, %d processed", queued.Status, queued.SizeBytes, queued.BytesProcessed)
	}
	if ran, err := svc.RunOnce(ctx); !ran || err != nil {
		t.Fatalf("RunOnce: %v %v", ran, err)
	}
	if len(tx.seen) != 4 {
		t.Fatalf("%d commits, want 3 batches and the end", len(tx.seen))
	}
	var last int64
	for i, rows := range []int64{5000, 10_000, 12_000} {
		j := tx.seen[i]
		p := imports.PercentComplete(j)
		if j.Status != domain.ImportRunning || j.TotalRows != rows || j.BytesProcessed <= last || j.BytesProcessed < 13+14*rows ||
			p <= 0 || p >= 100 || j.ProgressedAt == nil || imports.EstimatedCompletion(j) == nil {
			t.Errorf("after batch %d: %s, %d rows, %d of %d bytes (%v%%), estimate %v; want RUNNING, %d rows",
				i+1, j.Status, j.TotalRows, j.BytesProcessed, size, p, imports.EstimatedCompletion(j), rows)
		}
		last = j.BytesProcessed
	}
	end := tx.seen[3]
	if end.Status != domain.ImportCompleted || end.TotalRows != 12_000 || end.BytesProcessed != size ||
		imports.PercentComplete(end) != 100 || imports.EstimatedCompletion(end) != nil {
		t.Fatalf("finished job %s, %d rows, %d of %d bytes, %v%%", end.Status, end.TotalRows, end.BytesProcessed, size, imports.PercentComplete(end))
	}
}

// failingEnd is the import store whose read of the IMPORT_COMPLETED integrations fails: the
// transaction that ends a job rolls back after its final status was written.
type failingEnd struct{ imports.Store }

func (failingEnd) TriggerIntegrations(context.Context, string, string) ([]domain.Integration, error) {
	return nil, errors.New("connection lost")
}

type failingEndTx struct{ pg.Stores[imports.Store] }

func (f failingEndTx) InTx(ctx context.Context, fn func(ctx context.Context, st imports.Store) error) error {
	return f.Stores.InTx(ctx, func(ctx context.Context, st imports.Store) error { return fn(ctx, failingEnd{st}) })
}

// TestImportEventsCommitWithTheJob: a job's end writes its import.completed or import.failed
// forward job (River, kind event.forward) in the transaction of its final status: one when it
// commits, none when it rolls back (the job is then still RUNNING, resumed later).
func TestImportEventsCommitWithTheJob(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		rollback   bool
		wantStatus domain.ImportStatus
		wantEvent  string // "": none
	}{
		{name: "completed", body: file, wantStatus: domain.ImportCompleted, wantEvent: events.ImportCompleted},
		{name: "failed", body: "\x00\x01\x02binary", wantStatus: domain.ImportFailed, wantEvent: events.ImportFailed},
		{name: "the end rolled back", body: file, rollback: true, wantStatus: domain.ImportRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := connecttest.Pool(t, 4)
			vault, keyring := connecttest.Keys(t)
			stores := newStores(t, pool)
			var tx imports.Tx = stores
			if tt.rollback {
				tx = failingEndTx{stores}
			}
			svc := imports.New(stores.Pool(), tx, vault, keyring, imports.Config{Poll: 10 * time.Millisecond, Lease: time.Minute}, zaptest.NewLogger(t))
			ctx := context.Background()
			client := uuid.NewString()
			job, err := svc.Upload(ctx, client, "f.csv", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			ran, err := svc.RunOnce(ctx)
			if !ran || (err != nil) != tt.rollback {
				t.Fatalf("RunOnce = %v, %v", ran, err)
			}
			got, err := svc.Get(ctx, client, job.ID)
			if err != nil || got.Status != tt.wantStatus {
				t.Fatalf("job %s, %v; want %s", got.Status, err, tt.wantStatus)
			}
			rows, err := pool.Query(ctx, `SELECT e->>'type', e->>'client_id', e->>'data'
				FROM connect.river_job j, jsonb_array_elements(j.args->'events') WITH ORDINALITY AS x(e, n)
				WHERE j.kind = 'event.forward' ORDER BY j.id, x.n`)
			if err != nil {
				t.Fatal(err)
			}
			var found []string
			for rows.Next() {
				var typ, cid, data string
				if err := rows.Scan(&typ, &cid, &data); err != nil {
					t.Fatal(err)
				}
				var d events.ImportData
				if err := json.Unmarshal([]byte(data), &d); err != nil {
					t.Fatal(err)
				}
				if cid != client || d.ImportID != job.ID || d.Status != string(got.Status) || d.ProcessedRecords != got.ProcessedRecords ||
					d.CreatedRecords != got.ImportedRows || d.FailedRecords != got.FailedRows || (d.Error == nil) != (got.Failure == nil) {
					t.Errorf("event %s of %s: %+v; job %+v", typ, cid, d, got)
				}
				found = append(found, typ)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if want := []string{tt.wantEvent}; tt.wantEvent == "" && len(found) != 0 || tt.wantEvent != "" && !slices.Equal(found, want) {
				t.Fatalf("forward jobs %v, want %q", found, tt.wantEvent)
			}
		})
	}
}

// TestManyBatchesBeforeAutoanalyze: an import of many batches keeps its pace while the planner
// has no statistics of connect.profiles and connect.verified_numbers, as during a bulk load
// that outruns autoanalyze (benchmark D, which stalled at 120,000 of its 1,000,000 rows). A
// batch must reach the client's profiles through its own numbers only: the count of the
// profiles it matches once joined the batch to every unmatched profile of the client (taken,
// without statistics, for a row or two), so each batch cost the client's profiles times its
// rows and the job crawled to a stop. Autovacuum is off on both tables here, so that no
// statistics come while the job runs; the verified numbers of other clients are what make
// the planner start from the client's profiles.
func TestManyBatchesBeforeAutoanalyze(t *testing.T) {
	svc, pool, vault := setup(t)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`DO $$
		DECLARE r regclass;
		BEGIN
			FOR r IN SELECT relid FROM pg_partition_tree('connect.profiles') WHERE isleaf
				UNION ALL SELECT relid FROM pg_partition_tree('connect.verified_numbers') WHERE isleaf LOOP
				EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = false)', r);
			END LOOP;
		END $$`)
	exec(`INSERT INTO connect.verified_numbers (client_id, number_hash, verification_id, verified_at)
		SELECT ('00000000-0000-4000-8000-' || lpad((i % 200)::text, 12, '0'))::uuid, sha256(i::text::bytea), gen_random_uuid(), now()
		FROM generate_series(1, 20000) i`)
	client := uuid.NewString()
	const rows = 80_000 // 16 batches, two chunks
	// The client verified a few of the file's numbers before: those profiles are matched as
	// they are imported, and counted so.
	verified := []int{7, 40_007, 79_999}
	for _, i := range verified {
		exec(`INSERT INTO connect.verified_numbers (client_id, number_hash, verification_id, verified_at)
			VALUES ($1, $2, gen_random_uuid(), now())`, client, vault.Hash(fmt.Sprintf("+97150%07d", i)))
	}
	var body strings.Builder
	body.WriteString("mobileNumber\n")
	for i := range rows {
		fmt.Fprintf(&body, "+97150%07d\n", i)
	}
	job, err := svc.Upload(ctx, client, "big.csv", strings.NewReader(body.String()))
	if err != nil {
		t.Fatal(err)
	}
	// A few seconds' work; the minute is for a slow machine. Before the fix the last batches
	// took a minute each.
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	start := time.Now()
	ran, err := svc.RunOnce(rctx) // out of time, it hands the job back and answers nil
	took := time.Since(start).Round(time.Millisecond)
	if !ran || err != nil {
		t.Fatalf("RunOnce after %s: %v %v", took, ran, err)
	}
	got, err := svc.Get(ctx, client, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != domain.ImportCompleted || got.TotalRows != rows || got.ImportedRows != rows || got.FailedRows != 0 {
		t.Fatalf("after %s the job is %s: %d rows, %d imported, %d failed; want COMPLETED with %d imported",
			took, got.Status, got.TotalRows, got.ImportedRows, got.FailedRows, rows)
	}
	var profiles, matched int64
	if err := pool.QueryRow(ctx, `SELECT profiles, matched FROM connect.client_stats WHERE client_id = $1`, client).Scan(&profiles, &matched); err != nil {
		t.Fatal(err)
	}
	if profiles != rows || matched != int64(len(verified)) {
		t.Fatalf("client_stats: %d profiles, %d matched; want %d, %d", profiles, matched, rows, len(verified))
	}
	t.Logf("%d rows in %s", rows, took)
}
