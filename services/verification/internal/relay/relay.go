// Package relay tells Connect what verification settled: a batch of settles inserts one job
// (Settled) in its own statement, with the batch's verification.completed events and its
// VERIFIED numbers, and River works it at least once, with retries and backoff, on any replica.
// Connect's receivers are idempotent (a number is kept once, an event id accepted once), so a
// job worked twice (a crash after Connect answered) delivers nothing twice. Jobs of the numbers
// alone (Args), which earlier versions wrote, are still worked.
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
	if err := w.Connect.RecordVerifiedNumbers(ctx, verified(job.Args.Numbers)); err != nil {
		return fmt.Errorf("tell connect %d verified numbers: %w", len(job.Args.Numbers), err)
	}
	return nil
}

// verified are the numbers of a job's args.
func verified(args []Number) []domain.VerifiedNumber {
	ns := make([]domain.VerifiedNumber, len(args))
	for i, a := range args {
		ns[i] = domain.VerifiedNumber{ClientID: a.ClientID, VerificationID: a.VerificationID, NumberHash: a.NumberHash, VerifiedAt: a.VerifiedAt}
	}
	return ns
}

// attemptTimeout bounds one call to Connect.
const attemptTimeout = 10 * time.Second

// Timeout bounds one call to Connect.
func (w *Worker) Timeout(*river.Job[Args]) time.Duration { return attemptTimeout }

// SettledKind is the kind of a settle batch's job.
const SettledKind = "verification.settled"

// Settled are the args of a settle batch's job: its events, each in the shape of outbox's
// forward job (outbox.EventJSON, kept as they are for the Forwarder), and its verified numbers,
// in the batch's order. One job where there were two, one of each: River costs per job (an
// insert, a fetch and a completion, each touching five indexes, and a worker run).
type Settled struct {
	Events  []json.RawMessage `json:"events"`
	Numbers []Number          `json:"numbers"`
}

// Kind names the job.
func (Settled) Kind() string { return SettledKind }

// InsertOpts: the numbers' queue, retried as long as either kind alone was.
func (Settled) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: MaxAttempts}
}

// Forwarder forwards the events of a job to Connect (outbox.ForwardJSON in the app). An error
// retries the job; a river.JobCancel error ends it.
type Forwarder func(ctx context.Context, events []json.RawMessage) error

// SettledWorker tells Connect what a settle batch decided.
type SettledWorker struct {
	river.WorkerDefaults[Settled]
	Connect Connect
	Forward Forwarder
}

// Work records the job's numbers, then forwards its events: an event Connect rejects cancels
// the job after the numbers were kept. An error retries the job, both parts: Connect keeps once
// what it was told before.
func (w *SettledWorker) Work(ctx context.Context, job *river.Job[Settled]) error {
	if len(job.Args.Numbers) > 0 {
		if err := w.Connect.RecordVerifiedNumbers(ctx, verified(job.Args.Numbers)); err != nil {
			return fmt.Errorf("tell connect %d verified numbers: %w", len(job.Args.Numbers), err)
		}
	}
	if len(job.Args.Events) == 0 {
		return nil
	}
	return w.Forward(ctx, job.Args.Events)
}

// LongestAttempt bounds a job of this package: a Settled job makes two calls to Connect
// (jobs.Config.Validate).
const LongestAttempt = 2 * attemptTimeout

// Timeout bounds the two calls to Connect.
func (w *SettledWorker) Timeout(*river.Job[Settled]) time.Duration { return LongestAttempt }

// Register adds the workers of both kinds to workers. The numbers of the jobs worked at the
// same time reach Connect in one call (groupcommit.Merge), which its idempotent receiver
// allows; forward is how their events reach it.
func Register(workers *river.Workers, c Connect, forward Forwarder) {
	calls := groupcommit.Merge(groupcommit.Config{Timeout: attemptTimeout}, c.RecordVerifiedNumbers, nil)
	river.AddWorker(workers, &Worker{Connect: merged{calls}})
	river.AddWorker(workers, &SettledWorker{Connect: merged{calls}, Forward: forward})
}

// merged is a Connect whose concurrent calls are merged.
type merged struct {
	calls *groupcommit.Calls[domain.VerifiedNumber]
}

func (m merged) RecordVerifiedNumbers(ctx context.Context, numbers []domain.VerifiedNumber) error {
	return m.calls.Do(ctx, numbers)
}
