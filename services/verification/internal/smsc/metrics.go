package smsc

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mnvhq/mnv/services/platform/smpp"
)

// Metrics count what each SMSC bind does, labelled by the bind's name (Config.Name). A nil
// *Metrics counts nothing.
type Metrics struct {
	bound        *prometheus.GaugeVec
	binds        *prometheus.CounterVec
	bindFailures *prometheus.CounterVec
	disconnects  *prometheus.CounterVec
	submits      *prometheus.CounterVec
	throttles    *prometheus.CounterVec
	receipts     *prometheus.CounterVec
	deferred     *prometheus.CounterVec
}

// Why a receipt was answered with the temporary error (ESME_RX_T_APPN), so the SMSC sends it
// again later: the queue to the database was full, or recording it failed.
const (
	deferredQueueFull   = "queue_full"
	deferredNotRecorded = "not_recorded"
)

// NewMetrics creates the metrics and registers them on reg (none when reg is nil).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mnv", Subsystem: "smpp", Name: name, Help: help}, append([]string{"smsc"}, labels...))
	}
	m := &Metrics{
		bound: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "mnv", Subsystem: "smpp", Name: "bound",
			Help: "1 while the bind to the SMSC is up, 0 while it is lost or not yet made."}, []string{"smsc"}),
		binds:        counter("binds_total", "Successful binds to the SMSC, the first and each rebind."),
		bindFailures: counter("bind_failures_total", "Binds that failed (refused credentials, no connection); retried with backoff."),
		disconnects:  counter("disconnects_total", "Bound sessions lost (unbind by the SMSC, dropped connection, no answer to enquire_link)."),
		submits:      counter("submits_total", "submit_sm parts by outcome: submitted (the SMSC took it) or rejected (refused for good).", "outcome"),
		throttles:    counter("throttles_total", "Parts the SMSC refused for now (ESME_RTHROTTLED, ESME_RMSGQFUL), sent again after a pause."),
		receipts:     counter("receipts_total", "Delivery receipts by state (DELIVERED, UNDELIVERABLE, EXPIRED, …; unreadable for those that could not be read).", "state"),
		deferred: counter("receipts_deferred_total", "Receipts answered with a temporary error, which the SMSC sends again later, by reason: "+
			"queue_full (the queue to the database was full) or not_recorded (recording it failed, the database away).", "reason"),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.bound, m.binds, m.bindFailures, m.disconnects, m.submits, m.throttles, m.receipts, m.deferred} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// observer counts a bind's events; the series exist from the start, so a rate over them is
// never empty.
func (m *Metrics) observer(name string) smpp.Observer {
	if m == nil {
		return nil
	}
	m.bound.WithLabelValues(name).Set(0)
	for _, c := range []*prometheus.CounterVec{m.binds, m.bindFailures, m.disconnects, m.throttles} {
		c.WithLabelValues(name)
	}
	m.deferred.WithLabelValues(name, deferredQueueFull)
	m.deferred.WithLabelValues(name, deferredNotRecorded)
	m.submits.WithLabelValues(name, "submitted")
	m.submits.WithLabelValues(name, "rejected")
	return smpp.ObserverFunc(func(e smpp.Event) {
		switch e.Kind {
		case smpp.EventBound:
			m.binds.WithLabelValues(name).Inc()
			m.bound.WithLabelValues(name).Set(1)
		case smpp.EventBindFailed:
			m.bindFailures.WithLabelValues(name).Inc()
		case smpp.EventDisconnected:
			m.disconnects.WithLabelValues(name).Inc()
			m.bound.WithLabelValues(name).Set(0)
		case smpp.EventSubmitted:
			m.submits.WithLabelValues(name, "submitted").Inc()
		case smpp.EventRejected:
			m.submits.WithLabelValues(name, "rejected").Inc()
		case smpp.EventThrottled:
			m.throttles.WithLabelValues(name).Inc()
		case smpp.EventReceiptUnreadable:
			m.receipts.WithLabelValues(name, "unreadable").Inc()
		}
	})
}

func (m *Metrics) bindFailed(name string) {
	if m != nil {
		m.bindFailures.WithLabelValues(name).Inc()
	}
}

func (m *Metrics) receipt(name string, s smpp.MessageState) {
	if m != nil {
		m.receipts.WithLabelValues(name, s.String()).Inc()
	}
}

func (m *Metrics) receiptDeferred(name, reason string) {
	if m != nil {
		m.deferred.WithLabelValues(name, reason).Inc()
	}
}
