package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// prodOverlay is where each service's production CPU limit is set.
const prodOverlay = "deploy/k8s/overlays/prod"

// prodProcs is the GOMAXPROCS each service gets in production: Go derives it from the
// container's CPU limit (rounded up), which deploy/k8s/overlays/prod sets per service. The
// bench runs the services the same way; left at the machine's core count, every service of a
// shared two-core machine keeps an idle P spinning for work it hands between its own threads,
// which cost a verify 15% more CPU there (issue 15).
func prodProcs(root string, services []string) (map[string]int, error) {
	procs := map[string]int{}
	for _, svc := range services {
		path := filepath.Join(root, prodOverlay, svc, "kustomization.yaml")
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("the CPU limit of %s: %w", svc, err)
		}
		limit, err := containerCPULimit(b, svc)
		if err != nil {
			return nil, fmt.Errorf("the CPU limit of %s in %s: %w", svc, path, err)
		}
		procs[svc] = max(1, int(math.Ceil(limit)))
	}
	return procs, nil
}

// containerCPULimit reads the CPU limit, in cores, of the container named name from a
// kustomization's inline patches.
func containerCPULimit(kustomization []byte, name string) (float64, error) {
	var k struct {
		Patches []struct {
			Patch string `yaml:"patch"`
		} `yaml:"patches"`
	}
	if err := yaml.Unmarshal(kustomization, &k); err != nil {
		return 0, err
	}
	for _, p := range k.Patches {
		var d struct {
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Name      string `yaml:"name"`
							Resources struct {
								Limits struct {
									CPU string `yaml:"cpu"`
								} `yaml:"limits"`
							} `yaml:"resources"`
						} `yaml:"containers"`
					} `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		}
		if err := yaml.Unmarshal([]byte(p.Patch), &d); err != nil {
			return 0, err
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == name && c.Resources.Limits.CPU != "" {
				return cores(c.Resources.Limits.CPU)
			}
		}
	}
	return 0, fmt.Errorf("no container %q with a CPU limit", name)
}

// cores reads a Kubernetes CPU quantity: cores ("1", "1.5") or millicores ("500m").
func cores(q string) (float64, error) {
	milli := strings.HasSuffix(q, "m")
	n, err := strconv.ParseFloat(strings.TrimSuffix(q, "m"), 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("CPU quantity %q: not a positive number of cores or millicores", q)
	}
	if milli {
		n /= 1000
	}
	return n, nil
}

// procsLine is procs for the report, in the order of the services the bench profiles.
func procsLine(procs map[string]int) string {
	parts := make([]string, 0, len(procs))
	for _, svc := range profiled {
		if n, ok := procs[svc]; ok {
			parts = append(parts, fmt.Sprintf("%s=%d", svc, n))
		}
	}
	return strings.Join(parts, " ")
}
