// Package relay tells Connect the numbers verification verified: the settle of a VERIFIED
// verification inserts a job (Args) in its own transaction, and River works it at least once,
// with retries and backoff, on any replica. Connect's receiver is idempotent, so a job worked
// twice (a crash after Connect answered) records nothing twice.
package relay

import (
	"context"
	"encoding/json"
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

// Args are the verified numbers of one transaction to tell Connect: one job for a batch of
// settles, not one per number.
type Args struct {
	Numbers []Number `json:"numbers"`
}

// Number is one verified number in a job's JSON.
type Number struct {
	ClientID       string    `json:"client_id"`
	VerificationID string    `json:"verification_id"`
	NumberHash     []byte    `json:"number_hash"`
	VerifiedAt     time.Time `json:"verified_at"`
}

// UnmarshalJSON also reads the job of one number that versions before multi-number jobs wrote
// (the Number fields at the top level), so that a backlog left by them is still relayed after
// an upgrade.
func (a *Args) UnmarshalJSON(b []byte) error {
	var multi struct {
		Numbers []Number `json:"numbers"`
	}
	if err := json.Unmarshal(b, &multi); err != nil {
		return err
	}
	if multi.Numbers != nil {
		a.Numbers = multi.Numbers
		return nil
	}
	var one Number
	if err := json.Unmarshal(b, &one); err != nil {
		return err
	}
	a.Numbers = []Number{one}
	return nil
}

// Kind names the job.
func (Args) Kind() string { return Kind }

// InsertOpts: retried for about three days (River's backoff, 25 attempts), long enough to ride
// out an outage of Connect, as the outbox rows waited for it before.
func (Args) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: MaxAttempts}
}

// MaxAttempts is how many times a job is tried (InsertOpts).
const MaxAttempts = 25

// NewArgs is the job of verified numbers.
func NewArgs(ns ...domain.VerifiedNumber) Args {
	a := Args{Numbers: make([]Number, len(ns))}
	for i, n := range ns {
		a.Numbers[i] = Number{ClientID: n.ClientID, VerificationID: n.VerificationID, NumberHash: n.NumberHash, VerifiedAt: n.VerifiedAt}
	}
	return a
}

// Connect is Connect's receiver of verified numbers, idempotent: a number it is told twice is
// kept once.
type Connect interface {
	RecordVerifiedNumbers(ctx context.Context, numbers []domain.VerifiedNumber) error
}

// Worker tells Connect the verified numbers of a job.
type Worker struct {
	river.WorkerDefaults[Args]
	Connect Connect
}

// Work sends the job's numbers; an error retries the job.
func (w *Worker) Work(ctx context.Context, job *river.Job[Args]) error {
	ns := make([]domain.VerifiedNumber, len(job.Args.Numbers))
	for i, a := range job.Args.Numbers {
		ns[i] = domain.VerifiedNumber{ClientID: a.ClientID, VerificationID: a.VerificationID, NumberHash: a.NumberHash, VerifiedAt: a.VerifiedAt}
	}
	if err := w.Connect.RecordVerifiedNumbers(ctx, ns); err != nil {
		return fmt.Errorf("tell connect %d verified numbers: %w", len(ns), err)
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
