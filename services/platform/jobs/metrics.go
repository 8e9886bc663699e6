package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.uber.org/zap"
)

func zapError(err error) zap.Field { return zap.Error(err) }

// Outcomes of one attempt, the values of the outcome label.
const (
	OutcomeCompleted = "completed"
	OutcomeRetried   = "retried"   // failed; River tries again after a backoff
	OutcomeDiscarded = "discarded" // failed its last attempt
	OutcomeSnoozed   = "snoozed"   // put back on purpose (a limit), not a failure
	OutcomeCancelled = "cancelled" // given up on purpose: retrying cannot help
)

// Metrics count the attempts of every job kind and sample the backlog. A River middleware, so
// every worker of the process is counted without doing anything.
type Metrics struct {
	river.MiddlewareDefaults
	attempts *prometheus.CounterVec
	duration *prometheus.HistogramVec
	backlog  *prometheus.GaugeVec
	oldest   *prometheus.GaugeVec
}

// newMetrics registers the jobs' metrics on reg; nil gives metrics that record nothing.
func newMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mnv_job_attempts_total", Help: "Attempts of background jobs, by kind and outcome.",
		}, []string{"kind", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mnv_job_attempt_duration_seconds", Help: "Duration of one attempt of a background job, by kind.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30},
		}, []string{"kind"}),
		backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mnv_job_backlog", Help: "Jobs waiting, by kind and state (available: due now; retryable and scheduled: due later), sampled every 5 s.",
		}, []string{"kind", "state"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mnv_job_oldest_available_seconds", Help: "Age of the oldest job due and not yet taken, by kind, sampled every 5 s.",
		}, []string{"kind"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.attempts, m.duration, m.backlog, m.oldest} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Work counts one attempt of job by its outcome.
func (m *Metrics) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	start := time.Now()
	err := doInner(ctx)
	m.duration.WithLabelValues(job.Kind).Observe(time.Since(start).Seconds())
	m.attempts.WithLabelValues(job.Kind, outcome(job, err)).Inc()
	return err
}

func outcome(job *rivertype.JobRow, err error) string {
	var (
		snooze *rivertype.JobSnoozeError
		cancel *rivertype.JobCancelError
	)
	switch {
	case err == nil:
		return OutcomeCompleted
	case errors.As(err, &snooze):
		return OutcomeSnoozed
	case errors.As(err, &cancel):
		return OutcomeCancelled
	case job.Attempt >= job.MaxAttempts:
		return OutcomeDiscarded
	default:
		return OutcomeRetried
	}
}

// sample reads the backlog by kind: one grouped query every 5 s over River's state index, not
// a query per scrape.
func (q *Queue) sample(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	rows, err := q.pool.Query(ctx, `SELECT kind, state::text, count(*),
		extract(epoch FROM now() - min(scheduled_at))::float8
		FROM `+q.opts.Schema+`.river_job WHERE state IN ('available', 'retryable', 'scheduled') GROUP BY kind, state`)
	if err != nil {
		if ctx.Err() == nil {
			q.log.Warn("job backlog not sampled", zapError(err))
		}
		return
	}
	defer rows.Close()
	q.metrics.backlog.Reset()
	q.metrics.oldest.Reset()
	for rows.Next() {
		var (
			kind, state string
			n           int64
			age         float64
		)
		if err := rows.Scan(&kind, &state, &n, &age); err != nil {
			q.log.Warn("job backlog not sampled", zapError(err))
			return
		}
		q.metrics.backlog.WithLabelValues(kind, state).Set(float64(n))
		if state == "available" {
			q.metrics.oldest.WithLabelValues(kind).Set(max(age, 0))
		}
	}
}
