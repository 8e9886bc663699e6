package process_test

import (
	"testing"

	"github.com/mnvhq/mnv/services/platform/process"
)

func TestNewRegistry(t *testing.T) {
	families, err := process.NewRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range families {
		have[f.GetName()] = true
	}
	tests := []struct {
		metric string
		from   string
	}{
		{"go_goroutines", "the Go collector"},
		{"go_memstats_alloc_bytes", "the Go collector"},
		{"process_open_fds", "the process collector"},
		{"process_cpu_seconds_total", "the process collector"},
	}
	for _, tt := range tests {
		if !have[tt.metric] {
			t.Errorf("%s (from %s) is not registered", tt.metric, tt.from)
		}
	}
}
