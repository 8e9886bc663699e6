package imports_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap/zaptest"

	"github.com/mnvhq/mnv/services/connect/internal/connecttest"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/imports"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
)

// fakeJobs is an in-memory imports.Store and imports.Tx: jobs, their sealed chunks, the
// numbers imported per client, and the integrations an import's end queues. Writes under a
// lease token that is no longer the job's are domain.ErrLeaseLost, as in the database.
type fakeJobs struct {
	jobs     map[string]domain.ImportJob
	chunks   map[string][][]byte
	numbers  map[string]bool // client + number hash
	its      []domain.Integration
	enqueued []string // "<integration>/<job>"
	inTx     bool
	// onUpsert, when set, runs before a batch is written: another worker taking the job over.
	onUpsert func(jobID string)
	// batches holds the job as each batch left it.
	batches []domain.ImportJob
	// emitted are the events of committed transactions; pending, the current one's.
	emitted, pending []events.Event
}

func newFakeJobs() *fakeJobs {
	return &fakeJobs{jobs: map[string]domain.ImportJob{}, chunks: map[string][][]byte{}, numbers: map[string]bool{}}
}

func (f *fakeJobs) InTx(ctx context.Context, fn func(ctx context.Context, st imports.Store) error) error {
	f.inTx, f.pending = true, nil
	defer func() { f.inTx, f.pending = false, nil }()
	if err := fn(ctx, f); err != nil {
		return err
	}
	f.emitted = append(f.emitted, f.pending...)
	return nil
}

// Emit keeps events for the commit of the transaction; outside one it is refused, as the
// store does.
func (f *fakeJobs) Emit(_ context.Context, evs ...events.Event) error {
	if !f.inTx {
		return errors.New("emit outside a transaction")
	}
	f.pending = append(f.pending, evs...)
	return nil
}

func (f *fakeJobs) InsertJob(_ context.Context, j domain.ImportJob) error {
	j.Status, j.CreatedAt = "UPLOADING", time.Now()
	f.jobs[j.ID] = j
	return nil
}

func (f *fakeJobs) InsertChunk(_ context.Context, clientID, jobID string, seq int, sealed []byte) error {
	if f.jobs[jobID].ClientID != clientID || f.jobs[jobID].Status != "UPLOADING" || seq != len(f.chunks[jobID]) {
		return errors.New("chunk out of place")
	}
	f.chunks[jobID] = append(f.chunks[jobID], bytes.Clone(sealed))
	return nil
}

func (f *fakeJobs) QueueJob(_ context.Context, clientID, jobID string, size int64) (domain.ImportJob, error) {
	j, ok := f.jobs[jobID]
	if !ok || j.ClientID != clientID || j.Status != "UPLOADING" {
		return domain.ImportJob{}, fault.ErrNotFound
	}
	j.Status, j.SizeBytes = domain.ImportQueued, size
	f.jobs[jobID] = j
	return j, nil
}

func (f *fakeJobs) DeleteUpload(_ context.Context, clientID, jobID string) error {
	if f.jobs[jobID].ClientID == clientID && f.jobs[jobID].Status == "UPLOADING" {
		delete(f.jobs, jobID)
		delete(f.chunks, jobID)
	}
	return nil
}

func (f *fakeJobs) GetJob(_ context.Context, clientID, id string) (domain.ImportJob, error) {
	j, ok := f.jobs[id]
	if !ok || j.ClientID != clientID || j.Status == "UPLOADING" {
		return j, fault.ErrNotFound
	}
	return j, nil
}

func (f *fakeJobs) ListJobs(context.Context, string, int64, int64) (domain.Page[domain.ImportJob], error) {
	return domain.Page[domain.ImportJob]{}, nil
}

func (f *fakeJobs) ClaimJob(_ context.Context, _ time.Duration) (domain.ImportJob, error) {
	for id, j := range f.jobs {
		if j.Status == domain.ImportQueued && j.SizeBytes > 0 || j.Status == domain.ImportRunning {
			if j.Status == domain.ImportRunning {
				j.Interruptions++
			}
			j.Status = domain.ImportRunning
			j.LeaseToken++
			if j.StartedAt == nil {
				// A moment ago, so that the rate of the first batch is finite.
				started := time.Now().Add(-time.Second)
				j.StartedAt = &started
			}
			f.jobs[id] = j
			return j, nil
		}
	}
	return domain.ImportJob{}, fault.ErrNotFound
}

func (f *fakeJobs) Chunks(_ context.Context, clientID, jobID string, fn func(seq int, sealed []byte) error) error {
	if f.jobs[jobID].ClientID != clientID {
		return nil
	}
	for seq, c := range f.chunks[jobID] {
		if err := fn(seq, c); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeJobs) leased(clientID, jobID string, token int64) (domain.ImportJob, error) {
	j := f.jobs[jobID]
	if j.ClientID != clientID || j.LeaseToken != token || j.Status != domain.ImportRunning && j.Status != domain.ImportQueued {
		return j, domain.ErrLeaseLost
	}
	return j, nil
}

func (f *fakeJobs) UpsertBatch(_ context.Context, clientID, jobID string, rows []domain.StageRow, p *domain.Progress) error {
	if !f.inTx {
		return errors.New("upsert outside a transaction")
	}
	if f.onUpsert != nil {
		f.onUpsert(jobID)
	}
	j, err := f.leased(clientID, jobID, p.Token)
	if err != nil || j.Status != domain.ImportRunning {
		return domain.ErrLeaseLost
	}
	p.Imported, p.Updated = 0, 0
	for _, r := range rows {
		k := clientID + string(r.NumberHash)
		if f.numbers[k] {
			p.Updated++
		} else {
			p.Imported++
		}
		f.numbers[k] = true
	}
	j.ProcessedRecords += p.Records
	j.TotalRows += p.Records
	j.ImportedRows += p.Imported
	j.UpdatedRows += p.Updated
	j.FailedRows += p.Failed
	j.Errors = append(j.Errors, p.Errors...)[:min(len(j.Errors)+len(p.Errors), p.MaxKept)]
	j.BytesProcessed = max(j.BytesProcessed, min(p.Bytes, j.SizeBytes))
	now := time.Now()
	j.ProgressedAt = &now
	f.jobs[jobID] = j
	f.batches = append(f.batches, j)
	return nil
}

func (f *fakeJobs) ReleaseJob(_ context.Context, clientID, jobID string, token int64) error {
	if j, err := f.leased(clientID, jobID, token); err == nil {
		j.Status = domain.ImportQueued
		f.jobs[jobID] = j
	}
	return nil
}

func (f *fakeJobs) FinishJob(_ context.Context, clientID, jobID string, token int64, failure *string) (domain.ImportJob, error) {
	j, err := f.leased(clientID, jobID, token)
	if err != nil {
		return j, err
	}
	j.Status, j.Failure, j.BytesProcessed = domain.ImportCompleted, failure, j.SizeBytes
	if failure != nil {
		j.Status, j.BytesProcessed = domain.ImportFailed, f.jobs[jobID].BytesProcessed
	}
	f.jobs[jobID] = j
	delete(f.chunks, jobID)
	return j, nil
}

func (f *fakeJobs) TriggerIntegrations(_ context.Context, clientID, trigger string) ([]domain.Integration, error) {
	var out []domain.Integration
	for _, it := range f.its {
		if it.ClientID == clientID && it.TriggerEvent == trigger {
			out = append(out, it)
		}
	}
	return out, nil
}

func (f *fakeJobs) EnqueueAll(_ context.Context, it domain.Integration, _ string, jobID *string) (int64, error) {
	f.enqueued = append(f.enqueued, it.ID+"/"+*jobID)
	return 1, nil
}

func newJobService(t *testing.T, f *fakeJobs) *imports.Service {
	t.Helper()
	vault, keyring := connecttest.Keys(t)
	return imports.New(f, f, vault, keyring, imports.Config{Poll: time.Millisecond, Lease: time.Minute}, zaptest.NewLogger(t))
}

func TestUploadStates(t *testing.T) {
	tests := []struct {
		name       string
		fileName   string
		body       string
		wantErr    func(error) bool
		wantStatus domain.ImportStatus // "": no job is left
		wantSize   int64
		wantEvent  string // the one event emitted; "": none
	}{
		{name: "queued", fileName: "f.csv", body: file, wantStatus: domain.ImportQueued, wantSize: int64(len(file))},
		{name: "over a chunk", fileName: "f.csv", body: "mobileNumber\n" + strings.Repeat("+971501234567\n", 80_000),
			wantStatus: domain.ImportQueued, wantSize: int64(13 + 14*80_000)},
		{name: "empty: failed at once", fileName: "f.csv", body: "", wantStatus: domain.ImportFailed, wantEvent: events.ImportFailed},
		{name: "too large: nothing kept", fileName: "f.csv", body: strings.Repeat("x", imports.MaxFileSize+1),
			wantErr: func(err error) bool { return errors.Is(err, imports.ErrTooLarge) }},
		{name: "file name too long", fileName: strings.Repeat("n", 256), body: file,
			wantErr: func(err error) bool { return fault.Find(err, fault.InvalidArgument) != nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeJobs()
			svc := newJobService(t, f)
			job, err := svc.Upload(context.Background(), uuid.NewString(), tt.fileName, strings.NewReader(tt.body))
			if tt.wantErr != nil {
				if !tt.wantErr(err) {
					t.Fatalf("Upload: %v", err)
				}
				if len(f.jobs) != 0 || len(f.chunks) != 0 {
					t.Errorf("a refused upload left %d jobs, %d files", len(f.jobs), len(f.chunks))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if job.Status != tt.wantStatus || f.jobs[job.ID].Status != tt.wantStatus || job.SizeBytes != tt.wantSize {
				t.Fatalf("job %s of %d bytes (stored %s), want %s of %d", job.Status, job.SizeBytes, f.jobs[job.ID].Status, tt.wantStatus, tt.wantSize)
			}
			for _, c := range f.chunks[job.ID] {
				if bytes.Contains(c, []byte("+971501234567")) {
					t.Fatal("a chunk is stored in clear")
				}
			}
			checkEvent(t, f, job.ID, tt.wantEvent)
		})
	}
}

func TestRunStates(t *testing.T) {
	tests := []struct {
		name string
		body string
		// prepare changes the uploaded job before it runs.
		prepare       func(f *fakeJobs, job *domain.ImportJob)
		onUpsert      func(f *fakeJobs) func(jobID string)
		wantStatus    domain.ImportStatus
		wantImported  int64
		wantFailed    int64
		wantErrors    int
		wantFailure   string
		wantTriggered bool
	}{
		{name: "completed", body: file, wantStatus: domain.ImportCompleted, wantImported: 2, wantFailed: 1, wantErrors: 1, wantTriggered: true},
		{name: "resumed after the committed records", body: file,
			prepare: func(_ *fakeJobs, job *domain.ImportJob) { job.ProcessedRecords = 2 },
			// Records 1 and 2 were committed by the worker before: only the third is read.
			wantStatus: domain.ImportCompleted, wantImported: 1, wantTriggered: true},
		{name: "not a CSV", body: "\x00\x01\x02binary",
			wantStatus: domain.ImportFailed, wantFailure: "?"},
		{name: "a chunk that does not open", body: file,
			prepare:    func(f *fakeJobs, job *domain.ImportJob) { f.chunks[job.ID][0] = []byte("written in clear") },
			wantStatus: domain.ImportFailed, wantFailure: imports.ErrChunkSealed.Error()},
		{name: "interrupted too often", body: file,
			prepare: func(_ *fakeJobs, job *domain.ImportJob) {
				job.Status, job.Interruptions = domain.ImportRunning, imports.MaxInterruptions
			},
			wantStatus: domain.ImportFailed, wantFailure: "stopped unexpectedly"},
		{name: "lease lost: left to the new holder", body: file,
			onUpsert: func(f *fakeJobs) func(string) {
				return func(id string) { j := f.jobs[id]; j.LeaseToken++; f.jobs[id] = j }
			},
			wantStatus: domain.ImportRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeJobs()
			svc := newJobService(t, f)
			ctx := context.Background()
			client := uuid.NewString()
			f.its = []domain.Integration{
				{ID: "done", ClientID: client, TriggerEvent: domain.TriggerImportCompleted},
				{ID: "created", ClientID: client, TriggerEvent: domain.TriggerProfileCreated},
			}
			job, err := svc.Upload(ctx, client, "f.csv", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.prepare != nil {
				j := f.jobs[job.ID]
				tt.prepare(f, &j)
				f.jobs[job.ID] = j
			}
			if tt.onUpsert != nil {
				f.onUpsert = tt.onUpsert(f)
			}
			if ran, err := svc.RunOnce(ctx); !ran || err != nil {
				t.Fatalf("RunOnce = %v, %v", ran, err)
			}
			got, err := svc.Get(ctx, client, job.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tt.wantStatus || got.ImportedRows != tt.wantImported || got.FailedRows != tt.wantFailed || len(got.Errors) != tt.wantErrors {
				t.Fatalf("job %s, %d imported, %d failed, errors %v; want %s, %d, %d, %d errors",
					got.Status, got.ImportedRows, got.FailedRows, got.Errors, tt.wantStatus, tt.wantImported, tt.wantFailed, tt.wantErrors)
			}
			switch {
			case tt.wantFailure == "" && got.Failure != nil:
				t.Errorf("failure %q", *got.Failure)
			case tt.wantFailure != "" && (got.Failure == nil || tt.wantFailure != "?" && !strings.Contains(*got.Failure, tt.wantFailure)):
				t.Errorf("failure %v, want %q", got.Failure, tt.wantFailure)
			}
			if want := []string{"done/" + job.ID}; tt.wantTriggered != slices.Equal(f.enqueued, want) || !tt.wantTriggered && len(f.enqueued) != 0 {
				t.Errorf("queued %v for IMPORT_COMPLETED, want it: %v", f.enqueued, tt.wantTriggered)
			}
			if done := got.Status != domain.ImportRunning; done != (f.chunks[job.ID] == nil) {
				t.Errorf("job %s with its file kept: %v", got.Status, f.chunks[job.ID] != nil)
			}
			want := map[domain.ImportStatus]string{domain.ImportCompleted: events.ImportCompleted, domain.ImportFailed: events.ImportFailed}[got.Status]
			checkEvent(t, f, job.ID, want)
			if ran, err := svc.RunOnce(ctx); tt.wantStatus != domain.ImportRunning && (ran || err != nil) {
				t.Errorf("a second RunOnce found work: %v, %v", ran, err)
			}
		})
	}
}

// checkEvent fails unless the job's end emitted exactly one event, of type typ, in the
// transaction of its final status ("": none at all), with the job's figures.
func checkEvent(t *testing.T, f *fakeJobs, jobID, typ string) {
	t.Helper()
	if typ == "" {
		if len(f.emitted) != 0 {
			t.Errorf("emitted %v, want none", f.emitted)
		}
		return
	}
	if len(f.emitted) != 1 || f.emitted[0].Type != typ {
		t.Fatalf("emitted %v, want one %s", f.emitted, typ)
	}
	job := f.jobs[jobID]
	var data events.ImportData
	if err := json.Unmarshal(f.emitted[0].Data, &data); err != nil {
		t.Fatal(err)
	}
	want := events.ImportData{ImportID: jobID, Status: string(job.Status), ProcessedRecords: job.ProcessedRecords, CreatedRecords: job.ImportedRows,
		UpdatedRecords: job.UpdatedRows, FailedRecords: job.FailedRows, Error: job.Failure}
	if f.emitted[0].ClientID != job.ClientID || !reflect.DeepEqual(data, want) {
		t.Errorf("event of client %s, data %+v; want %s, %+v", f.emitted[0].ClientID, data, job.ClientID, want)
	}
}
