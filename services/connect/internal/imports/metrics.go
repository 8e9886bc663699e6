package imports

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mnvhq/mnv/services/connect/internal/domain"
)

// Row results, the values of the result label.
const (
	RowImported = "imported"
	RowUpdated  = "updated"
	RowFailed   = "failed"
)

// Metrics count imported rows and finished jobs. A nil *Metrics counts nothing.
type Metrics struct {
	imported, updated, failed prometheus.Counter
	jobs                      map[domain.ImportStatus]prometheus.Counter
}

// NewMetrics creates the metrics and registers them on reg (none when reg is nil). Every series
// exists from the start.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	rows := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "mnv", Subsystem: "connect", Name: "import_rows_total",
		Help: "Imported CSV records by result: imported (a new profile), updated (an existing profile), failed (invalid). Counted when their batch commits.",
	}, []string{"result"})
	jobs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "mnv", Subsystem: "connect", Name: "import_jobs_total",
		Help: "Import jobs by final status: COMPLETED or FAILED.",
	}, []string{"status"})
	m := &Metrics{
		imported: rows.WithLabelValues(RowImported), updated: rows.WithLabelValues(RowUpdated), failed: rows.WithLabelValues(RowFailed),
		jobs: map[domain.ImportStatus]prometheus.Counter{
			domain.ImportCompleted: jobs.WithLabelValues(string(domain.ImportCompleted)),
			domain.ImportFailed:    jobs.WithLabelValues(string(domain.ImportFailed)),
		},
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{rows, jobs} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *Metrics) rows(imported, updated, failed int64) {
	if m == nil {
		return
	}
	m.imported.Add(float64(imported))
	m.updated.Add(float64(updated))
	m.failed.Add(float64(failed))
}

func (m *Metrics) finished(status domain.ImportStatus) {
	if m == nil {
		return
	}
	if c, ok := m.jobs[status]; ok {
		c.Inc()
	}
}
