package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
	"github.com/mnvhq/mnv/services/platform/fault"
	"github.com/mnvhq/mnv/services/platform/pg"
)

const jobColumns = `id::text, client_id::text, file_name, size_bytes, status, total_rows, imported_rows, updated_rows,
	failed_rows, errors, failure, processed_records, bytes_processed, progressed_at, created_at, started_at, finished_at,
	lease_token, interruptions`

func scanJob(row pgx.Row) (domain.ImportJob, error) {
	var j domain.ImportJob
	var errs []byte
	err := row.Scan(&j.ID, &j.ClientID, &j.FileName, &j.SizeBytes, &j.Status, &j.TotalRows, &j.ImportedRows, &j.UpdatedRows,
		&j.FailedRows, &errs, &j.Failure, &j.ProcessedRecords, &j.BytesProcessed, &j.ProgressedAt, &j.CreatedAt, &j.StartedAt, &j.FinishedAt, &j.LeaseToken, &j.Interruptions)
	if errors.Is(err, pgx.ErrNoRows) {
		return j, fault.ErrNotFound
	}
	if err != nil {
		return j, fmt.Errorf("read import job: %w", err)
	}
	if err := json.Unmarshal(errs, &j.Errors); err != nil {
		return j, fmt.Errorf("read import errors: %w", err)
	}
	return j, nil
}

// InsertJob stores a new job, UPLOADING: its chunks are being written, no worker takes it and
// no list shows it.
func (s *Store) InsertJob(ctx context.Context, j domain.ImportJob) error {
	_, err := s.db.Exec(ctx, `INSERT INTO connect.import_jobs (id, client_id, file_name, size_bytes, status)
		VALUES ($1, $2, $3, 0, 'UPLOADING')`, j.ID, j.ClientID, j.FileName)
	if err != nil {
		return fmt.Errorf("insert import job: %w", err)
	}
	return nil
}

// InsertChunk stores one chunk of an uploaded file, as sealed by the caller. The job's row must
// still be there (a job purged as abandoned takes its chunks with it, and refuses more).
func (s *Store) InsertChunk(ctx context.Context, clientID, jobID string, seq int, sealed []byte) error {
	if _, err := s.db.Exec(ctx, `INSERT INTO connect.import_chunks (client_id, job_id, seq, data) VALUES ($1, $2, $3, $4)`,
		clientID, jobID, seq, sealed); err != nil {
		return fmt.Errorf("insert chunk: %w", err)
	}
	return nil
}

// QueueJob ends an upload: it records the file's size and queues the job. ErrNotFound: the
// job is no longer UPLOADING (it was purged as abandoned).
func (s *Store) QueueJob(ctx context.Context, clientID, jobID string, size int64) (domain.ImportJob, error) {
	return scanJob(s.db.QueryRow(ctx, `UPDATE connect.import_jobs SET size_bytes = $3, status = 'QUEUED'
		WHERE client_id = $1 AND id = $2 AND status = 'UPLOADING' RETURNING `+jobColumns, clientID, jobID, size))
}

// DeleteUpload removes a job that is still UPLOADING, with its chunks: an upload that failed
// leaves nothing.
func (s *Store) DeleteUpload(ctx context.Context, clientID, jobID string) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM connect.import_jobs WHERE client_id = $1 AND id = $2 AND status = 'UPLOADING'`, clientID, jobID); err != nil {
		return fmt.Errorf("delete upload: %w", err)
	}
	return nil
}

// GetJob reads a job of a client (not one still UPLOADING).
func (s *Store) GetJob(ctx context.Context, clientID, id string) (domain.ImportJob, error) {
	return scanJob(s.db.QueryRow(ctx, `SELECT `+jobColumns+` FROM connect.import_jobs
		WHERE id = $1 AND client_id = $2 AND status <> 'UPLOADING'`, id, clientID))
}

// ListJobs reads a page of a client's jobs, newest first (not those still UPLOADING).
func (s *Store) ListJobs(ctx context.Context, clientID string, limit, offset int64) (domain.Page[domain.ImportJob], error) {
	var p domain.Page[domain.ImportJob]
	q := pg.PageQuery{Columns: jobColumns, From: `FROM connect.import_jobs WHERE client_id = $1 AND status <> 'UPLOADING'`,
		Order: "created_at DESC, import_jobs.id", Args: []any{clientID}}
	var err error
	if p.Items, p.Total, err = pg.Page(ctx, s.db, q, limit, offset, scanJob); err != nil {
		return p, fmt.Errorf("list import jobs: %w", err)
	}
	return p, nil
}

// ClaimJob takes the oldest job that is QUEUED, or RUNNING with an expired lease (its worker
// died), and leases it.
//
// Jobs of every client are candidates, so the oldest few are read without a lock (a read across
// clients is a background sweep's to make), then each in turn is taken with its client, SKIP
// LOCKED, and only if it still waits: no lock is ever taken across clients
// (docs/operations.md#past-one-postgresql). A candidate another worker took meanwhile is passed
// over for the next.
func (s *Store) ClaimJob(ctx context.Context, lease time.Duration) (domain.ImportJob, error) {
	rows, err := s.db.Query(ctx, `SELECT client_id::text, id::text FROM connect.import_jobs
		WHERE (status = 'QUEUED' AND size_bytes > 0) OR (status = 'RUNNING' AND lease_until < now())
		ORDER BY created_at LIMIT $1`, claimCandidates)
	if err != nil {
		return domain.ImportJob{}, fmt.Errorf("claim import job: %w", err)
	}
	candidates, err := pgx.CollectRows(rows, pgx.RowToStructByPos[rowKey])
	if err != nil {
		return domain.ImportJob{}, fmt.Errorf("claim import job: %w", err)
	}
	for _, c := range candidates {
		j, err := scanJob(s.db.QueryRow(ctx, `UPDATE connect.import_jobs j SET status = 'RUNNING', lease_until = now() + $3::interval,
				started_at = coalesce(j.started_at, now()), lease_token = j.lease_token + 1,
				interruptions = j.interruptions + (j.status = 'RUNNING')::int
			FROM (SELECT id AS todo_id FROM connect.import_jobs
				WHERE client_id = $1 AND id = $2
				  AND ((status = 'QUEUED' AND size_bytes > 0) OR (status = 'RUNNING' AND lease_until < now()))
				FOR UPDATE SKIP LOCKED) todo
			WHERE j.client_id = $1 AND j.id = todo.todo_id RETURNING `+jobColumns, c.ClientID, c.ID, lease.String()))
		if !errors.Is(err, fault.ErrNotFound) {
			return j, err
		}
	}
	return domain.ImportJob{}, fault.ErrNotFound
}

// claimCandidates is how many waiting jobs a claim reads before it takes the first it can.
const claimCandidates = 8

// Chunks calls fn with each chunk of a job's file, as stored (sealed), in order, one at a time.
func (s *Store) Chunks(ctx context.Context, clientID, jobID string, fn func(seq int, sealed []byte) error) error {
	var seq int
	for {
		var sealed []byte
		err := s.db.QueryRow(ctx, `SELECT data FROM connect.import_chunks WHERE client_id = $1 AND job_id = $2 AND seq = $3`,
			clientID, jobID, seq).Scan(&sealed)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read chunk %d: %w", seq, err)
		}
		if err := fn(seq, sealed); err != nil {
			return err
		}
		seq++
	}
}

// UpsertBatch copies rows into a staging table (COPY) and upserts them into the client's
// profiles (one profile per number: an existing one is updated, never duplicated), then
// records the job's progress (records, counters, kept errors, how far into the file), all in
// the Store's transaction, so that a restart resumes exactly after the last committed batch.
func (s *Store) UpsertBatch(ctx context.Context, clientID, jobID string, rows []domain.StageRow, p *domain.Progress) error {
	tx, err := s.tx("upsert batch")
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS import_stage (
			id uuid, number_sealed bytea, number_hash bytea, number_masked text, country_code text,
			external_id text, first_name text, last_name text, email text, attributes jsonb, ord integer
		) ON COMMIT DELETE ROWS`); err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	var counts profileCounts
	if len(rows) > 0 {
		if err := s.lockMatchShared(ctx, clientID); err != nil {
			return err
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"import_stage"},
			[]string{"id", "number_sealed", "number_hash", "number_masked", "country_code", "external_id", "first_name", "last_name", "email", "attributes", "ord"},
			pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
				r := rows[i]
				return []any{r.ID, r.NumberSealed, r.NumberHash, r.NumberMasked, r.CountryCode, r.ExternalID, r.FirstName, r.LastName, r.Email, r.Attributes, i}, nil
			}))
		if err != nil {
			return fmt.Errorf("copy batch: %w", err)
		}
		// The client's counts change with the rows inserted (matched or not) and with the rows
		// of the client that the batch finds unmatched and matches (a number verified since).
		// Those are locked first, so what they were is what the upsert changes. Each is looked
		// up by its key from a number of the batch the client verified (LATERAL: an index probe
		// per number), never by a join the planner may turn around: without statistics (a bulk
		// load outruns autoanalyze) it took the client's unmatched profiles for a row or two and
		// read them all against the batch's rows, a batch costing the client's profiles times
		// its rows, and a large import stalled.
		b := &pgx.Batch{}
		b.Queue(`SELECT count(*) FROM (SELECT DISTINCT number_hash FROM import_stage) s
				JOIN connect.verified_numbers v ON v.client_id = $1 AND v.number_hash = s.number_hash
				CROSS JOIN LATERAL (SELECT FROM connect.profiles p
					WHERE p.client_id = $1 AND p.number_hash = s.number_hash AND p.matched_at IS NULL FOR UPDATE) p`, clientID)
		// Within a file the last row of a number wins. A row inserted has the staged row's id (a
		// fresh UUID), one updated keeps its own: that tells them apart (xmax = 0 did, but a
		// table partitioned by client, as Citus' shards are, returns no system column).
		b.Queue(`WITH up AS (
				INSERT INTO connect.profiles AS p (id, client_id, number_sealed, number_hash, number_masked, country_code,
					external_id, first_name, last_name, email, attributes, source, import_job_id, matched_at)
				SELECT DISTINCT ON (s.number_hash) s.id, $1, s.number_sealed, s.number_hash, s.number_masked, s.country_code,
					s.external_id, s.first_name, s.last_name, s.email, s.attributes, 'IMPORT', $2, v.verified_at
				FROM import_stage s LEFT JOIN connect.verified_numbers v ON v.client_id = $1 AND v.number_hash = s.number_hash
				ORDER BY s.number_hash, s.ord DESC
				ON CONFLICT (client_id, number_hash) DO UPDATE SET
					external_id = coalesce(excluded.external_id, p.external_id),
					first_name = coalesce(excluded.first_name, p.first_name),
					last_name = coalesce(excluded.last_name, p.last_name),
					email = coalesce(excluded.email, p.email),
					attributes = p.attributes || excluded.attributes,
					import_job_id = excluded.import_job_id,
					matched_at = coalesce(p.matched_at, excluded.matched_at),
					updated_at = now()
				RETURNING id, matched_at IS NOT NULL AS matched)
			SELECT count(s.id), count(*) - count(s.id), count(s.id) FILTER (WHERE up.matched)
			FROM up LEFT JOIN import_stage s ON s.id = up.id`,
			clientID, jobID)
		br := s.db.SendBatch(ctx, b)
		var newlyMatched, insertedMatched int64
		err = br.QueryRow().Scan(&newlyMatched)
		if err == nil {
			err = br.QueryRow().Scan(&p.Imported, &p.Updated, &insertedMatched)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("upsert batch: %w", err)
		}
		counts = profileCounts{profiles: p.Imported, matched: insertedMatched + newlyMatched}
	}
	errs := []byte("[]")
	if len(p.Errors) > 0 {
		errs, _ = json.Marshal(p.Errors)
	}
	// The counts and the progress in one round trip.
	b := &pgx.Batch{}
	queueCount(b, clientID, counts)
	counted := b.Len()
	b.Queue(`UPDATE connect.import_jobs SET
			processed_records = processed_records + $2, total_rows = total_rows + $2,
			imported_rows = imported_rows + $3, updated_rows = updated_rows + $4, failed_rows = failed_rows + $5,
			errors = CASE WHEN jsonb_array_length(errors) >= $7 THEN errors
				ELSE (SELECT coalesce(jsonb_agg(e), '[]') FROM (SELECT e FROM jsonb_array_elements(errors || $6::jsonb) e LIMIT $7) x) END,
			lease_until = now() + $8::interval,
			bytes_processed = greatest(bytes_processed, least($10, size_bytes)), progressed_at = now()
		WHERE client_id = $11 AND id = $1 AND lease_token = $9 AND status = 'RUNNING'`,
		jobID, p.Records, p.Imported, p.Updated, p.Failed, errs, p.MaxKept, p.Lease.String(), p.Token, p.Bytes, clientID)
	br := s.db.SendBatch(ctx, b)
	defer br.Close()
	if counted > 0 {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("count profiles: %w", err)
		}
	}
	tag, err := br.Exec()
	if err != nil {
		return fmt.Errorf("record progress: %w", err)
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("record progress: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return domain.ErrLeaseLost
	}
	return nil
}

// ReleaseJob hands a RUNNING job back to the queue, where it resumes from its progress: a
// worker stopping gracefully does not make its successor wait out the lease.
func (s *Store) ReleaseJob(ctx context.Context, clientID, jobID string, token int64) error {
	_, err := s.db.Exec(ctx, `UPDATE connect.import_jobs SET status = 'QUEUED', lease_until = NULL
		WHERE client_id = $1 AND id = $2 AND lease_token = $3 AND status = 'RUNNING'`, clientID, jobID, token)
	if err != nil {
		return fmt.Errorf("release import job: %w", err)
	}
	return nil
}

// FinishJob marks a job COMPLETED (its whole file processed), or FAILED with a reason (its
// progress left where it stopped), and drops its file.
func (s *Store) FinishJob(ctx context.Context, clientID, jobID string, token int64, failure *string) (domain.ImportJob, error) {
	status := domain.ImportCompleted
	if failure != nil {
		status = domain.ImportFailed
	}
	j, err := scanJob(s.db.QueryRow(ctx, `UPDATE connect.import_jobs SET status = $3, failure = $4, finished_at = now(), lease_until = NULL,
			bytes_processed = CASE WHEN $3 = 'COMPLETED' THEN size_bytes ELSE bytes_processed END
		WHERE client_id = $1 AND id = $2 AND lease_token = $5 AND status IN ('QUEUED', 'RUNNING') RETURNING `+jobColumns, clientID, jobID, status, failure, token))
	if errors.Is(err, fault.ErrNotFound) {
		return j, domain.ErrLeaseLost
	}
	if err != nil {
		return j, err
	}
	if _, err := s.db.Exec(ctx, `DELETE FROM connect.import_chunks WHERE client_id = $1 AND job_id = $2`, clientID, jobID); err != nil {
		return j, fmt.Errorf("drop import file: %w", err)
	}
	return j, nil
}
