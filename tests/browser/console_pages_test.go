package browser_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

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
	for _, page := range []string{"", "verifications", "keys", "web-origins", "webhooks", "connect", "reveal", "ledger", "team", "passkeys", "sessions", "audit-log", "settings"} {
		name := page
		if name == "" {
			name = "overview"
		}
		t.Run(name, func(t *testing.T) {
			var heading string
			var errors, loading int
			err := chromedp.Run(p.ctx,
				chromedp.Navigate(p.origin+"/console/"+page),
				chromedp.WaitVisible(`main h1`, chromedp.ByQuery),
				chromedp.Poll(`document.querySelectorAll('.state-loading').length === 0`, nil, chromedp.WithPollingTimeout(15*time.Second)),
				chromedp.Text(`main h1`, &heading, chromedp.ByQuery),
				chromedp.Evaluate(`document.querySelectorAll('.state-error').length`, &errors),
				chromedp.Evaluate(`document.querySelectorAll('.state-loading').length`, &loading),
			)
			if err != nil {
				t.Fatal(err)
			}
			if errors > 0 || strings.TrimSpace(heading) == "" {
				var text string
				_ = chromedp.Run(p.ctx, chromedp.Text(`main`, &text, chromedp.ByQuery))
				t.Fatalf("%s: heading %q, %d error states: %s", name, heading, errors, text)
			}
			var found []struct {
				ID, Impact, Help string
			}
			err = chromedp.Run(p.ctx,
				chromedp.Evaluate(string(axeSrc), nil),
				chromedp.Evaluate(`axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help})))`,
					&found, func(ep *runtime.EvaluateParams) *runtime.EvaluateParams { return ep.WithAwaitPromise(true) }))
			if err != nil {
				t.Fatal(err)
			}
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
	var png []byte
	if err := chromedp.Run(p.ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Fatal(err)
	}
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
