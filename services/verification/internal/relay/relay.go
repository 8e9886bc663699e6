// Package relay tells Connect what verification settled. A settle queues, in its own statement,
// a row per verification (its verification.completed event and, when VERIFIED, its number) in
// the relay queue of verification's schema; drain jobs (Drain), worked by River on any replica,
// take the queue in batches and tell Connect, and a row leaves the queue only in the
// transaction that saw Connect answer. Connect's receivers are idempotent (a number is kept
// once, an event id accepted once), so a batch told twice (a crash after Connect answered)
// delivers nothing twice. The jobs that earlier versions wrote instead (Settled, one per settle
// batch, and Args, numbers alone) are still worked.
package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"go.uber.org/zap"

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

// Register adds the drain's worker, which takes from queue, and the workers of the jobs that
// earlier versions wrote (Args, Settled), so a backlog they left is still told after an
// upgrade. The numbers of the jobs worked at the same time reach Connect in one call
// (groupcommit.Merge), which its idempotent receiver allows; forward is how their events reach
// it.
func Register(workers *river.Workers, queue Taker, c Connect, forward Forwarder, log *zap.Logger) {
	calls := groupcommit.Merge(groupcommit.Config{Timeout: attemptTimeout}, c.RecordVerifiedNumbers, nil)
	river.AddWorker(workers, &DrainWorker{Queue: queue, Connect: merged{calls}, Forward: forward, Log: log})
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

// DrainKind is the kind of the jobs that tell Connect what the relay queue holds.
const DrainKind = "verification.relay_drain"

// Drain is a job that tells Connect what settles left in the relay queue (migration 009): its
// args are empty, as the queue is its work, and any drain takes all it finds. A settle inserts
// one at most every notification period of its process (jobs.Queue.Notify) with the wake-up
// that goes with it, so one drain carries every settle of that period; SweepJob inserts one a
// second, for what the last drain of a burst did not see.
type Drain struct{}

// Kind names the job.
func (Drain) Kind() string { return DrainKind }

// InsertOpts: the numbers' queue, one attempt. What a failed drain held stays queued for the
// next one (a second away at most), so retrying it too would only add calls to a Connect that
// is failing.
func (Drain) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: Queue, MaxAttempts: 1}
}

// SweepJob is the periodic drain that the elected leader among the replicas inserts every
// every, and once at start.
func SweepJob(every time.Duration) *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(every), func() (river.JobArgs, *river.InsertOpts) {
		return Drain{}, nil
	}, &river.PeriodicJobOpts{RunOnStart: true})
}

// SweepEvery is how often SweepJob drains: the longest a settled verification waits for Connect
// when no drain follows its settle.
const SweepEvery = time.Second

// Item is one settled verification in the relay queue: its verification.completed event
// (outbox.EventJSON) and, when VERIFIED, its number's record.
type Item struct {
	Event  json.RawMessage
	Number *domain.VerifiedNumber
}

// Taker hands out the relay queue (store.RelayQueue).
type Taker interface {
	// Take calls deliver with up to limit items, oldest first, that no other drain holds, and
	// removes them from the queue when deliver returns nil; when it fails they stay queued. It
	// returns how many it took; with none, deliver is not called.
	Take(ctx context.Context, limit int, deliver func(ctx context.Context, items []Item) error) (taken int, err error)
}

// drainBatch bounds the items of one call to Connect.
const drainBatch = 500

// DrainWorker tells Connect what the relay queue holds, drainBatch items a call, until it is
// empty.
type DrainWorker struct {
	river.WorkerDefaults[Drain]
	Queue   Taker
	Connect Connect
	Forward Forwarder
	Log     *zap.Logger
}

// Work takes the queue batch after batch, for attemptTimeout at most, well inside its own
// Timeout: a backlog (Connect was away) is left to the next drain, a second away, rather than
// cut by the deadline in the middle of a batch. An error leaves the batch queued and ends the
// job.
func (w *DrainWorker) Work(ctx context.Context, _ *river.Job[Drain]) error {
	for start := time.Now(); ; {
		n, err := w.Queue.Take(ctx, drainBatch, w.deliver)
		if err != nil {
			return fmt.Errorf("drain the relay queue: %w", err)
		}
		if n < drainBatch || time.Since(start) > attemptTimeout {
			return nil
		}
	}
}

// deliver records the items' numbers, then forwards their events. Events Connect refuses for
// good (a river.JobCancel of the forwarder) are dropped one by one, not with the batch: the
// others of their batch are forwarded alone.
func (w *DrainWorker) deliver(ctx context.Context, items []Item) error {
	var (
		numbers []domain.VerifiedNumber
		evs     = make([]json.RawMessage, 0, len(items))
	)
	for _, it := range items {
		if it.Number != nil {
			numbers = append(numbers, *it.Number)
		}
		evs = append(evs, it.Event)
	}
	if len(numbers) > 0 {
		if err := w.Connect.RecordVerifiedNumbers(ctx, numbers); err != nil {
			return fmt.Errorf("tell connect %d verified numbers: %w", len(numbers), err)
		}
	}
	if err := w.Forward(ctx, evs); !refused(err) {
		return err
	} else if len(evs) == 1 {
		w.dropped(err)
		return nil
	}
	for _, ev := range evs {
		if err := w.Forward(ctx, []json.RawMessage{ev}); refused(err) {
			w.dropped(err)
		} else if err != nil {
			return err
		}
	}
	return nil
}

// refused reports whether err is the forwarder's answer for an event Connect refuses for good.
func refused(err error) bool {
	var cancel *river.JobCancelError
	return errors.As(err, &cancel)
}

// dropped logs an event Connect refused for good, which is not sent again.
func (w *DrainWorker) dropped(err error) {
	if w.Log != nil {
		w.Log.Error("connect refused a verification event for good; it is dropped", zap.Error(err))
	}
}

// Timeout bounds a drain: its batches' calls to Connect, a few at most when it keeps up.
func (w *DrainWorker) Timeout(*river.Job[Drain]) time.Duration { return LongestAttempt }
