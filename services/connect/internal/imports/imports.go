// Package imports turns uploaded CSV files into profiles. An upload is stored (in sealed
// chunks, each written as it arrives) and answered with a QUEUED job at once; workers on any
// replica take jobs with a lease, stream the file in constant memory, and upsert profiles in
// batches (COPY into a staging table, then one INSERT … ON CONFLICT per batch). Each batch
// commits the job's progress with it, so a worker that dies is replaced, after its lease, by
// one that resumes after the last committed batch; numbers are unique per client, so nothing
// is duplicated.
package imports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/mnvhq/mnv/services/connect/internal/csvimport"
	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/connect/internal/profiles"
	"github.com/mnvhq/mnv/services/platform/events"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/phone"
)

// Limits of an upload and of the work done per transaction.
const (
	MaxFileSize = 50 << 20
	chunkSize   = 1 << 20
	batchRows   = 5000
)

// ErrTooLarge is an upload over MaxFileSize.
var ErrTooLarge = fault.New(fault.PayloadTooLarge, "the file is larger than 50 MiB")

// Config shapes the workers.
type Config struct {
	Poll  time.Duration
	Lease time.Duration
}

// Store is what imports needs of the service's storage. A job of another client, or one still
// UPLOADING, is fault.ErrNotFound to Get and List; a write under a lease token another worker
// has since taken over is domain.ErrLeaseLost.
type Store interface {
	// InsertJob stores a new job, UPLOADING: no worker takes it and no list shows it.
	InsertJob(ctx context.Context, j domain.ImportJob) error
	// InsertChunk stores one sealed chunk of a client's UPLOADING job's file.
	InsertChunk(ctx context.Context, clientID, jobID string, seq int, sealed []byte) error
	// QueueJob records the file's size and queues the job; fault.ErrNotFound when the job is
	// no longer UPLOADING.
	QueueJob(ctx context.Context, clientID, jobID string, size int64) (domain.ImportJob, error)
	// DeleteUpload removes a job still UPLOADING, with its chunks.
	DeleteUpload(ctx context.Context, clientID, jobID string) error
	GetJob(ctx context.Context, clientID, id string) (domain.ImportJob, error)
	ListJobs(ctx context.Context, clientID string, limit, offset int64) (domain.Page[domain.ImportJob], error)
	// ClaimJob leases the oldest job QUEUED, or RUNNING with its lease run out, of any client
	// (each taken with its client, never locked across clients); fault.ErrNotFound when none
	// waits.
	ClaimJob(ctx context.Context, lease time.Duration) (domain.ImportJob, error)
	// Chunks calls fn with each stored (sealed) chunk of a job's file, in order.
	Chunks(ctx context.Context, clientID, jobID string, fn func(seq int, sealed []byte) error) error
	// UpsertBatch writes a batch's rows as profiles and adds its progress (p.Imported and
	// p.Updated filled) to the job. In a transaction.
	UpsertBatch(ctx context.Context, clientID, jobID string, rows []domain.StageRow, p *domain.Progress) error
	// ReleaseJob hands a RUNNING job back to the queue.
	ReleaseJob(ctx context.Context, clientID, jobID string, token int64) error
	// FinishJob marks a job COMPLETED, or FAILED with failure, and drops its file.
	FinishJob(ctx context.Context, clientID, jobID string, token int64, failure *string) (domain.ImportJob, error)
	// Emit writes events in the Store's transaction (refused outside one).
	Emit(ctx context.Context, evs ...events.Event) error
	// TriggerIntegrations reads the client's ACTIVE integrations with trigger.
	TriggerIntegrations(ctx context.Context, clientID, trigger string) ([]domain.Integration, error)
	// EnqueueAll queues the client's profiles (of importJobID) for the integration.
	EnqueueAll(ctx context.Context, it domain.Integration, trigger string, importJobID *string) (int64, error)
}

// Tx runs a function with the store inside one transaction.
type Tx interface {
	InTx(ctx context.Context, fn func(ctx context.Context, st Store) error) error
}

// Sealer seals and opens data at rest under associated data; crypto.Keyring is one.
type Sealer interface {
	Seal(plaintext, ad []byte) []byte
	Open(ciphertext, ad []byte) ([]byte, error)
}

// Service stores uploads and runs import jobs.
type Service struct {
	st     Store
	tx     Tx
	vault  *phone.Vault
	sealer Sealer // seals the uploaded file's chunks
	cfg    Config
	log    *zap.Logger

	// Metrics, when set, count rows and finished jobs.
	Metrics *Metrics
}

// New returns a Service.
func New(st Store, tx Tx, vault *phone.Vault, sealer Sealer, cfg Config, log *zap.Logger) *Service {
	return &Service{st: st, tx: tx, vault: vault, sealer: sealer, cfg: cfg, log: log}
}

// chunkAD binds a sealed chunk to its place: a chunk copied to another job or position does
// not open.
func chunkAD(jobID string, seq int) []byte {
	return fmt.Appendf(nil, "connect.import_chunks:%s:%d", jobID, seq)
}

// ErrChunkSealed is a stored chunk of an upload that does not open: sealed with a data key no
// longer configured, or written in clear by a version before chunks were sealed. No retry
// opens it; the job fails and the file must be uploaded again.
var ErrChunkSealed = errors.New("the stored upload cannot be opened (its data key is gone, or an earlier version stored it); upload the file again")

// Upload stores a file read from r and queues its import. Each chunk is sealed and written in
// its own statement as it arrives, under a job that stays UPLOADING (claimed by no worker,
// shown by no list) until the last byte is in: a slow upload holds no connection while it
// reads, and one that fails is deleted. A job left UPLOADING by a replica that died is purged
// after AbandonedUploadAge.
func (s *Service) Upload(ctx context.Context, clientID, fileName string, r io.Reader) (domain.ImportJob, error) {
	fileName = strings.TrimSpace(fileName)
	if fileName == "" {
		fileName = "upload.csv"
	}
	if utf8.RuneCountInString(fileName) > 255 || !utf8.ValidString(fileName) {
		return domain.ImportJob{}, fault.Invalid("file", "the file name must be at most 255 characters")
	}
	job := domain.ImportJob{ID: uuid.NewString(), ClientID: clientID, FileName: fileName}
	if err := s.st.InsertJob(ctx, job); err != nil {
		return domain.ImportJob{}, err
	}
	out, err := s.receive(ctx, job, r)
	if err != nil {
		// Even when the caller has gone: nothing of a failed upload stays behind.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if derr := s.st.DeleteUpload(dctx, clientID, job.ID); derr != nil {
			s.log.Warn("import upload not deleted; the purge will", zap.String("job_id", job.ID), zap.Error(derr))
		}
		return domain.ImportJob{}, err
	}
	if out.Status == domain.ImportFailed {
		s.Metrics.finished(domain.ImportFailed)
	}
	return out, nil
}

// AbandonedUploadAge is the age at which a job still UPLOADING is taken for one whose replica
// died mid-upload, and purged. Uploads through the gateway end within its 60 s read timeout.
const AbandonedUploadAge = time.Hour

// receive writes the chunks of an UPLOADING job, then queues it (or fails it when empty).
func (s *Service) receive(ctx context.Context, job domain.ImportJob, r io.Reader) (domain.ImportJob, error) {
	jobID := job.ID
	buf := make([]byte, chunkSize)
	var size int64
	for seq := 0; ; seq++ {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if size += int64(n); size > MaxFileSize {
				return domain.ImportJob{}, ErrTooLarge
			}
			if err := s.st.InsertChunk(ctx, job.ClientID, jobID, seq, s.sealer.Seal(buf[:n], chunkAD(jobID, seq))); err != nil {
				return domain.ImportJob{}, err
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return domain.ImportJob{}, fmt.Errorf("read upload: %w", err)
		}
	}
	out, err := s.st.QueueJob(ctx, job.ClientID, jobID, size)
	if errors.Is(err, fault.ErrNotFound) {
		return out, fmt.Errorf("import job %s was purged before its upload ended", jobID)
	}
	if err != nil || size > 0 {
		return out, err
	}
	empty := "the file is empty"
	return s.finish(ctx, out, &empty, nil)
}

// finish marks the job COMPLETED (failure nil) or FAILED, and writes its import.completed or
// import.failed event in the same transaction, with what also must commit with it (then).
func (s *Service) finish(ctx context.Context, job domain.ImportJob, failure *string, then func(ctx context.Context, st Store) error) (domain.ImportJob, error) {
	var out domain.ImportJob
	err := s.tx.InTx(ctx, func(ctx context.Context, st Store) error {
		var err error
		if out, err = st.FinishJob(ctx, job.ClientID, job.ID, job.LeaseToken, failure); err != nil {
			return err
		}
		if then != nil {
			if err := then(ctx, st); err != nil {
				return err
			}
		}
		typ := events.ImportCompleted
		if out.Status == domain.ImportFailed {
			typ = events.ImportFailed
		}
		at := time.Now()
		if out.FinishedAt != nil {
			at = *out.FinishedAt
		}
		ev, err := events.New(out.ClientID, typ, events.ImportData{
			ImportID: out.ID, Status: string(out.Status), ProcessedRecords: out.ProcessedRecords, CreatedRecords: out.ImportedRows,
			UpdatedRecords: out.UpdatedRows, FailedRecords: out.FailedRows, Error: out.Failure,
		}, at)
		if err != nil {
			return err
		}
		return st.Emit(ctx, ev)
	})
	return out, err
}

// Get reads a job of the client.
func (s *Service) Get(ctx context.Context, clientID, id string) (domain.ImportJob, error) {
	if _, err := uuid.Parse(id); err != nil {
		return domain.ImportJob{}, fault.ErrNotFound
	}
	return s.st.GetJob(ctx, clientID, id)
}

// List reads a page of the client's jobs, newest first.
func (s *Service) List(ctx context.Context, clientID string, limit, offset int64) (domain.Page[domain.ImportJob], error) {
	return s.st.ListJobs(ctx, clientID, limit, offset)
}

// Run takes and runs jobs until ctx ends.
func (s *Service) Run(ctx context.Context) {
	for ctx.Err() == nil {
		ran, err := s.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("import job", zap.Error(err))
		}
		if !ran {
			select {
			case <-ctx.Done():
			case <-time.After(s.cfg.Poll):
			}
		}
	}
}

// MaxInterruptions is how many times a job may lose its worker mid-run before it is FAILED
// rather than resumed once more.
const MaxInterruptions = 3

// RunOnce takes one job, if one is waiting, and runs it to its end.
func (s *Service) RunOnce(ctx context.Context) (bool, error) {
	job, err := s.st.ClaimJob(ctx, s.cfg.Lease)
	if errors.Is(err, fault.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if job.Interruptions > MaxInterruptions {
		reason := fmt.Sprintf("the import stopped unexpectedly %d times and was given up; the first %d records of the file were imported",
			job.Interruptions, job.ProcessedRecords)
		_, err := s.finish(ctx, job, &reason, nil)
		if err == nil {
			s.Metrics.finished(domain.ImportFailed)
		}
		return true, err
	}
	err = s.run(ctx, job)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, domain.ErrLeaseLost):
		// Our lease ran out while we were slow and another worker holds the job now; what we
		// had not committed is its to redo.
		s.log.Warn("import job taken over by another worker", zap.String("job_id", job.ID))
		return true, nil
	case ctx.Err() != nil:
		// Stopping: hand the job back at once rather than make a successor wait out the lease.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if rerr := s.st.ReleaseJob(rctx, job.ClientID, job.ID, job.LeaseToken); rerr != nil {
			return true, fmt.Errorf("job %s: %w (and %w)", job.ID, err, rerr)
		}
		return true, nil
	default:
		// The lease runs out and another worker resumes; nothing committed is lost.
		return true, fmt.Errorf("job %s: %w", job.ID, err)
	}
}

func (s *Service) run(ctx context.Context, job domain.ImportJob) error {
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(s.st.Chunks(ctx, job.ClientID, job.ID, func(seq int, sealed []byte) error {
			b, err := s.sealer.Open(sealed, chunkAD(job.ID, seq))
			if err != nil {
				return fmt.Errorf("chunk %d: %w", seq, ErrChunkSealed)
			}
			_, err = pw.Write(b)
			return err
		}))
	}()
	defer pr.Close()

	// Counted from the file's start on every run (a resumed one reads the committed records
	// again to skip them), so a batch's count is where it ends in the file, give or take the
	// reader's buffers (a few KiB read ahead of its last record).
	read := &countingReader{r: pr}
	r, err := csvimport.NewReader(read)
	if err != nil {
		return s.fail(ctx, job, err)
	}
	if err := csvimport.Skip(r, int(job.ProcessedRecords)); errors.Is(err, io.EOF) {
		// Every record was committed before the previous worker stopped: only the end is left.
		return s.complete(ctx, job)
	} else if err != nil {
		return s.fail(ctx, job, err)
	}
	// Checking and sealing the next batch (Go's work) overlaps with committing this one
	// (Postgres's): the two cost about the same.
	g, gctx := errgroup.WithContext(ctx)
	batches := make(chan batch, 1)
	g.Go(func() error {
		defer close(batches)
		kept := len(job.Errors)
		for {
			b := s.prepare(r, &kept)
			b.p.Bytes, b.p.Lease, b.p.Token = read.n, s.cfg.Lease, job.LeaseToken
			select {
			case batches <- b:
			case <-gctx.Done():
				return gctx.Err()
			}
			if b.end != nil {
				return nil
			}
		}
	})
	var end error
	g.Go(func() error {
		for b := range batches {
			if b.p.Records > 0 {
				err := s.tx.InTx(gctx, func(ctx context.Context, st Store) error {
					return st.UpsertBatch(ctx, job.ClientID, job.ID, b.rows, &b.p)
				})
				if err != nil {
					return err
				}
				s.Metrics.rows(b.p.Imported, b.p.Updated, b.p.Failed)
			}
			end = b.end
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return err
	}
	if errors.Is(end, io.EOF) {
		return s.complete(ctx, job)
	}
	return s.fail(ctx, job, end)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// batch is up to batchRows records of the file, checked and sealed, with the progress they
// make; end is the error that ended the file after them (io.EOF at its end), or nil.
type batch struct {
	p    domain.Progress
	rows []domain.StageRow
	end  error
}

// prepare reads the next batch of records in order, then checks and seals them on every
// core. kept counts the row errors kept so far, for the cap.
func (s *Service) prepare(r *csvimport.Reader, kept *int) batch {
	var b batch
	recs := make([]csvimport.Record, 0, batchRows)
	for len(recs) < batchRows {
		rec, err := r.Read()
		if err != nil {
			b.end = err
			break
		}
		recs = append(recs, rec)
	}
	type checked struct {
		row  domain.StageRow
		errs []csvimport.RowError
	}
	out := make([]checked, len(recs))
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	per := (len(recs) + workers - 1) / workers
	for lo := 0; lo < len(recs); lo += per {
		hi := min(lo+per, len(recs))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				row, errs := r.Check(recs[i])
				if errs != nil {
					out[i].errs = errs
					continue
				}
				out[i].row = s.stage(row)
			}
		}()
	}
	wg.Wait()

	b.rows = make([]domain.StageRow, 0, len(recs))
	b.p = domain.Progress{MaxKept: csvimport.MaxErrors, Records: int64(len(recs))}
	for _, c := range out {
		if c.errs == nil {
			b.rows = append(b.rows, c.row)
			continue
		}
		b.p.Failed++
		for _, e := range c.errs {
			if *kept < csvimport.MaxErrors {
				b.p.Errors = append(b.p.Errors, domain.ImportError{Row: e.Row, Column: e.Column, Message: e.Message})
				*kept++
			}
		}
	}
	return b
}

func (s *Service) stage(row csvimport.Row) domain.StageRow {
	id := uuid.New()
	attrs := []byte("{}")
	if len(row.Attributes) > 0 {
		attrs, _ = json.Marshal(row.Attributes)
	}
	return domain.StageRow{
		ID: id, NumberSealed: profiles.SealNumber(s.vault, row.Number.E164, id.String()), NumberHash: s.vault.Hash(row.Number.E164),
		NumberMasked: row.Number.Masked(), CountryCode: profiles.Region(row.Number),
		ExternalID: row.ExternalID, FirstName: row.FirstName, LastName: row.LastName, Email: row.Email, Attributes: attrs,
	}
}

// complete marks the job COMPLETED and queues what it touched for IMPORT_COMPLETED integrations.
func (s *Service) complete(ctx context.Context, job domain.ImportJob) error {
	_, err := s.finish(ctx, job, nil, func(ctx context.Context, st Store) error {
		its, err := st.TriggerIntegrations(ctx, job.ClientID, domain.TriggerImportCompleted)
		if err != nil {
			return err
		}
		for _, it := range its {
			if _, err := st.EnqueueAll(ctx, it, domain.TriggerImportCompleted, &job.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		s.Metrics.finished(domain.ImportCompleted)
	}
	return err
}

// fail marks the job FAILED with a reason a person can act on (the file is not a CSV we read,
// or its stored chunks do not open, which no retry changes).
func (s *Service) fail(ctx context.Context, job domain.ImportJob, cause error) error {
	reason := cause.Error()
	switch {
	case errors.Is(cause, ErrChunkSealed):
		reason = ErrChunkSealed.Error()
	case !errors.Is(cause, csvimport.ErrNotCSV):
		return cause
	}
	_, err := s.finish(ctx, job, &reason, nil)
	if err == nil {
		s.Metrics.finished(domain.ImportFailed)
	}
	return err
}
