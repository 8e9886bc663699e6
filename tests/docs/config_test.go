// Package docs_test checks the documentation against the code, so that neither drifts.
package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/services/platform/findup"
)

var (
	// varLiteral is a variable name as the code reads it: a whole string literal.
	varLiteral = regexp.MustCompile(`"(MNV_[A-Z0-9_]+)"`)
	// secretCall is a secret read through config.Env.Secret, which also accepts NAME_FILE.
	secretCall = regexp.MustCompile(`\.Secret\("(MNV_[A-Z0-9_]+)"\)`)
	// varMention is a variable named anywhere in a document, a script or a manifest.
	varMention = regexp.MustCompile(`\bMNV_[A-Z0-9_]*[A-Z0-9]\b`)
	// tableRow is a row of the configuration table in docs/operations.md: its first cell.
	tableRow = regexp.MustCompile("(?m)^\\| (`[^|]+) \\|")
	inTicks  = regexp.MustCompile("`([A-Z0-9_]+)`")
)

func root(t *testing.T) string {
	t.Helper()
	p, err := findup.Path("go.work")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(p)
}

// walk calls fn with the path (relative to the checkout) and content of every file under dirs
// for which keep is true.
func walk(t *testing.T, base string, dirs []string, keep func(string) bool, fn func(string, string)) {
	t.Helper()
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(base, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(base, path)
			if d.IsDir() {
				if d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && rel != "." {
					return filepath.SkipDir
				}
				return nil
			}
			if !keep(rel) {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fn(rel, string(b))
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

func goSource(rel string) bool {
	return strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go")
}

// runtimeVars returns the variables the processes read, and those of them that are secrets.
func runtimeVars(t *testing.T, base string) (vars, secrets map[string][]string) {
	vars, secrets = map[string][]string{}, map[string][]string{}
	walk(t, base, []string{"services", "gateway", "cmd"}, goSource, func(rel, src string) {
		for _, m := range varLiteral.FindAllStringSubmatch(src, -1) {
			vars[m[1]] = append(vars[m[1]], rel)
		}
		for _, m := range secretCall.FindAllStringSubmatch(src, -1) {
			secrets[m[1]] = append(secrets[m[1]], rel)
		}
	})
	if len(vars) < 20 || len(secrets) < 4 {
		t.Fatalf("found only %d variables and %d secrets in the code: is the pattern still right?", len(vars), len(secrets))
	}
	return vars, secrets
}

// documented returns the variables of the configuration table of docs/operations.md.
func documented(t *testing.T, base string) map[string]bool {
	b, err := os.ReadFile(filepath.Join(base, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, row := range tableRow.FindAllStringSubmatch(string(b), -1) {
		for _, m := range inTicks.FindAllStringSubmatch(row[1], -1) {
			out[m[1]] = true
		}
	}
	return out
}

// TestConfigurationTable checks the table of docs/operations.md against the code, both ways.
func TestConfigurationTable(t *testing.T) {
	base := root(t)
	vars, _ := runtimeVars(t, base)
	doc := documented(t, base)
	for name, where := range vars {
		if !doc[name] {
			t.Errorf("%s is read by %s but missing from the table in docs/operations.md", name, strings.Join(slices.Compact(where), ", "))
		}
	}
	for name := range doc {
		if _, ok := vars[name]; !ok && strings.HasPrefix(name, "MNV_") {
			t.Errorf("docs/operations.md documents %s, which no process reads", name)
		}
	}
}

// TestEveryMentionIsReal checks that every MNV_ variable named in the documentation, the
// deployment manifests and scripts is one something reads: a process, the development
// scripts, or the test and benchmark tools. A renamed variable cannot survive in a manifest.
func TestEveryMentionIsReal(t *testing.T) {
	base := root(t)
	vars, secrets := runtimeVars(t, base)
	known := map[string]bool{}
	for name := range vars {
		known[name] = true
	}
	for name := range secrets {
		known[name+"_FILE"] = true
	}
	// The tools' own variables: scripts, the Makefile, the harness and the benchmark.
	tool := func(rel string) bool {
		return goSource(rel) || strings.HasSuffix(rel, ".sh") || filepath.Base(rel) == "Makefile"
	}
	walk(t, base, []string{"Makefile", "deploy/local", "tests/harness", "tests/bench", ".ci"}, tool, func(_, src string) {
		for _, m := range varMention.FindAllString(src, -1) {
			known[m] = true
		}
	})
	doc := func(rel string) bool {
		ext := filepath.Ext(rel)
		return ext == ".md" || ext == ".yaml" || ext == ".yml" || ext == ".json" || strings.HasSuffix(rel, "Dockerfile") || ext == ".env"
	}
	checked := 0
	walk(t, base, []string{"README.md", "docs", "deploy"}, doc, func(rel, src string) {
		checked++
		for _, m := range varMention.FindAllString(src, -1) {
			if !known[m] {
				t.Errorf("%s names %s, which nothing reads", rel, m)
			}
		}
	})
	if checked < 2 {
		t.Fatalf("checked %d documents: is the layout still right?", checked)
	}
}
