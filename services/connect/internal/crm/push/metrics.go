package push

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
)

// Metrics count delivery attempts and delivered records. A nil *Metrics counts nothing.
type Metrics struct {
	attempts  map[domain.SyncStatus]prometheus.Counter
	delivered prometheus.Counter
	duration  prometheus.Histogram
}

// NewMetrics creates the metrics and registers them on reg (none when reg is nil). Every series
// exists from the start.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	attempts := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "mnv", Subsystem: "connect", Name: "deliveries_total",
		Help: "Delivery attempts to integrations by outcome: SUCCEEDED, RETRYING (will be tried again), FAILED (given up).",
	}, []string{"status"})
	m := &Metrics{
		attempts: map[domain.SyncStatus]prometheus.Counter{},
		delivered: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "mnv", Subsystem: "connect", Name: "delivered_records_total",
			Help: "Profiles delivered to integrations by successful attempts.",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "mnv", Subsystem: "connect", Name: "delivery_duration_seconds",
			Help:    "Time of one delivery attempt, from reading the profiles to the receiver's answer.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
	}
	for _, s := range []domain.SyncStatus{domain.SyncSucceeded, domain.SyncRetrying, domain.SyncFailed} {
		m.attempts[s] = attempts.WithLabelValues(string(s))
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{attempts, m.delivered, m.duration} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// attempt counts one recorded attempt.
func (m *Metrics) attempt(ev domain.SyncEvent) {
	if m == nil {
		return
	}
	if c, ok := m.attempts[ev.Status]; ok {
		c.Inc()
	}
	if ev.Status == domain.SyncSucceeded {
		m.delivered.Add(float64(ev.RecordCount))
	}
	m.duration.Observe(ev.Duration.Seconds())
}
