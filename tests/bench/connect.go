package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	accountsv1 "github.com/mnvhq/mnv/proto/gen/mnv/accounts/v1"
	"github.com/mnvhq/mnv/tests/harness"
)

const (
	importGoal    = 0.50     // import rows/s over raw COPY rows/s
	rssGoal       = 150e6    // bytes: connect's peak RSS during the upload and the import
	deliveryGoal  = 20_000.0 // records/s delivered at deliveryBatch
	deliveryBatch = 500
	// maxUpload is the gateway's and connect's limit of an uploaded file (50 MiB).
	maxUpload = 50 << 20
	// jobPoll is how often the import job is read; rssEvery how often connect's RSS is sampled.
	jobPoll  = 200 * time.Millisecond
	rssEvery = 100 * time.Millisecond
	// phaseTimeout bounds one import or one delivery; stallTimeout is how long a delivery may
	// make no progress before the benchmark gives up on it; syncTimeout bounds the sync call,
	// which queues every profile in one statement.
	phaseTimeout = 15 * time.Minute
	syncTimeout  = 5 * time.Minute
	stallTimeout = time.Minute
	// pprofSeconds is the window of connect's CPU profile, from the start of the import.
	pprofSeconds = 30
	// rawSchema is the scratch schema of the raw COPY, dropped afterwards.
	rawSchema = "bench_raw"
	csvHeader = "mobileNumber,externalId,firstName,lastName,email"
)

// csvNames are the first and last names of the generated rows: short, so that a million rows
// stay under the upload limit.
var csvNames = [...]string{"Ann", "Bob", "Eve", "Ian", "Lea", "Max", "Sam", "Zoe"}

// csvRowShape says what the generated rows look like, for the report.
const csvRowShape = "+97150<7 digits of i>,C-<i>,<first>,<last>,u<i>@x.io for i = 1..N " +
	"(distinct valid AE mobiles; first and last names of 3 letters from 8)"

// ConnectReport is benchmark D.
type ConnectReport struct {
	Import, Raw Bulk
	Deliveries  []Bulk
	// PeakRSS is the largest VmRSS of connect sampled during the upload and the import; HWM
	// its VmHWM afterwards (the peak since connect started).
	PeakRSS, HWM int64
	RSSBefore    int64 // VmRSS of connect just before the upload
	RSSSamples   int
	Checks       []Check
	Notes        []string
}

// deliveryVariant is one integration of the delivery benchmark.
type deliveryVariant struct {
	name     string
	mappings map[string]string
}

var deliveryVariants = []deliveryVariant{
	{name: fmt.Sprintf("D delivery (batch %d)", deliveryBatch),
		mappings: map[string]string{"externalId": "id", "mobileNumberMasked": "phone"}},
	// With the full number, which connect opens (AES-GCM) for every record it sends.
	{name: fmt.Sprintf("D delivery (batch %d, +mobileNumber)", deliveryBatch),
		mappings: map[string]string{"externalId": "id", "mobileNumberMasked": "phone", "mobileNumber": "msisdn"}},
}

// connectBench drives benchmark D over REST.
type connectBench struct {
	hc       *http.Client
	url      string
	client   harness.Client
	suite    *harness.Suite
	progress io.Writer
	timeout  time.Duration
}

// benchConnect is benchmark D: a CSV of rows distinct numbers is uploaded and imported, timed
// from the upload's 202 to the job's COMPLETED, while connect's RSS is sampled; then the same
// file is COPY'd raw into a table like connect.profiles, in the same database, for the limit
// PostgreSQL sets; then every imported profile is delivered to a receiver in this process, once
// per variant of deliveryVariants. With debugAddr and profilePath set, connect's CPU profile of
// the first pprofSeconds of the import is written to profilePath.
func benchConnect(ctx context.Context, s *harness.Suite, cfg Config, rows int, debugAddr, profilePath string, progress io.Writer) (ConnectReport, error) {
	var rep ConnectReport
	admin, err := dialAdmin(s)
	if err != nil {
		return rep, err
	}
	defer admin.Close()
	clients, err := createClients(ctx, accountsv1.NewAccountsAdminServiceClient(admin), 1, true, accountsv1.Feature_FEATURE_CONNECT)
	if err != nil {
		return rep, err
	}
	hc, closeHTTP := newHTTPClient(setupWorkers)
	defer closeHTTP()
	b := &connectBench{hc: hc, url: s.GatewayURL, client: clients[0], suite: s, progress: progress, timeout: cfg.Timeout}
	if debugAddr != "" {
		fmt.Fprintf(progress, "  connect serves pprof on http://%s/debug/pprof/\n", debugAddr)
	}

	t0 := time.Now()
	path, size, err := writeCSV(rows)
	if err != nil {
		return rep, err
	}
	defer os.Remove(path)
	fmt.Fprintf(progress, "  wrote %d rows (%.1f MiB) to %s in %s (not measured)\n",
		rows, float64(size)/(1<<20), path, time.Since(t0).Round(time.Millisecond))

	if err := b.importCSV(ctx, path, size, rows, debugAddr, profilePath, &rep); err != nil {
		return rep, fmt.Errorf("import: %w", err)
	}
	if rep.Raw, err = rawCopy(ctx, s.DatabaseURL, path, rows, progress); err != nil {
		return rep, fmt.Errorf("raw COPY: %w", err)
	}
	for _, v := range deliveryVariants {
		d, c, err := b.deliver(ctx, v, int64(rows))
		if err != nil {
			return rep, fmt.Errorf("%s: %w", v.name, err)
		}
		rep.Deliveries = append(rep.Deliveries, d)
		rep.Checks = append(rep.Checks, c)
	}
	return rep, nil
}

// bulkName is the name of a run over n rows: "1M rows" for a million.
func bulkName(prefix string, n int) string {
	if n%1_000_000 == 0 {
		return fmt.Sprintf("%s %dM rows", prefix, n/1_000_000)
	}
	return fmt.Sprintf("%s %d rows", prefix, n)
}

// writeCSV writes rows rows of csvRowShape to a temporary file and returns its path and size.
// It refuses a file over the upload limit.
func writeCSV(rows int) (string, int64, error) {
	if rows < 1 || rows > maxNumbers {
		return "", 0, fmt.Errorf("%d rows: between 1 and %d distinct numbers can be generated", rows, maxNumbers)
	}
	f, err := os.CreateTemp("", "mnv-bench-*.csv")
	if err != nil {
		return "", 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	_, _ = w.WriteString(csvHeader + "\n") // a write error sticks; Flush reports it
	line := make([]byte, 0, 64)
	for i := 1; i <= rows; i++ {
		line = append(line[:0], "+97150"...)
		n := strconv.Itoa(i)
		line = append(line, "0000000"[len(n):]...)
		line = append(line, n...)
		line = append(line, ",C-"...)
		line = append(line, n...)
		line = append(line, ',')
		line = append(line, csvNames[i%len(csvNames)]...)
		line = append(line, ',')
		line = append(line, csvNames[(i/len(csvNames))%len(csvNames)]...)
		line = append(line, ",u"...)
		line = append(line, n...)
		line = append(line, "@x.io\n"...)
		_, _ = w.Write(line)
	}
	err = errors.Join(w.Flush(), f.Close())
	var size int64
	if st, serr := os.Stat(f.Name()); serr == nil {
		size = st.Size()
	} else if err == nil {
		err = serr
	}
	if err == nil && size > maxUpload {
		err = fmt.Errorf("%d rows make %.1f MiB, over the 50 MiB upload limit", rows, float64(size)/(1<<20))
	}
	if err != nil {
		os.Remove(f.Name())
		return "", 0, err
	}
	return f.Name(), size, nil
}

// importJob is an import job as the API shows it.
type importJob struct {
	ID           string     `json:"id"`
	Status       string     `json:"status"`
	TotalRows    int64      `json:"totalRows"`
	ImportedRows int64      `json:"importedRows"`
	UpdatedRows  int64      `json:"updatedRows"`
	FailedRows   int64      `json:"failedRows"`
	Failure      *string    `json:"failure"`
	CreatedAt    *time.Time `json:"createdAt"`
	StartedAt    *time.Time `json:"startedAt"`
	FinishedAt   *time.Time `json:"finishedAt"`
}

// importCSV uploads the file as a text/csv body and waits for its job; the import is timed from
// the 202 until a read of the job shows it COMPLETED. connect's RSS is sampled from before the
// upload until then.
func (b *connectBench) importCSV(ctx context.Context, path string, size int64, rows int, debugAddr, profilePath string, rep *ConnectReport) error {
	ctx, cancel := context.WithTimeout(ctx, phaseTimeout)
	defer cancel()
	pid, err := b.suite.PID("connect")
	if err != nil {
		return err
	}
	watch := watchRSS(pid, rssEvery)
	before := watch.Current()
	defer func() { _, _, _ = watch.Stop() }()

	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url+"/v1/api/me/connect/import", f)
	if err != nil {
		return err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "text/csv")
	req.Header.Set("Content-Disposition", `attachment; filename="bench.csv"`)
	req.Header.Set("X-API-KEY", b.client.APIKey)
	up := time.Now()
	raw, err := doJSON(b.hc, req, http.StatusAccepted)
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	var job importJob
	if err := decodeData(raw, &job); err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	cpu0, t0 := sampleCPU(), time.Now()
	fmt.Fprintf(b.progress, "  uploaded in %s (not measured): job %s %s\n", t0.Sub(up).Round(time.Millisecond), job.ID, job.Status)

	var profiled chan error
	if debugAddr != "" && profilePath != "" {
		profiled = make(chan error, 1)
		go func() { profiled <- fetchProfile(ctx, debugAddr, profilePath, pprofSeconds) }()
	}

	tick := time.NewTicker(jobPoll)
	defer tick.Stop()
	lastShown := t0
	for job.Status != "COMPLETED" && job.Status != "FAILED" {
		select {
		case <-ctx.Done():
			return fmt.Errorf("job %s still %s with %d of %d rows: %w", job.ID, job.Status, job.TotalRows, rows, ctx.Err())
		case <-tick.C:
		}
		raw, err := b.call(ctx, b.timeout, http.MethodGet, "/v1/api/me/connect/import/jobs/"+job.ID, "")
		if err != nil {
			return fmt.Errorf("job %s: %w", job.ID, err)
		}
		if err := decodeData(raw, &job); err != nil {
			return fmt.Errorf("job %s: %w", job.ID, err)
		}
		if time.Since(lastShown) >= 10*time.Second {
			lastShown = time.Now()
			fmt.Fprintf(b.progress, "  import %s: %d of %d rows after %s, connect RSS %.1f MB\n",
				job.Status, job.TotalRows, rows, time.Since(t0).Round(time.Second), mb(watch.Current()))
		}
	}
	elapsed, cpu := time.Since(t0), sampleCPU().sub(cpu0)
	peak, samples, rssErr := watch.Stop()
	_, hwm, hwmErr := procMem(pid)
	if err := errors.Join(rssErr, hwmErr); err != nil {
		return fmt.Errorf("connect's memory: %w", err)
	}
	rep.PeakRSS, rep.HWM, rep.RSSBefore, rep.RSSSamples = peak, hwm, before, samples

	server := ""
	if job.CreatedAt != nil && job.FinishedAt != nil {
		server = fmt.Sprintf(", %s from the job's creation to its end", job.FinishedAt.Sub(*job.CreatedAt).Round(time.Millisecond))
	}
	rep.Import = Bulk{
		Name: bulkName("D import", rows), Unit: "rows", N: job.ImportedRows, Elapsed: elapsed, Errors: job.FailedRows, CPU: cpu,
		Detail: fmt.Sprintf("POST %.1f MiB as text/csv, 202 after %s (not measured), then from the 202 until the job read COMPLETED (polled every %s)%s",
			float64(size)/(1<<20), t0.Sub(up).Round(time.Millisecond), jobPoll, server),
	}
	fmt.Fprintf(b.progress, "  import %s: %d imported, %d updated, %d failed of %d in %s (%.1f rows/s); connect RSS %.1f MB before, peak %.1f MB, VmHWM %.1f MB\n",
		job.Status, job.ImportedRows, job.UpdatedRows, job.FailedRows, job.TotalRows, elapsed.Round(time.Millisecond),
		rep.Import.Rate(), mb(before), mb(peak), mb(hwm))
	c := Check{Name: "import job", OK: job.Status == "COMPLETED" && job.TotalRows == int64(rows) && job.ImportedRows == int64(rows) && job.FailedRows == 0}
	c.Text = fmt.Sprintf("%s, %d rows: %d imported, %d updated, %d failed", job.Status, job.TotalRows, job.ImportedRows, job.UpdatedRows, job.FailedRows)
	if job.Failure != nil {
		c.Text += ": " + *job.Failure
	}
	if !c.OK {
		c.Text += fmt.Sprintf("; want COMPLETED with %d imported and none failed", rows)
	}
	rep.Checks = append(rep.Checks, c)

	if profiled != nil {
		if err := <-profiled; err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("connect's CPU profile of the import could not be taken: %v", err))
		} else {
			rep.Notes = append(rep.Notes, fmt.Sprintf("connect's CPU profile of the first %ds of the import: %s (go tool pprof -top %s)",
				pprofSeconds, profilePath, profilePath))
		}
	}
	return nil
}

// fetchProfile writes a CPU profile of seconds of the process serving pprof at addr to path.
func fetchProfile(ctx context.Context, addr, path string, seconds int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, seconds), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	return errors.Join(err, f.Close())
}

// rawCopy is the limit PostgreSQL sets to the import: the same file read and parsed in this
// process and COPY'd in one statement into a table like connect.profiles (its columns,
// defaults, checks, primary key, unique number per client and indexes, but not its triggers)
// in a scratch schema of the suite's database. The number goes in as its own bytes (sealed),
// its SHA-256 (hash) and itself (masked), with a fixed client and job, a new random id a row.
func rawCopy(ctx context.Context, dbURL, path string, rows int, progress io.Writer) (Bulk, error) {
	ctx, cancel := context.WithTimeout(ctx, phaseTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return Bulk{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, q := range []string{
		"DROP SCHEMA IF EXISTS " + rawSchema + " CASCADE",
		"CREATE SCHEMA " + rawSchema,
		"CREATE TABLE " + rawSchema + ".profiles (LIKE connect.profiles INCLUDING ALL)",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return Bulk{}, fmt.Errorf("%s: %w", q, err)
		}
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if _, err := conn.Exec(dctx, "DROP SCHEMA "+rawSchema+" CASCADE"); err != nil {
			fmt.Fprintf(progress, "  could not drop the scratch schema %s: %v\n", rawSchema, err)
		}
	}()

	f, err := os.Open(path)
	if err != nil {
		return Bulk{}, err
	}
	defer f.Close()
	cpu0, t0 := sampleCPU(), time.Now()
	src, err := newCSVRows(f)
	if err != nil {
		return Bulk{}, err
	}
	n, err := conn.CopyFrom(ctx, pgx.Identifier{rawSchema, "profiles"},
		[]string{"id", "client_id", "number_sealed", "number_hash", "number_masked", "country_code",
			"external_id", "first_name", "last_name", "email", "source", "import_job_id"}, src)
	elapsed, cpu := time.Since(t0), sampleCPU().sub(cpu0)
	if err != nil {
		return Bulk{}, err
	}
	if n != int64(rows) {
		return Bulk{}, fmt.Errorf("copied %d rows, want %d", n, rows)
	}
	b := Bulk{
		Name: bulkName("D raw COPY", rows), Unit: "rows", N: n, Elapsed: elapsed, CPU: cpu,
		Detail: "one COPY (pgx CopyFrom) of the file, read and parsed here, into " + rawSchema + ".profiles (LIKE connect.profiles INCLUDING ALL: same indexes, no triggers)",
	}
	fmt.Fprintf(progress, "  raw COPY: %d rows in %s (%.1f rows/s)\n", n, elapsed.Round(time.Millisecond), b.Rate())
	return b, nil
}

// csvRows feeds the generated CSV to CopyFrom, one row at a time.
type csvRows struct {
	r           *csv.Reader
	client, job pgtype.UUID
	vals        []any
	err         error
}

func newCSVRows(r io.Reader) (*csvRows, error) {
	s := &csvRows{r: csv.NewReader(bufio.NewReaderSize(r, 1<<20)), vals: make([]any, 12)}
	s.r.ReuseRecord = true
	h, err := s.r.Read()
	if err != nil {
		return nil, err
	}
	if strings.Join(h, ",") != csvHeader {
		return nil, fmt.Errorf("header %q, want %q", h, csvHeader)
	}
	s.client, s.job = randomUUID(), randomUUID()
	return s, nil
}

func randomUUID() pgtype.UUID {
	u := pgtype.UUID{Valid: true}
	rand.Read(u.Bytes[:])
	u.Bytes[6] = u.Bytes[6]&0x0f | 0x40 // version 4
	u.Bytes[8] = u.Bytes[8]&0x3f | 0x80 // RFC 4122 variant
	return u
}

// Next implements pgx.CopyFromSource.
func (s *csvRows) Next() bool {
	rec, err := s.r.Read()
	if err != nil {
		if !errors.Is(err, io.EOF) {
			s.err = err
		}
		return false
	}
	if len(rec) != 5 {
		line, _ := s.r.FieldPos(0)
		s.err = fmt.Errorf("line %d: %d fields", line, len(rec))
		return false
	}
	number := rec[0]
	hash := sha256.Sum256([]byte(number))
	s.vals[0], s.vals[1], s.vals[2], s.vals[3] = randomUUID(), s.client, []byte(number), hash[:]
	s.vals[4], s.vals[5], s.vals[6], s.vals[7] = number, "AE", rec[1], rec[2]
	s.vals[8], s.vals[9], s.vals[10], s.vals[11] = rec[3], rec[4], "IMPORT", s.job
	return true
}

// Values implements pgx.CopyFromSource.
func (s *csvRows) Values() ([]any, error) { return s.vals, nil }

// Err implements pgx.CopyFromSource.
func (s *csvRows) Err() error { return s.err }

// receiver is a CRM endpoint in this process: it answers 200 to every delivery and counts the
// records of each delivery id once (a retried delivery keeps its id).
type receiver struct {
	mu      sync.Mutex
	want    int64
	records int64 // of distinct deliveries
	calls   int
	dups    int
	seen    map[string]bool
	done    chan struct{}
	doneAt  time.Time
}

func newReceiver() *receiver {
	return &receiver{seen: map[string]bool{}, done: make(chan struct{})}
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var recs []json.RawMessage
	if err == nil {
		err = json.Unmarshal(body, &recs)
	}
	id := r.Header.Get("X-Mnv-Delivery-Id")
	if err != nil || id == "" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.calls++
	if rc.seen[id] {
		rc.dups++
	} else {
		rc.seen[id] = true
		rc.records += int64(len(recs))
		rc.check()
	}
	rc.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// expect sets how many distinct records make the delivery complete (some may be in already).
func (rc *receiver) expect(n int64) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.want = n
	rc.check()
}

// check closes done when the wanted records are in; rc.mu is held.
func (rc *receiver) check() {
	if rc.want > 0 && rc.records >= rc.want && rc.doneAt.IsZero() {
		rc.doneAt = time.Now()
		close(rc.done)
	}
}

// counts reads the receiver's counters.
func (rc *receiver) counts() (records int64, deliveries, calls, dups int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.records, len(rc.seen), rc.calls, rc.dups
}

// deliver creates a MANUAL integration of the variant towards a new receiver, syncs it and
// times the delivery from the sync's answer until the receiver has every queued record.
func (b *connectBench) deliver(ctx context.Context, v deliveryVariant, profiles int64) (Bulk, Check, error) {
	ctx, cancel := context.WithTimeout(ctx, phaseTimeout)
	defer cancel()
	rc := newReceiver()
	srv := httptest.NewServer(rc)
	defer srv.Close()

	body, err := json.Marshal(map[string]any{
		"displayName": v.name, "integrationType": "WEBHOOK", "endpointUrl": srv.URL + "/hook", "httpMethod": "POST",
		"triggerEvent": "MANUAL", "fieldMappings": v.mappings, "batchSize": deliveryBatch,
	})
	if err != nil {
		return Bulk{}, Check{}, err
	}
	raw, err := b.call(ctx, b.timeout, http.MethodPost, "/v1/api/me/connect/integrations", string(body))
	if err != nil {
		return Bulk{}, Check{}, fmt.Errorf("create integration: %w", err)
	}
	var it struct {
		ID string `json:"id"`
	}
	if err := decodeData(raw, &it); err != nil || it.ID == "" {
		return Bulk{}, Check{}, fmt.Errorf("create integration: no id in %.200s", raw)
	}

	sent := time.Now()
	raw, err = b.call(ctx, syncTimeout, http.MethodPost, "/v1/api/me/connect/integrations/"+it.ID+"/sync", "")
	if err != nil {
		return Bulk{}, Check{}, fmt.Errorf("sync: %w", err)
	}
	cpu0, t0 := sampleCPU(), time.Now()
	var sync struct {
		QueuedRecords int64 `json:"queuedRecords"`
	}
	if err := decodeData(raw, &sync); err != nil {
		return Bulk{}, Check{}, fmt.Errorf("sync: %w", err)
	}
	if sync.QueuedRecords == 0 {
		return Bulk{}, Check{}, fmt.Errorf("sync queued no records")
	}
	rc.expect(sync.QueuedRecords)
	fmt.Fprintf(b.progress, "  %s: sync answered in %s (not measured): %d records queued\n",
		v.name, t0.Sub(sent).Round(time.Millisecond), sync.QueuedRecords)

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last int64
	lastMoved, lastShown := t0, t0
wait:
	for {
		select {
		case <-rc.done:
			break wait
		case <-ctx.Done():
			n, _, _, _ := rc.counts()
			return Bulk{}, Check{}, fmt.Errorf("%d of %d records delivered: %w", n, sync.QueuedRecords, ctx.Err())
		case now := <-tick.C:
			n, _, _, _ := rc.counts()
			if n != last {
				last, lastMoved = n, now
			} else if now.Sub(lastMoved) > stallTimeout {
				h, _ := b.historyTotals(ctx, it.ID)
				return Bulk{}, Check{}, fmt.Errorf("%d of %d records delivered and none for %s; sync history: %s",
					n, sync.QueuedRecords, stallTimeout, h)
			}
			if now.Sub(lastShown) >= 10*time.Second {
				lastShown = now
				fmt.Fprintf(b.progress, "  %s: %d of %d records after %s\n", v.name, n, sync.QueuedRecords, now.Sub(t0).Round(time.Second))
			}
		}
	}
	cpu := sampleCPU().sub(cpu0)
	rc.mu.Lock()
	elapsed := rc.doneAt.Sub(t0)
	rc.mu.Unlock()

	// Each delivery records its sync event after its answer: wait until they are all in, and
	// until the four counts (separate reads) agree.
	records, deliveries, calls, dups := rc.counts()
	var h historyTotals
	for deadline := time.Now().Add(10 * time.Second); ; {
		if h, err = b.historyTotals(ctx, it.ID); err != nil {
			return Bulk{}, Check{}, fmt.Errorf("sync history: %w", err)
		}
		settled := h.Succeeded+h.Failed >= int64(deliveries) && h.Attempts == h.Succeeded+h.Retrying+h.Failed
		if settled || time.Now().After(deadline) {
			break
		}
		time.Sleep(jobPoll)
	}
	d := Bulk{
		Name: v.name, Unit: "records", N: records, Elapsed: elapsed, Errors: h.Failed, CPU: cpu,
		Detail: fmt.Sprintf("mappings %s; sync answered in %s with %d queued (not measured), then until the receiver had them all: %d deliveries in %d requests (%d repeated); sync history %s",
			mappingList(v.mappings), t0.Sub(sent).Round(time.Millisecond), sync.QueuedRecords, deliveries, calls, dups, h),
	}
	fmt.Fprintf(b.progress, "  %s: %d records in %s (%.1f records/s); %d requests; sync history %s\n",
		v.name, records, elapsed.Round(time.Millisecond), d.Rate(), calls, h)
	c := Check{Name: v.name, OK: records == sync.QueuedRecords && sync.QueuedRecords == profiles && h.Failed == 0}
	c.Text = fmt.Sprintf("%d distinct records received = %d queued of %d profiles; %d FAILED attempts", records, sync.QueuedRecords, profiles, h.Failed)
	if !c.OK {
		c.Text += fmt.Sprintf("; want %d records and no FAILED attempt", profiles)
	}
	return d, c, nil
}

// call is restCall with the bench client's API key, bounded by timeout.
func (b *connectBench) call(ctx context.Context, timeout time.Duration, method, path, body string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return restCall(ctx, b.hc, method, b.url+path, body, "X-API-KEY", b.client.APIKey)
}

// historyTotals are the sync events of an integration, by status.
type historyTotals struct {
	Attempts, Succeeded, Retrying, Failed int64
}

func (h historyTotals) String() string {
	return fmt.Sprintf("%d attempts: %d SUCCEEDED, %d RETRYING, %d FAILED", h.Attempts, h.Succeeded, h.Retrying, h.Failed)
}

// historyTotals counts an integration's sync events (GET sync-history?size=1: totalItems), in
// all and by status.
func (b *connectBench) historyTotals(ctx context.Context, id string) (historyTotals, error) {
	var h historyTotals
	for _, q := range []struct {
		status string
		dst    *int64
	}{{"", &h.Attempts}, {"SUCCEEDED", &h.Succeeded}, {"RETRYING", &h.Retrying}, {"FAILED", &h.Failed}} {
		path := "/v1/api/me/connect/integrations/" + id + "/sync-history?size=1"
		if q.status != "" {
			path += "&status=" + q.status
		}
		raw, err := b.call(ctx, b.timeout, http.MethodGet, path, "")
		if err != nil {
			return h, err
		}
		var page struct {
			TotalItems int64 `json:"totalItems"`
		}
		if err := decodeData(raw, &page); err != nil {
			return h, err
		}
		*q.dst = page.TotalItems
	}
	return h, nil
}

// mappingList shows field mappings as source→target, sorted.
func mappingList(m map[string]string) string {
	var out []string
	for k, v := range m {
		out = append(out, k+"→"+v)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
