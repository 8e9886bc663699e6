package main

import (
	"fmt"
	"testing"

	"github.com/mnvhq/mnv/tests/harness"
)

func TestContainerCPULimit(t *testing.T) {
	const k = `
patches:
  - target: {kind: Deployment, name: mnv-x}
    patch: |-
      spec:
        template:
          spec:
            initContainers:
              - name: migrate
                resources: {limits: {cpu: "4"}}
            containers:
              - name: x
                resources:
                  requests: {cpu: 250m}
                  limits: {cpu: %s}
`
	tests := []struct {
		name, limit string
		want        float64
		ok          bool
	}{
		{"cores", `"2"`, 2, true},
		{"fraction", `"1.5"`, 1.5, true},
		{"millicores", `500m`, 0.5, true},
		{"none", `""`, 0, false},
		{"zero", `"0"`, 0, false},
		{"garbage", `two`, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := containerCPULimit([]byte(fmt.Sprintf(k, tt.limit)), "x")
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("containerCPULimit = %v, %v; want %v, ok=%v", got, err, tt.want, tt.ok)
			}
		})
	}
	if _, err := containerCPULimit([]byte(fmt.Sprintf(k, `"1"`)), "migrate"); err == nil {
		t.Fatal("an init container's limit was read as the service's")
	}
}

// TestProdProcs reads the real overlays: every service the bench starts has a CPU limit there.
func TestProdProcs(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	procs, err := prodProcs(root, profiled)
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range profiled {
		if procs[svc] < 1 {
			t.Errorf("%s: GOMAXPROCS %d", svc, procs[svc])
		}
	}
}
