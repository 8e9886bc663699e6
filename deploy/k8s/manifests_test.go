package k8s_test

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

var envs = []string{"dev", "prod"}

var (
	renderedMu sync.Mutex
	rendered   = map[string]*manifests{}
)

// mustRender renders dir once per test binary (kustomize takes a good part of a second under
// the race detector).
func mustRender(t *testing.T, dir, env string) *manifests {
	t.Helper()
	renderedMu.Lock()
	defer renderedMu.Unlock()
	if m, ok := rendered[dir+"|"+env]; ok {
		return m
	}
	m, err := render(dir, env)
	if err != nil {
		t.Fatal(err)
	}
	rendered[dir+"|"+env] = m
	return m
}

// TestOverlays renders each environment whole and holds it to every check.
func TestOverlays(t *testing.T) {
	for _, env := range envs {
		m := mustRender(t, filepath.Join("overlays", env), env)
		t.Run(env+"/every component", func(t *testing.T) {
			for _, c := range components {
				if m.deployment(c.deployment) == nil {
					t.Errorf("no Deployment %s", c.deployment)
				}
			}
		})
		for _, c := range checks {
			t.Run(env+"/"+c.name, func(t *testing.T) {
				for _, p := range c.run(m) {
					t.Error(p)
				}
			})
		}
	}
}

// TestComponentOverlays renders each component of each environment alone (how one service is
// deployed by itself): it passes the checks, and is exactly that component's part of the
// whole environment.
func TestComponentOverlays(t *testing.T) {
	for _, env := range envs {
		whole := mustRender(t, filepath.Join("overlays", env), env)
		for _, c := range components {
			t.Run(env+"/"+c.name, func(t *testing.T) {
				m := mustRender(t, filepath.Join("overlays", env, c.name), env)
				m.peerServices = whole.services
				for name, problems := range runChecks(m) {
					for _, p := range problems {
						t.Errorf("%s: %s", name, p)
					}
				}
				if len(m.deployments) != 1 || m.deployments[0].Name != c.deployment {
					t.Errorf("want exactly the Deployment %s", c.deployment)
				}
				for _, k := range m.keys() {
					if got, ok := whole.yaml[k]; !ok {
						t.Errorf("%s: not in the whole %s environment", k, env)
					} else if got != m.yaml[k] {
						t.Errorf("%s differs from the whole %s environment's", k, env)
					}
				}
			})
		}
	}
}

// TestBases renders each base alone (kubectl apply -k base/<component> -n …) and holds it to
// the checks that do not depend on an environment.
func TestBases(t *testing.T) {
	var all []*corev1.Service
	for _, c := range components {
		all = append(all, mustRender(t, filepath.Join("base", c.name), "base").services...)
	}
	for _, c := range components {
		t.Run(c.name, func(t *testing.T) {
			m := mustRender(t, filepath.Join("base", c.name), "base")
			m.peerServices = all
			for name, problems := range runChecks(m) {
				for _, p := range problems {
					t.Errorf("%s: %s", name, p)
				}
			}
		})
	}
}

// TestFixturesFail proves that the checks bite: each fixture in testdata/ is one component of
// the prod overlay with one defect, and must fail exactly the checks named (or fail to decode
// strictly).
func TestFixturesFail(t *testing.T) {
	tests := []struct {
		dir string
		// want are the checks that must fail, and only they.
		want []string
		// decodeErr, when set, is a part of the error that strict decoding must give.
		decodeErr string
	}{
		{dir: "missing-probes", want: []string{"probes"}},
		{dir: "probe-undeclared-port", want: []string{"probes"}},
		{dir: "probe-wrong-endpoint", want: []string{"probes"}},
		{dir: "no-cpu-limit", want: []string{"resources"}},
		{dir: "gomemlimit-above-limit", want: []string{"resources"}},
		{dir: "literal-secret", want: []string{"secrets"}},
		{dir: "secret-in-configmap", want: []string{"secrets"}},
		{dir: "database-url-file", want: []string{"secrets"}},
		{dir: "secret-file-from-configmap", want: []string{"secrets"}},
		{dir: "secret-in-repo", want: []string{"secrets"}},
		{dir: "missing-secret", want: []string{"secrets"}},
		{dir: "tls-off-in-prod", want: []string{"credentials"}},
		{dir: "probe-on-tls-port", want: []string{"probes"}},
		{dir: "sandbox-in-prod", want: []string{"credentials"}},
		{dir: "reflection-in-prod", want: []string{"credentials"}},
		{dir: "shared-internal-token", want: []string{"credentials"}},
		{dir: "no-internal-callers", want: []string{"credentials"}},
		{dir: "latest-tag", want: []string{"images"}},
		{dir: "untagged-image", want: []string{"images"}},
		{dir: "root-user", want: []string{"security"}},
		{dir: "writable-root", want: []string{"security"}},
		{dir: "capabilities-kept", want: []string{"security"}},
		{dir: "service-links", want: []string{"security"}},
		{dir: "loopback-listen", want: []string{"addresses"}},
		{dir: "wrong-backend-address", want: []string{"addresses"}},
		{dir: "facade-wrong-port", want: []string{"addresses"}},
		{dir: "facade-issuer-loopback", want: []string{"addresses"}},
		{dir: "no-facade-port", want: []string{"services"}},
		{dir: "facade-ingress-closed", want: []string{"networkpolicy"}},
		{dir: "service-wrong-target", want: []string{"services"}},
		{dir: "service-virtual-ip", want: []string{"services"}},
		{dir: "headless-port-mismatch", want: []string{"services"}},
		{dir: "no-pdb", want: []string{"pdb"}},
		{dir: "blocking-pdb", want: []string{"pdb"}},
		{dir: "no-hpa", want: []string{"hpa"}},
		{dir: "replicas-with-hpa", want: []string{"hpa"}},
		{dir: "too-many-connections", want: []string{"hpa"}},
		{dir: "no-migration", want: []string{"migration"}},
		{dir: "migration-other-image", want: []string{"migration"}},
		{dir: "gateway-migration", want: []string{"migration"}},
		{dir: "migration-holds-secrets", want: []string{"secrets"}},
		{dir: "open-ingress", want: []string{"networkpolicy"}},
		{dir: "egress-anywhere", want: []string{"networkpolicy"}},
		{dir: "no-egress-policy", want: []string{"networkpolicy"}},
		{dir: "wrong-namespace", want: []string{"namespace"}},
		{dir: "unknown-field", decodeErr: `unknown field "spec.template.spec.containers[0].imagePullPolicyy"`},
		{dir: "wrong-type", decodeErr: "terminationGracePeriodSeconds"},
		{dir: "unknown-kind", decodeErr: `no kind "Deploymnet" is registered`},
	}
	whole := mustRender(t, filepath.Join("overlays", "prod"), "prod")
	seen := map[string]bool{}
	for _, tt := range tests {
		seen[tt.dir] = true
		t.Run(tt.dir, func(t *testing.T) {
			m, err := render(filepath.Join("testdata", tt.dir), "prod")
			if tt.decodeErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.decodeErr) {
					t.Fatalf("render: got error %v, want one containing %q", err, tt.decodeErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m.peerServices = whole.services
			failed := runChecks(m)
			var got []string
			for name := range failed {
				got = append(got, name)
			}
			sort.Strings(got)
			want := slices.Clone(tt.want)
			sort.Strings(want)
			if !slices.Equal(got, want) {
				t.Errorf("failing checks %v, want %v", got, want)
				for name, problems := range failed {
					for _, p := range problems {
						t.Logf("%s: %s", name, p)
					}
				}
			}
		})
	}
	// Every fixture is in the table.
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != "docker" && !seen[e.Name()] {
			t.Errorf("testdata/%s is in no test case", e.Name())
		}
	}
}

// TestSecretListMatchesCode keeps the test's list of secrets true: every variable the code
// reads with env.Secret is a secret that may come as a file, every database URL is a secret,
// and each component's required secrets are what its LoadConfig requires.
func TestSecretListMatchesCode(t *testing.T) {
	secretRead := regexp.MustCompile(`env\.Secret\("([A-Z0-9_]+)"\)`)
	stringRead := regexp.MustCompile(`env\.String\("([A-Z0-9_]*DATABASE_URL)"`)
	required := regexp.MustCompile(`env\.Require\("([A-Z0-9_]+)"`)
	// config.Env.DatabaseURL reads the service's own variable, else DATABASE_URL, which it
	// requires; both plainly (no _FILE form).
	databaseRead := regexp.MustCompile(`env\.DatabaseURL\(`)
	for _, c := range components {
		t.Run(c.name, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(repoRoot, c.app))
			if err != nil {
				t.Fatal(err)
			}
			if c.database {
				// A service reads the variables every service reads through the skeleton's
				// Config (its own names of them stay in its app).
				shared, err := os.ReadFile(filepath.Join(repoRoot, serviceConfig))
				if err != nil {
					t.Fatal(err)
				}
				src = append(src, shared...)
			}
			isSecret := map[string]bool{}
			for _, mm := range secretRead.FindAllStringSubmatch(string(src), -1) {
				isSecret[mm[1]] = true
				if fileOK, ok := secretVars[mm[1]]; !ok || !fileOK {
					t.Errorf("%s reads the secret %s (also as %s_FILE): add it to secretVars as true", c.app, mm[1], mm[1])
				}
			}
			for _, mm := range stringRead.FindAllStringSubmatch(string(src), -1) {
				isSecret[mm[1]] = true
				if fileOK, ok := secretVars[mm[1]]; !ok || fileOK {
					t.Errorf("%s reads the database URL %s with env.String: add it to secretVars as false", c.app, mm[1])
				}
			}
			var req []string
			if databaseRead.MatchString(string(src)) && c.dbVar != "" {
				for _, v := range []string{"DATABASE_URL", c.dbVar} {
					isSecret[v] = true
					if fileOK, ok := secretVars[v]; !ok || fileOK {
						t.Errorf("%s reads the database URL %s: add it to secretVars as false", c.app, v)
					}
				}
				req = append(req, "DATABASE_URL")
			}
			for _, mm := range required.FindAllStringSubmatch(string(src), -1) {
				if isSecret[mm[1]] {
					req = append(req, mm[1])
				}
			}
			got, want := slices.Clone(c.secrets), req
			sort.Strings(got)
			sort.Strings(want)
			if !slices.Equal(got, want) {
				t.Errorf("component %s lists the secrets %v, its LoadConfig requires %v", c.name, got, want)
			}
			if c.dbVar != "" && !strings.Contains(string(src), `"`+c.dbVar+`"`) {
				t.Errorf("%s does not read %s", c.app, c.dbVar)
			}
			for _, v := range append([]string{c.listenVar}, slices.Sorted(maps.Keys(c.listens))...) {
				if !strings.Contains(string(src), `"`+v+`"`) {
					t.Errorf("%s does not read %s", c.app, v)
				}
			}
		})
	}
}

// TestDockerfiles checks each component's Dockerfile, and that its main package resolves from
// exactly the files the builder stage copies.
func TestDockerfiles(t *testing.T) {
	for _, c := range components {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(repoRoot, "deploy", "docker", c.name+".Dockerfile")
			for _, p := range checkDockerfile(repoRoot, file, c) {
				t.Error(p)
			}
			if testing.Short() {
				return
			}
			problem, skip, err := resolveInCopy(repoRoot, file, t.TempDir(), c)
			switch {
			case err != nil:
				t.Fatal(err)
			case skip:
				t.Skip("the module cache lacks a dependency; run make build once")
			case problem != "":
				t.Error(problem)
			}
		})
	}
}

// TestDockerfileFixture proves the Dockerfile checks bite.
func TestDockerfileFixture(t *testing.T) {
	c := components[1] // accounts
	got := checkDockerfile(repoRoot, filepath.Join("testdata", "docker", "bad.Dockerfile"), c)
	for _, want := range []string{
		`FROM golang:latest: tag "latest" is not a pinned version`,
		"FROM gcr.io/distroless/static: untagged",
		"builds ./services/accounts/cmd/nothere, want ./services/accounts/cmd/accounts",
		"go build without CGO_ENABLED=0",
		"does not copy tests/go.mod",
		"USER root: use a numeric uid",
		"ENTRYPOINT /bin/accounts is not the binary copied from the builder",
	} {
		found := false
		for _, p := range got {
			if strings.Contains(p, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("no problem %q among %q", want, got)
		}
	}
	if p := checkDockerfile(repoRoot, filepath.Join("testdata", "docker", "bad.Dockerfile"), component{cmd: "services/accounts/cmd/nothere"}); !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, "no main package") }) {
		t.Errorf("a missing main package is not reported: %q", p)
	}
}
