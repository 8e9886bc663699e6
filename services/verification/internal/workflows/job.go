package workflows

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"
)

// SMSKind is the SMS job's kind.
const SMSKind = "workflow.sms"

// SMSQueue is the River queue the SMS jobs run in: their own, so a slow SMSC never holds up
// the events' or the relay's jobs.
const SMSQueue = "sms"

// SMSArgs are the SMS job's River arguments.
type SMSArgs struct{ SMSJob }

// Kind names the job.
func (SMSArgs) Kind() string { return SMSKind }

// InsertOpts: River's backoff over 25 attempts (about three days), long enough to ride out an
// SMSC or accounts that is away; a code outlives none of it, and a job that finds its step
// superseded sends nothing.
func (SMSArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: SMSQueue, MaxAttempts: 25}
}

// Worker works the SMS jobs.
type Worker struct {
	river.WorkerDefaults[SMSArgs]
	Service *Service
}

// Work sends one step's SMS. A step in doubt held for its receipt snoozes the job (which
// costs none of its attempts) until the hold has passed.
func (w *Worker) Work(ctx context.Context, job *river.Job[SMSArgs]) error {
	err := w.Service.SendSMS(ctx, job.Args.SMSJob)
	if held := (*HeldError)(nil); errors.As(err, &held) {
		return river.JobSnooze(held.Wait)
	}
	return err
}

// AttemptTimeout bounds an attempt: the debit and the send, each bounded on its own. River's
// rescue of abandoned jobs (MNV_JOBS_RESCUE_AFTER) must wait longer.
const AttemptTimeout = 30 * time.Second

// Timeout is AttemptTimeout.
func (w *Worker) Timeout(*river.Job[SMSArgs]) time.Duration { return AttemptTimeout }
