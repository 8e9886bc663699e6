package pg

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// PoolCollector exports a pool's statistics, read from pgxpool at scrape time (no cost on the
// request path). An acquired/max ratio near 1, or empty acquires growing, means requests queue
// for a connection.
type PoolCollector struct {
	pool *pgxpool.Pool

	max, acquired, idle, total, constructing *prometheus.Desc
	acquires, emptyAcquires, canceled        *prometheus.Desc
	waitSeconds                              *prometheus.Desc
}

// NewPoolCollector returns a collector of pool's statistics, labelled pool=name (the schema it
// serves, so an alert names the service whatever the scrape configuration); register it on the
// service's registry.
func NewPoolCollector(name string, pool *pgxpool.Pool) *PoolCollector {
	labels := prometheus.Labels{"pool": name}
	d := func(metric, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("mnv", "db_pool", metric), help, nil, labels)
	}
	return &PoolCollector{
		pool:          pool,
		max:           d("max_connections", "Largest size of the connection pool."),
		acquired:      d("acquired_connections", "Connections currently in use."),
		idle:          d("idle_connections", "Connections open and idle."),
		total:         d("connections", "Connections open (acquired, idle and being opened)."),
		constructing:  d("constructing_connections", "Connections being opened."),
		acquires:      d("acquires_total", "Connections acquired from the pool."),
		emptyAcquires: d("empty_acquires_total", "Acquires that had to wait: no idle connection was available."),
		canceled:      d("canceled_acquires_total", "Acquires given up because their context ended."),
		waitSeconds:   d("empty_acquire_wait_seconds_total", "Time spent waiting for a connection by acquires that had to wait."),
	}
}

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.max, c.acquired, c.idle, c.total, c.constructing, c.acquires, c.emptyAcquires, c.canceled, c.waitSeconds} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	g := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	n := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	g(c.max, float64(s.MaxConns()))
	g(c.acquired, float64(s.AcquiredConns()))
	g(c.idle, float64(s.IdleConns()))
	g(c.total, float64(s.TotalConns()))
	g(c.constructing, float64(s.ConstructingConns()))
	n(c.acquires, float64(s.AcquireCount()))
	n(c.emptyAcquires, float64(s.EmptyAcquireCount()))
	n(c.canceled, float64(s.CanceledAcquireCount()))
	n(c.waitSeconds, s.EmptyAcquireWaitTime().Seconds())
}

// RegisterPool registers the collector of pool, named name, on reg; a nil reg registers nothing.
func RegisterPool(reg prometheus.Registerer, name string, pool *pgxpool.Pool) error {
	if reg == nil {
		return nil
	}
	return reg.Register(NewPoolCollector(name, pool))
}
