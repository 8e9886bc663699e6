package verify

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mnvhq/mnv/services/verification/internal/domain"
)

// finalStatuses are the statuses a verification ends in: its outcome, or REJECTED when the
// charge was refused.
var finalStatuses = []domain.Status{domain.StatusVerified, domain.StatusNotVerified, domain.StatusUndetermined, domain.StatusExpired, domain.StatusRejected}

// Metrics count decided verifications. A nil *Metrics counts nothing.
type Metrics struct {
	settled  map[domain.Status]prometheus.Counter
	deferred prometheus.Counter
	batches  map[string]prometheus.Observer
}

// batchKinds are the group-committed writes of a verification.
var batchKinds = []string{"record", "settle"}

// NewMetrics creates the metrics and registers them on reg (none when reg is nil). Every series
// exists from the start.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	settled := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "mnv", Subsystem: "verification", Name: "verifications_total",
		Help: "Verifications by final status: VERIFIED, NOT_VERIFIED, UNDETERMINED, EXPIRED, or REJECTED (the charge was refused). Counted once, when settled.",
	}, []string{"status"})
	m := &Metrics{
		settled: map[domain.Status]prometheus.Counter{},
		deferred: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "mnv", Subsystem: "verification", Name: "charges_deferred_total",
			Help: "Verifications left PENDING because accounts did not answer the debit; the reconciler settles them.",
		}),
	}
	for _, s := range finalStatuses {
		m.settled[s] = settled.WithLabelValues(string(s))
	}
	batches := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "mnv", Subsystem: "verification", Name: "write_batch_size",
		Help:    "Verifications written together by one group-committed statement (record) or transaction (settle).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 10),
	}, []string{"kind"})
	m.batches = map[string]prometheus.Observer{}
	for _, k := range batchKinds {
		m.batches[k] = batches.WithLabelValues(k)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{settled, m.deferred, batches} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *Metrics) settle(status domain.Status) {
	if m == nil {
		return
	}
	if c, ok := m.settled[status]; ok {
		c.Inc()
	}
}

func (m *Metrics) deferCharge() {
	if m != nil {
		m.deferred.Inc()
	}
}

func (m *Metrics) batch(kind string, n int) {
	if m != nil {
		m.batches[kind].Observe(float64(n))
	}
}
