// Package metricstest reads Prometheus registries in tests.
package metricstest

import (
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Gather reads every series of g as `name{label=value,…}` (labels sorted, `name{}` without
// any) → value. A counter or gauge gives its value, a histogram or summary its sample count.
func Gather(t testing.TB, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := make([]string, 0, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			out[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetCounter().GetValue() + m.GetGauge().GetValue() +
				float64(m.GetHistogram().GetSampleCount()) + float64(m.GetSummary().GetSampleCount()) + m.GetUntyped().GetValue()
		}
	}
	return out
}

// Sum adds the values of the series of metric name whose labels include every label of match
// ("name=value" each).
func Sum(series map[string]float64, name string, match ...string) float64 {
	var total float64
	for k, v := range series {
		if !strings.HasPrefix(k, name+"{") {
			continue
		}
		labels := "," + strings.TrimSuffix(strings.TrimPrefix(k, name+"{"), "}") + ","
		ok := true
		for _, m := range match {
			if !strings.Contains(labels, ","+m+",") {
				ok = false
				break
			}
		}
		if ok {
			total += v
		}
	}
	return total
}
