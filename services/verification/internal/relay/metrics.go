package relay

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Backlog reads how many settled verifications wait in the relay queue and how long the oldest
// has waited (store.Store.RelayBacklog).
type Backlog func(ctx context.Context) (n int64, oldest time.Duration, err error)

// RegisterMetrics registers mnv_relay_backlog and mnv_relay_oldest_seconds, read from backlog
// at each scrape: the queue is drained within a second or so, so the query reads a few rows
// unless Connect is away, which is when the figures matter.
func RegisterMetrics(reg prometheus.Registerer, backlog Backlog) error {
	return reg.Register(&backlogCollector{
		read: backlog,
		n: prometheus.NewDesc("mnv_relay_backlog",
			"Settled verifications whose event and number Connect has not been told yet (verification's relay queue).", nil, nil),
		oldest: prometheus.NewDesc("mnv_relay_oldest_seconds",
			"How long the oldest settled verification in the relay queue has waited for Connect; 0 when it is empty.", nil, nil),
	})
}

type backlogCollector struct {
	read      Backlog
	n, oldest *prometheus.Desc
}

func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.n
	ch <- c.oldest
}

// Collect reads the backlog; when the database does not answer in time, it reports the error
// to the scrape instead of a figure it does not have.
func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, oldest, err := c.read(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.n, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.n, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, oldest.Seconds())
}
