package delivery

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of one attempt, the values of mnv_webhook_attempts_total's outcome label.
const (
	outcomeSucceeded = "succeeded"
	outcomeRetrying  = "retrying"  // failed; tried again after a backoff
	outcomeFailed    = "failed"    // failed its last attempt, or refused before sending
	outcomeCancelled = "cancelled" // the endpoint was disabled
)

// Metrics of event delivery. A nil *Metrics counts nothing.
type Metrics struct {
	attempts *prometheus.CounterVec
	disables prometheus.Counter
	lags     prometheus.Histogram
}

// NewMetrics creates the metrics and registers them on reg (none when reg is nil). Every series
// exists from the start, so an alert's rate() has a zero to start from.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mnv_webhook_attempts_total",
			Help: "Attempts to deliver events to webhook endpoints, by outcome: succeeded, retrying, failed (given up), cancelled (endpoint disabled).",
		}, []string{"outcome"}),
		disables: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mnv_webhook_endpoints_disabled_total",
			Help: "Webhook endpoints disabled for failing longer than MNV_WEBHOOK_DISABLE_AFTER.",
		}),
		lags: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mnv_webhook_delivery_lag_seconds",
			Help:    "Time from an event's creation to its successful delivery to an endpoint (retries and redeliveries included).",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600},
		}),
	}
	for _, o := range []string{outcomeSucceeded, outcomeRetrying, outcomeFailed, outcomeCancelled} {
		m.attempts.WithLabelValues(o)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.attempts, m.disables, m.lags} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *Metrics) attempt(outcome string) {
	if m != nil {
		m.attempts.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) disabled() {
	if m != nil {
		m.disables.Inc()
	}
}

func (m *Metrics) lag(d time.Duration) {
	if m != nil {
		m.lags.Observe(max(d, 0).Seconds())
	}
}
