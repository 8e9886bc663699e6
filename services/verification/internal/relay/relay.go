// Package relay tells Connect the numbers verification verified: the settle of a VERIFIED
// verification inserts a job (Args) in its own transaction, and River works it at least once,
// with retries and backoff, on any replica. Connect's receiver is idempotent, so a job worked
// twice (a crash after Connect answered) records nothing twice.
package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/mnvhq/mnv/services/platform/groupcommit"
	"github.com/mnvhq/mnv/services/verification/internal/domain"
)

// Kind is the job's kind, the label of its metrics (mnv_job_oldest_available_seconds is the
// relay's lag).
const Kind = "verified_number.record"

// Queue is the River queue of the jobs, apart from the events' so that a backlog of one does not
// hold up the other.
const Queue = "verified_numbers"

// Args is one verified number to tell Connect.
type Args struct {
	ClientID       string    `json:"client_id"`
	VerificationID string    `json:"verification_id"`
	NumberHash     []byte    `json:"number_hash"`
	VerifiedAt     time.Time `json:"verified_at"`
}

// Kind names the job.
func (Args) Kind() string { return Kind }

// InsertOpts: retried for about three days (River's backoff, 25 attempts), long enough to ride
// out an outage of Connect, as the outbox rows waited for it before.
func (Args) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: 25}
}

// NewArgs is the job of a verified number.
func NewArgs(n domain.VerifiedNumber) Args {
	return Args{ClientID: n.ClientID, VerificationID: n.VerificationID, NumberHash: n.NumberHash, VerifiedAt: n.VerifiedAt}
}

// Connect is Connect's receiver of verified numbers, idempotent: a number it is told twice is
// kept once.
type Connect interface {
	RecordVerifiedNumbers(ctx context.Context, numbers []domain.VerifiedNumber) error
}

// Worker tells Connect one verified number per job.
type Worker struct {
	river.WorkerDefaults[Args]
	Connect Connect
}

// Work sends the job's number; an error retries the job.
func (w *Worker) Work(ctx context.Context, job *river.Job[Args]) error {
	a := job.Args
	n := domain.VerifiedNumber{ClientID: a.ClientID, VerificationID: a.VerificationID, NumberHash: a.NumberHash, VerifiedAt: a.VerifiedAt}
	if err := w.Connect.RecordVerifiedNumbers(ctx, []domain.VerifiedNumber{n}); err != nil {
		return fmt.Errorf("tell connect verification %s: %w", a.VerificationID, err)
	}
	return nil
}

// attemptTimeout bounds one call to Connect.
const attemptTimeout = 10 * time.Second

// Timeout bounds one call to Connect.
func (w *Worker) Timeout(*river.Job[Args]) time.Duration { return attemptTimeout }

// Register adds the worker to workers. The numbers of the jobs worked at the same time reach
// Connect in one call (groupcommit.Merge), which its idempotent receiver allows.
func Register(workers *river.Workers, c Connect) {
	calls := groupcommit.Merge(groupcommit.Config{Timeout: attemptTimeout}, c.RecordVerifiedNumbers, nil)
	river.AddWorker(workers, &Worker{Connect: merged{calls}})
}

// merged is a Connect whose concurrent calls are merged.
type merged struct {
	calls *groupcommit.Calls[domain.VerifiedNumber]
}

func (m merged) RecordVerifiedNumbers(ctx context.Context, numbers []domain.VerifiedNumber) error {
	return m.calls.Do(ctx, numbers)
}
