package browser_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mnvhq/mnv/tests/harness"
)

// consolePages walks the console's pages in the signed-in browser of p against make run: each
// one renders its heading with no error state once loaded, passes axe-core without a serious or
// critical violation, and is kept as a screenshot (keepScreenshot).
func (e *env) consolePages(t *testing.T, p *person) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	axeSrc, err := os.ReadFile(filepath.Join(root, "console/node_modules/axe-core/axe.min.js"))
	if err != nil {
		t.Fatalf("axe-core: %v (make console-check installs it)", err)
	}
	for _, page := range []string{"", "verifications", "workflows", "keys", "web-origins", "webhooks", "connect", "reveal", "sandbox-sms", "ledger", "team", "passkeys", "sessions", "audit-log", "settings"} {
		name := page
		if name == "" {
			name = "overview"
		}
		t.Run(name, func(t *testing.T) {
			var errors, loading int
			p.page.Goto(t, p.origin+"/console/"+page)
			p.page.WaitVisible(t, `main h1`)
			p.page.Poll(t, `document.querySelectorAll('.state-loading').length === 0`, nil, 15*time.Second)
			heading := p.page.Text(t, `main h1`)
			p.page.Eval(t, `document.querySelectorAll('.state-error').length`, &errors)
			p.page.Eval(t, `document.querySelectorAll('.state-loading').length`, &loading)
			if errors > 0 || strings.TrimSpace(heading) == "" {
				text, _ := p.page.TextErr(`main`)
				t.Fatalf("%s: heading %q, %d error states: %s", name, heading, errors, text)
			}
			var found []struct {
				ID, Impact, Help string
			}
			p.page.Eval(t, string(axeSrc), nil)
			p.page.Eval(t, `axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help})))`, &found)
			for _, v := range found {
				if v.Impact == "serious" || v.Impact == "critical" {
					t.Errorf("axe %s (%s): %s", v.ID, v.Impact, v.Help)
				}
			}
			keepScreenshot(t, p, name)
		})
	}
}

// keepScreenshot writes the whole page of p's browser as a PNG: to $MNV_SCREENSHOTS/<name>.png
// when it is set (make screenshots), else to out/console-suite-<name>.png.
func keepScreenshot(t *testing.T, p *person, name string) {
	t.Helper()
	png := p.page.Screenshot(t)
	dir, file := os.Getenv("MNV_SCREENSHOTS"), name+".png"
	if dir == "" {
		root, err := harness.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir, file = filepath.Join(root, "out"), fmt.Sprintf("console-suite-%s.png", name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
