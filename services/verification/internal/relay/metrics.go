package relay

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics report the relay of the outbox to Connect. A nil *Metrics reports nothing.
type Metrics struct {
	lag      prometheus.Gauge
	pending  prometheus.Gauge
	relayed  prometheus.Counter
	failures prometheus.Counter
}

// NewMetrics creates the metrics and registers them on reg (none when reg is nil).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "mnv", Subsystem: "verification", Name: "outbox_lag_seconds",
			Help: "Age of the oldest verified number not yet relayed to Connect (0 when none), measured every few seconds by the relay.",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "mnv", Subsystem: "verification", Name: "outbox_pending",
			Help: "Verified numbers waiting to be relayed to Connect (counted up to 100000).",
		}),
		relayed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "mnv", Subsystem: "verification", Name: "outbox_relayed_total",
			Help: "Verified numbers relayed to Connect and acknowledged.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "mnv", Subsystem: "verification", Name: "outbox_relay_failures_total",
			Help: "Relay rounds that failed (Connect or the database unavailable); the rows are retried.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.lag, m.pending, m.relayed, m.failures} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *Metrics) relay(n int) {
	if m != nil {
		m.relayed.Add(float64(n))
	}
}

func (m *Metrics) failure() {
	if m != nil {
		m.failures.Inc()
	}
}

func (m *Metrics) backlog(lag time.Duration, pending int64) {
	if m != nil {
		m.lag.Set(lag.Seconds())
		m.pending.Set(float64(pending))
	}
}
