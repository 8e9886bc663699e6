package browser_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// focused describes the focused element: where it is in the document (index, in document
// order, so that a walk can check it only moves forward), what it says, and whether it shows a
// focus ring a person can see (:focus-visible matches and the computed outline is drawn).
type focused struct {
	Index    int    `json:"index"`
	Tag      string `json:"tag"`
	Type     string `json:"type"`
	Text     string `json:"text"`
	Href     string `json:"href"`
	Class    string `json:"class"`
	ID       string `json:"id"`
	InMain   bool   `json:"inMain"`
	InNav    bool   `json:"inNav"`
	InDialog bool   `json:"inDialog"`
	Ring     bool   `json:"ring"`
	Outline  string `json:"outline"`
}

func (f *focused) String() string {
	if f == nil {
		return "nothing"
	}
	return fmt.Sprintf("<%s #%d %q href=%q class=%q outline %q>", f.Tag, f.Index, f.Text, f.Href, f.Class, f.Outline)
}

// focusedJS is the focused element as focused, null when the focus is on the body or left
// the document. A ring is an outline of at least 2px that is not transparent, or a box-shadow.
const focusedJS = `(() => {
  const el = document.activeElement;
  if (!el || el === document.body || el === document.documentElement) return null;
  const cs = getComputedStyle(el);
  const outline = cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) >= 2 && cs.outlineColor !== 'rgba(0, 0, 0, 0)';
  const rect = el.getBoundingClientRect();
  return {
    index: [...document.querySelectorAll('*')].indexOf(el), tag: el.tagName.toLowerCase(), type: el.type || '',
    text: (el.getAttribute('aria-label') || el.innerText || el.value || '').trim().replace(/\s+/g, ' ').slice(0, 80),
    href: el.getAttribute('href') || '', class: String(el.className || ''), id: el.id || '',
    inMain: !!el.closest('main'), inNav: !!el.closest('nav'), inDialog: !!el.closest('dialog[open]'),
    ring: el.matches(':focus-visible') && (outline || (cs.boxShadow && cs.boxShadow !== 'none')) && rect.width > 1 && rect.height > 1,
    outline: cs.outlineStyle + ' ' + cs.outlineWidth + ' ' + cs.outlineColor,
  };
})()`

// tabbableJS lists, in document order, the controls of root (a selector) that Tab stops at
// (their document index and what they say): enabled, rendered, not taken out by tabindex=-1, one radio
// button per group (the checked one, else the first).
const tabbableJS = `((root) => {
  const all = [...document.querySelectorAll('*')];
  const els = [...document.querySelector(root).querySelectorAll('a[href], button, input, select, textarea, summary, [tabindex]')];
  const groups = new Set();
  return els.filter((el) => {
    if (el.disabled || el.closest('fieldset:disabled') || el.closest('[inert]')) return false;
    if (el.getAttribute('tabindex') === '-1' || (el.tagName === 'INPUT' && el.type === 'hidden')) return false;
    if (el.getClientRects().length === 0 || getComputedStyle(el).visibility === 'hidden') return false;
    if (el.type === 'radio') {
      if (groups.has(el.name)) return false;
      const group = [...document.querySelectorAll('input[type=radio]')].filter((r) => r.name === el.name);
      if ((group.find((r) => r.checked) || group[0]) !== el) return false;
      groups.add(el.name);
    }
    return true;
  }).map((el) => ({index: all.indexOf(el), tag: el.tagName.toLowerCase(),
    text: (el.getAttribute('aria-label') || el.innerText || el.value || el.name || '').trim().replace(/\s+/g, ' ').slice(0, 80)}));
})`

// stop is a control tabbableJS lists.
type stop struct {
	Index     int
	Tag, Text string
}

// segmented are the inputs Chromium gives a Tab stop per field (a date's day, month and year).
var segmented = map[string]bool{"date": true, "datetime-local": true, "month": true, "time": true, "week": true}

// keyboardWalk: the console from the keyboard alone, signed in against the suite. From the
// skip link, Tab reaches the header, every nav link and then the page, in document order, each
// with a visible focus ring; the skip link's Enter moves to the content; a nav link's Enter
// opens its page with the focus on its heading, and Tab then reaches the page's controls in
// order; Space and Enter open a confirm dialog, which takes the focus, keeps Tab inside, and
// on Escape closes and gives the focus back to the button that opened it.
func (e *env) keyboardWalk(t *testing.T, p *person) {
	tab := p.page
	at := func() *focused {
		t.Helper()
		var f *focused
		tab.Eval(t, focusedJS, &f)
		return f
	}
	press := func(key string) *focused {
		t.Helper()
		tab.Press(t, key)
		return at()
	}
	loaded := func() {
		t.Helper()
		tab.WaitVisible(t, `main h1`)
		tab.Poll(t, `document.querySelectorAll('.state-loading').length === 0`, nil, 15*time.Second)
	}
	var navLinks []string
	open := func(path string) {
		t.Helper()
		tab.Goto(t, p.origin+path)
		loaded()
	}
	open("/console/settings")
	tab.Eval(t, `[...document.querySelectorAll('nav a[href]')].map(a => a.getAttribute('href'))`, &navLinks)
	if len(navLinks) < 10 {
		t.Fatalf("the nav links %v", navLinks)
	}

	t.Run("from the skip link, Tab reaches the header, every nav link and the page in order", func(t *testing.T) {
		f := press("Tab")
		if f == nil || !strings.Contains(f.Class, "skip-link") || !f.Ring {
			t.Fatalf("the first Tab focuses %v, want the skip link with a focus ring", f)
		}
		var walk []*focused
		for i := 0; i < len(navLinks)+15; i++ {
			f = press("Tab")
			if f == nil {
				t.Fatalf("Tab %d left the document after %v", i+1, walk)
			}
			walk = append(walk, f)
			if f.InMain {
				break
			}
		}
		last := walk[len(walk)-1]
		if !last.InMain {
			t.Fatalf("Tab did not reach the page's content: %v", walk)
		}
		var reached []string
		prev := -1
		for _, f := range walk {
			if f.Index <= prev {
				t.Errorf("Tab went back in the document to %v", f)
			}
			prev = f.Index
			if !f.Ring {
				t.Errorf("no visible focus ring on %v", f)
			}
			if f.InNav {
				reached = append(reached, f.Href)
			}
		}
		if strings.Join(reached, " ") != strings.Join(navLinks, " ") {
			t.Errorf("Tab reached the nav links %v, want %v in order", reached, navLinks)
		}
		if walk[0].InNav || walk[0].InMain {
			t.Errorf("after the skip link Tab went to %v, want the header first", walk[0])
		}
	})

	t.Run("the skip link's Enter moves to the content", func(t *testing.T) {
		open("/console/")
		if f := press("Tab"); f == nil || !strings.Contains(f.Class, "skip-link") {
			t.Fatalf("the first Tab focuses %v", f)
		}
		f := press("Enter")
		if f == nil || (f.ID != "main" && !f.InMain) {
			t.Fatalf("after the skip link's Enter the focus is on %v, want the content", f)
		}
		if f = press("Tab"); f == nil || !f.InMain || !f.Ring {
			t.Errorf("Tab after the skip link's Enter focuses %v, want a control of the page with a ring", f)
		}
	})

	t.Run("a nav link's Enter opens its page; Tab reaches the page's controls in order", func(t *testing.T) {
		// Not on the first nav link's page: each Enter opens another page than the one shown.
		open("/console/settings")
		// Back from the page's heading to each nav link: Shift+Tab walks the nav backwards.
		tab.Eval(t, `document.querySelector('main h1').focus()`, nil)
		for _, href := range navLinks {
			var f *focused
			for i := 0; i < len(navLinks)+5; i++ {
				if f = press("Shift+Tab"); f != nil && f.Href == href {
					break
				}
				if f != nil && !f.InNav && !f.InMain {
					// Past the nav into the header: the nav link lies forward.
					for j := 0; j < len(navLinks)+5; j++ {
						if f = press("Tab"); f != nil && f.Href == href {
							break
						}
					}
					break
				}
			}
			if f == nil || f.Href != href || !f.Ring {
				t.Fatalf("the keyboard cannot reach the nav link %s with a ring (at %v)", href, f)
			}
			tab.Press(t, "Enter")
			tab.Poll(t, fmt.Sprintf(`location.pathname === %q || location.pathname === %q`, href, strings.TrimSuffix(href, "/")), nil, 10*time.Second)
			loaded()
			f = at()
			var heading string
			tab.Eval(t, `document.querySelector('main h1').textContent`, &heading)
			if f == nil || f.Tag != "h1" || !f.InMain {
				t.Errorf("%s: after Enter the focus is on %v, want the page's heading", href, f)
				continue
			}
			var want []stop
			tab.Eval(t, tabbableJS+`('main')`, &want)
			if len(want) == 0 {
				// A page of tables alone (the ledger, the audit log with one page of rows).
				t.Logf("%s (%s): no control in the page", href, heading)
			}
			if len(want) > 8 {
				want = want[:8]
			}
			for i, w := range want {
				f = press("Tab")
				for f != nil && i > 0 && segmented[f.Type] && f.Index == want[i-1].Index {
					f = press("Tab") // the next field of the same date
				}
				if f == nil || f.Index != w.Index {
					t.Errorf("%s: Tab %d focuses %v, want the page's control %+v (in order: %+v)", href, i+1, f, w, want)
					break
				}
				if !f.Ring {
					t.Errorf("%s: no visible focus ring on %v", href, f)
				}
			}
			// Back to the heading for the next nav link.
			tab.Eval(t, `document.querySelector('main h1').focus()`, nil)
		}
	})

	// dialog opens a confirm dialog with key on the button of page whose text starts with
	// label, reached with Tab from the heading; it checks that the dialog takes the focus,
	// keeps Tab (and Shift+Tab) inside, and gives the focus back on Escape.
	dialog := func(t *testing.T, page, label, key string) {
		t.Helper()
		open(page)
		tab.Eval(t, `document.querySelector('main h1').focus()`, nil)
		var opener *focused
		for i := 0; i < 40; i++ {
			if f := press("Tab"); f != nil && f.Tag == "button" && strings.HasPrefix(f.Text, label) {
				opener = f
				break
			}
		}
		if opener == nil || !opener.Ring {
			t.Fatalf("%s: Tab does not reach a %q button with a ring (%v)", page, label, opener)
		}
		tab.Press(t, key)
		if err := tab.WaitVisibleErr(`dialog[open]`); err != nil {
			t.Fatalf("%s: %s on %v opened no dialog: %v", page, key, opener, err)
		}
		f := at()
		if f == nil || !f.InDialog {
			t.Fatalf("%s: the dialog did not take the focus (on %v)", page, f)
		}
		var n int
		tab.Eval(t, `document.querySelector('dialog[open]').querySelectorAll('button:not([disabled]), input:not([disabled]), select, textarea, a[href]').length`, &n)
		for _, k := range []string{"Tab", "Shift+Tab"} {
			for i := 0; i < 2*n+2; i++ {
				if f = press(k); f == nil || !f.InDialog {
					t.Fatalf("%s: %s %d left the dialog for %v", page, k, i+1, f)
				}
				if !f.Ring {
					t.Errorf("%s: no visible focus ring on %v in the dialog", page, f)
				}
			}
		}
		f = press("Escape")
		var stillOpen bool
		tab.Eval(t, `!!document.querySelector('dialog[open]')`, &stillOpen)
		if stillOpen {
			t.Fatalf("%s: Escape did not close the dialog", page)
		}
		if f == nil || f.Index != opener.Index {
			t.Errorf("%s: after Escape the focus is on %v, want its opener %v", page, f, opener)
		}
	}
	t.Run("Space opens a confirm dialog, which keeps the focus and gives it back on Escape", func(t *testing.T) {
		dialog(t, "/console/sessions", "Sign out everywhere", " ")
	})
	t.Run("Enter opens a confirm dialog, which keeps the focus and gives it back on Escape", func(t *testing.T) {
		dialog(t, "/console/keys", "Revoke", "Enter")
	})
}
