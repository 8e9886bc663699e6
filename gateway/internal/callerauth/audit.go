package callerauth

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mnvhq/mnv/services/accounts/accountsclient"
)

// The audit record of a person's request (docs/architecture.md, "The console"): the gateway
// tries it once while the answer waits, so the console's audit log reads its own action; when
// accounts cannot take it then (down, restarting, slow), the event goes to a bounded queue in
// memory that one goroutine retries with backoff until it lands. The event carries its id and
// time from the first attempt, and accounts keeps one row per id, so a retry whose first answer
// was lost is no second event and a late one keeps the time of the action. What the queue
// cannot keep (full, too old, a refusal that no retry changes, or still queued when the gateway
// has stopped draining at shutdown) is counted in mnv_gateway_audit_events_dropped_total and
// logged: the record is durable across a moment of accounts, not across the gateway's own crash.

// AuditQueueConfig bounds the retries.
type AuditQueueConfig struct {
	// Size is how many events wait at most (MNV_AUDIT_QUEUE_SIZE).
	Size int
	// MaxAge is how long an event is retried (MNV_AUDIT_RETRY_FOR).
	MaxAge time.Duration
	// First bounds the attempt made while the answer waits.
	First time.Duration
	// MinBackoff and MaxBackoff bound the wait between retries.
	MinBackoff, MaxBackoff time.Duration
	// Drain is how long Close keeps retrying what is queued.
	Drain time.Duration
}

// DefaultAuditQueueConfig is what the gateway runs with unless configured.
func DefaultAuditQueueConfig() AuditQueueConfig {
	return AuditQueueConfig{
		Size: 10000, MaxAge: time.Hour, First: 2 * time.Second,
		MinBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second, Drain: 5 * time.Second,
	}
}

// Validate checks the bounds.
func (c AuditQueueConfig) Validate() error {
	if c.Size < 1 || c.MaxAge < time.Second {
		return errors.New("MNV_AUDIT_QUEUE_SIZE must be at least 1 and MNV_AUDIT_RETRY_FOR at least 1s")
	}
	return nil
}

// AuditQueue records audit events through an Auditor, retrying those that fail.
type AuditQueue struct {
	aud     Auditor
	log     *zap.Logger
	cfg     AuditQueueConfig
	pending chan accountsclient.AuditEvent
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once

	retried prometheus.Counter
	dropped *prometheus.CounterVec
	depth   prometheus.GaugeFunc
}

// NewAuditQueue starts the queue's goroutine; Close stops it.
func NewAuditQueue(aud Auditor, cfg AuditQueueConfig, log *zap.Logger, reg prometheus.Registerer) (*AuditQueue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	q := &AuditQueue{
		aud: aud, log: log, cfg: cfg, pending: make(chan accountsclient.AuditEvent, cfg.Size),
		stop: make(chan struct{}), done: make(chan struct{}),
		retried: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mnv_gateway_audit_events_retried_total",
			Help: "Console audit events accounts did not take at once, queued for retry.",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mnv_gateway_audit_events_dropped_total",
			Help: "Console audit events never recorded, by reason (full, expired, refused, shutdown).",
		}, []string{"reason"}),
	}
	q.depth = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mnv_gateway_audit_events_queued",
		Help: "Console audit events waiting for a retry.",
	}, func() float64 { return float64(len(q.pending)) })
	for _, c := range []prometheus.Collector{q.retried, q.dropped, q.depth} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, r := range []string{"full", "expired", "refused", "shutdown"} {
		q.dropped.WithLabelValues(r)
	}
	go q.run()
	return q, nil
}

// Record tries e once, bounded by the queue's First, and queues it for retry when accounts
// could not take it. It never blocks longer than that attempt.
func (q *AuditQueue) Record(ctx context.Context, e accountsclient.AuditEvent) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.cfg.First)
	err := q.aud.RecordAudit(ctx, e)
	cancel()
	switch {
	case err == nil:
		return
	case !retryable(err):
		q.drop("refused", e, err)
		return
	}
	select {
	case <-q.stop:
		q.drop("shutdown", e, err)
		return
	default:
	}
	select {
	case q.pending <- e:
		q.retried.Inc()
		q.log.Warn("console audit event queued for retry", zap.String("event_id", e.ID), zap.String("action", e.Action), zap.Error(err))
	default:
		q.drop("full", e, err)
	}
}

func (q *AuditQueue) drop(reason string, e accountsclient.AuditEvent, err error) {
	q.dropped.WithLabelValues(reason).Inc()
	q.log.Error("console audit event not recorded", zap.String("reason", reason), zap.String("event_id", e.ID),
		zap.String("client_id", e.ClientID), zap.String("action", e.Action), zap.Time("at", e.At), zap.Error(err))
}

// retryable reports whether another attempt may land: accounts or the way to it was down or
// slow. A refusal (an event accounts finds malformed) stays one.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted, codes.Internal, codes.Unknown, codes.Canceled:
		return true
	}
	return false
}

// run retries each queued event in turn until it lands, is refused or is too old. Once Close
// asks it to stop, it goes on for Drain at most, then counts what is left.
func (q *AuditQueue) run() {
	defer close(q.done)
	stopping := q.stop
	var deadline <-chan time.Time // nil (never) until stopping
	for {
		if deadline != nil && len(q.pending) == 0 {
			return
		}
		var e accountsclient.AuditEvent
		select {
		case e = <-q.pending:
		case <-stopping:
			stopping, deadline = nil, time.After(q.cfg.Drain)
			continue
		case <-deadline:
			q.discard()
			return
		}
		wait := q.cfg.MinBackoff
		for !q.attempt(e) {
			if time.Since(e.At) > q.cfg.MaxAge {
				q.drop("expired", e, errors.New("retried for longer than MNV_AUDIT_RETRY_FOR"))
				break
			}
			select {
			case <-time.After(wait):
			case <-stopping:
				stopping, deadline = nil, time.After(q.cfg.Drain)
			case <-deadline:
				q.drop("shutdown", e, errors.New("the gateway stopped before accounts took it"))
				q.discard()
				return
			}
			wait = min(2*wait, q.cfg.MaxBackoff)
		}
	}
}

// attempt sends e once; true when it is done with (landed, or refused and counted).
func (q *AuditQueue) attempt(e accountsclient.AuditEvent) bool {
	ctx, cancel := context.WithTimeout(context.Background(), q.cfg.MaxBackoff+q.cfg.First)
	defer cancel()
	err := q.aud.RecordAudit(ctx, e)
	switch {
	case err == nil:
		q.log.Info("console audit event recorded on retry", zap.String("event_id", e.ID), zap.Duration("late", time.Since(e.At)))
		return true
	case !retryable(err):
		q.drop("refused", e, err)
		return true
	}
	return false
}

// discard counts what is still queued when the gateway stops.
func (q *AuditQueue) discard() {
	for {
		select {
		case e := <-q.pending:
			q.drop("shutdown", e, errors.New("the gateway stopped before accounts took it"))
		default:
			return
		}
	}
}

// Close stops taking events and retries the queued ones for at most Drain.
func (q *AuditQueue) Close() error {
	q.once.Do(func() { close(q.stop) })
	<-q.done
	return nil
}
