// Package deps_test checks what the modules and binaries may depend on, with the go command's
// own view of the build (go list), so that a new import cannot quietly undo a boundary.
package deps_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/tests/harness"
)

// serviceModules are the modules the gateway must not need: it reaches the services over gRPC
// through proto/gen and their small client modules (accounts' accountsclient), so it builds
// (GOWORK=off, a per-service image) without them. A client module nested in a service's
// directory is a module of its own, told apart by the module each package belongs to.
var serviceModules = []string{
	"github.com/mnvhq/mnv/services/accounts",
	"github.com/mnvhq/mnv/services/verification",
	"github.com/mnvhq/mnv/services/connect",
}

// testkit is the folder of stand-ins for outside systems, for tests and make run only.
const testkit = "github.com/mnvhq/mnv/services/platform/testkit/"

// goCmd runs the go command in dir of the checkout, outside the workspace: what a module's own
// go.mod allows, as its image build sees it.
func goCmd(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join(root, dir)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, stderr)
	}
	return out
}

// TestForbiddenDependencies lists the packages a build links (go list -deps) and fails on any
// under a forbidden path.
func TestForbiddenDependencies(t *testing.T) {
	tests := []struct {
		name string
		dir  string
		args []string
		// forbidden are import path prefixes; forbiddenModules, modules no package may be of.
		forbidden, forbiddenModules []string
	}{
		{
			// The gateway holds no database; a driver in its binary is size, CVEs and init
			// work for nothing, and a sign that storage code leaked into shared packages.
			name: "the gateway binary links no database driver", dir: "gateway", args: []string{"./cmd/gateway"},
			forbidden: []string{"github.com/jackc/", "github.com/exaring/otelpgx"},
		},
		{
			name: "the gateway module, tests included, needs no service module", dir: "gateway", args: []string{"-test", "./..."},
			forbiddenModules: serviceModules,
		},
		// platform/testkit holds stand-ins for outside systems (a sandbox CAMARA operator): the
		// tests and make run's all-in-one cmd/mnv start them, and a deployed binary must never
		// carry one, since a fake operator answers whatever its caller asks.
		{name: "the accounts binary links no test kit", dir: "services/accounts", args: []string{"./cmd/accounts"}, forbidden: []string{testkit}},
		{name: "the verification binary links no test kit", dir: "services/verification", args: []string{"./cmd/verification"}, forbidden: []string{testkit}},
		{name: "the connect binary links no test kit", dir: "services/connect", args: []string{"./cmd/connect"}, forbidden: []string{testkit}},
		{name: "the gateway binary links no test kit", dir: "gateway", args: []string{"./cmd/gateway"}, forbidden: []string{testkit}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := goCmd(t, tt.dir, append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}"}, tt.args...)...)
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) < 10 {
				t.Fatalf("go list -deps %s lists %d packages: not a real build", strings.Join(tt.args, " "), len(lines))
			}
			for _, l := range lines {
				p, module, _ := strings.Cut(l, " ")
				for _, f := range tt.forbidden {
					if strings.HasPrefix(p, f) {
						t.Errorf("%s depends on %s", tt.dir, p)
					}
				}
				if slices.Contains(tt.forbiddenModules, module) {
					t.Errorf("%s depends on %s, of module %s", tt.dir, p, module)
				}
			}
		})
	}
}

// TestGatewayModuleRequiresNoService reads gateway/go.mod: a requirement of a service module
// makes every build of the gateway resolve it, even with no package importing it.
func TestGatewayModuleRequiresNoService(t *testing.T) {
	var mod struct {
		Require []struct{ Path string }
		Replace []struct{ Old struct{ Path string } }
	}
	if err := json.Unmarshal(goCmd(t, "gateway", "mod", "edit", "-json"), &mod); err != nil {
		t.Fatal(err)
	}
	if len(mod.Require) == 0 {
		t.Fatal("gateway/go.mod requires nothing: not the file meant")
	}
	var named []string
	for _, r := range mod.Require {
		named = append(named, r.Path)
	}
	for _, r := range mod.Replace {
		named = append(named, r.Old.Path)
	}
	for _, p := range named {
		for _, s := range serviceModules {
			if p == s {
				t.Errorf("gateway/go.mod names %s", p)
			}
		}
	}
}
