package gateway_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"gopkg.in/yaml.v3"

	"github.com/mnvhq/mnv/gateway/app"
	accounts "github.com/mnvhq/mnv/services/accounts/app"
	"github.com/mnvhq/mnv/services/accounts/app/apptest"
	connect "github.com/mnvhq/mnv/services/connect/app"
	connecttest "github.com/mnvhq/mnv/services/connect/app/apptest"
	"github.com/mnvhq/mnv/services/platform/auth/authtest"
	"github.com/mnvhq/mnv/services/platform/findup"
	"github.com/mnvhq/mnv/services/platform/pgtest"
	"github.com/mnvhq/mnv/services/platform/process"
	verification "github.com/mnvhq/mnv/services/verification/app"
	verificationtest "github.com/mnvhq/mnv/services/verification/app/apptest"
)

// describer is a Registerer that registers on a real registry (so conflicts still fail) and
// keeps the name of every metric a collector describes: a vector with no series yet counts too.
type describer struct {
	reg   *prometheus.Registry
	names map[string]bool
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d *describer) Register(c prometheus.Collector) error {
	if err := d.reg.Register(c); err != nil {
		return err
	}
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d.names[m[1]] = true
		}
	}
	return nil
}

func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

func (d *describer) Unregister(c prometheus.Collector) bool { return d.reg.Unregister(c) }

// registeredMetrics builds every app as its binary does, on real databases, and returns the
// names of every metric they register, with the runtime collectors every binary adds.
func registeredMetrics(t *testing.T) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	d := &describer{reg: prometheus.NewRegistry(), names: map[string]bool{}}
	d.MustRegister(process.RuntimeCollectors()...)
	log := zap.NewNop()
	// Each in its own registry, as in production: they register the same gRPC metrics.
	on := func() prometheus.Registerer { return &describer{reg: prometheus.NewRegistry(), names: d.names} }

	// stop runs a built app with an ended context: it stops at once and closes what it opened.
	stop := func(a interface {
		Listen() (net.Listener, error)
		Run(context.Context, net.Listener) error
	}, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		lis, err := a.Listen()
		if err != nil {
			t.Fatal(err)
		}
		ended, cancel := context.WithCancel(ctx)
		cancel()
		if err := a.Run(ended, lis); err != nil {
			t.Fatal(err)
		}
	}
	acfg := accounts.DefaultConfig()
	acfg.GRPCAddr, acfg.DatabaseURL = "127.0.0.1:0", pgtest.NewDatabase(t)
	acfg.Pepper, acfg.DataKeys, acfg.AdminToken, acfg.InternalCallers = apptest.Pepper, apptest.DataKeys, apptest.AdminToken, authtest.Callers()
	stop(accounts.New(ctx, acfg, log, on()))
	vcfg := verification.DefaultConfig()
	vcfg.GRPCAddr, vcfg.DatabaseURL = "127.0.0.1:0", pgtest.NewDatabase(t)
	vcfg.InternalToken, vcfg.DataKeys, vcfg.NumberHashKey = authtest.VerificationToken, verificationtest.DataKeys, verificationtest.NumberHashKey
	vcfg.InternalCallers = authtest.Callers()
	vcfg.ConnectAddr = "127.0.0.1:1" // the relay and its metrics exist where Connect is configured
	// The SMPP bind's metrics exist where an SMS centre is configured (its bind fails: none is there).
	vcfg.SMPP = verification.SMPPConfig{Addr: "127.0.0.1:1", SystemID: "mnv", Window: 10}
	stop(verification.New(ctx, vcfg, log, on()))
	ccfg := connect.DefaultConfig()
	ccfg.GRPCAddr, ccfg.DatabaseURL = "127.0.0.1:0", pgtest.NewDatabase(t)
	ccfg.InternalToken, ccfg.DataKeys, ccfg.NumberHashKey = authtest.ConnectToken, connecttest.DataKeys, connecttest.NumberHashKey
	ccfg.InternalCallers = authtest.Callers()
	stop(connect.New(ctx, ccfg, log, on()))
	gcfg := app.DefaultConfig()
	gcfg.InternalToken = authtest.GatewayToken
	reg := on()
	g, err := app.New(ctx, gcfg, log, reg, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	return d.names
}

// promql finds the metric names of a PromQL expression (Grafana's variables allowed) and checks
// that its brackets balance. It is not a parser: the Prometheus one would bring Prometheus into
// the workspace.
func promql(t *testing.T, where, expr string) []string {
	t.Helper()
	stack := []rune{}
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	inString := rune(0)
	for _, r := range expr {
		switch {
		case inString != 0:
			if r == inString {
				inString = 0
			}
		case r == '"' || r == '\'' || r == '`':
			inString = r
		case r == '(' || r == '[' || r == '{':
			stack = append(stack, r)
		case pairs[r] != 0:
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				t.Errorf("%s: unbalanced %q in %s", where, r, expr)
				return nil
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 || inString != 0 {
		t.Errorf("%s: unclosed bracket or string in %s", where, expr)
		return nil
	}
	s := regexp.MustCompile(`"(\\.|[^"\\])*"|'(\\.|[^'\\])*'|`+"`[^`]*`").ReplaceAllString(expr, `""`)
	s = regexp.MustCompile(`\$\{[^}]*\}|\$\w+`).ReplaceAllString(s, "")
	s = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`).ReplaceAllString(s, " ")
	s = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`).ReplaceAllString(s, " ")
	s = regexp.MustCompile(`\b\d[\d.]*(e[+-]?\d+)?(ms|s|m|h|d|w|y)*\b`).ReplaceAllString(s, " ") // numbers, durations
	keywords := map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
	var names []string
	for _, m := range regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`).FindAllString(s, -1) {
		if strings.HasSuffix(m, "(") || keywords[m] {
			continue // a function or an aggregation
		}
		names = append(names, m)
	}
	if len(names) == 0 {
		t.Errorf("%s: no metric in %s", where, expr)
	}
	return names
}

type rulesFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int     `json:"id"`
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

func readDeploy(t *testing.T, name string) []byte {
	t.Helper()
	path, err := findup.Path("deploy/observability/" + name)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestObservabilityFiles checks that the alert rules and the dashboard in deploy/observability
// use only metrics the code registers, that their PromQL is well formed, and that every alert
// tells an on-call what it means and what to do.
func TestObservabilityFiles(t *testing.T) {
	registered := registeredMetrics(t)
	// up is Prometheus's own; a histogram's series are its name plus a suffix.
	known := func(name string) bool {
		if name == "up" || registered[name] {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && registered[base] {
				return true
			}
		}
		return false
	}
	used := map[string]bool{}
	check := func(where, expr string) {
		for _, name := range promql(t, where, expr) {
			used[name] = true
			if !known(name) {
				t.Errorf("%s uses %s, which no mnv process registers", where, name)
			}
		}
	}

	t.Run("rules", func(t *testing.T) {
		var f rulesFile
		dec := yaml.NewDecoder(strings.NewReader(string(readDeploy(t, "prometheus-rules.yaml"))))
		dec.KnownFields(true)
		if err := dec.Decode(&f); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		alerts := 0
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				name := r.Alert + r.Record
				if name == "" || seen[name] {
					t.Errorf("group %s: rule %q is unnamed or named twice", g.Name, name)
				}
				seen[name] = true
				check("alert "+name, r.Expr)
				if r.Alert == "" {
					continue
				}
				alerts++
				if s := r.Labels["severity"]; s != "page" && s != "ticket" {
					t.Errorf("alert %s: severity %q, want page or ticket", name, s)
				}
				if len(r.Annotations["summary"]) < 10 || len(r.Annotations["description"]) < 80 {
					t.Errorf("alert %s: needs a summary and a description of what it means and what to do first", name)
				}
				if r.For == "" {
					t.Errorf("alert %s: no for:", name)
				}
			}
		}
		if alerts < 10 {
			t.Errorf("%d alerts, the file looks truncated", alerts)
		}
	})

	t.Run("dashboard", func(t *testing.T) {
		var d dashboard
		dec := json.NewDecoder(strings.NewReader(string(readDeploy(t, "grafana-dashboard.json"))))
		if err := dec.Decode(&d); err != nil {
			t.Fatal(err)
		}
		if d.Title == "" || d.UID == "" {
			t.Error("the dashboard needs a title and a uid")
		}
		for _, v := range d.Templating.List {
			if v.Definition != "" {
				metric := regexp.MustCompile(`label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)`).FindStringSubmatch(v.Definition)
				if metric == nil || !known(metric[1]) {
					t.Errorf("variable %s: %q does not read a registered metric", v.Name, v.Definition)
				}
			}
		}
		ids := map[int]bool{}
		var walk func([]panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				if ids[p.ID] {
					t.Errorf("panel id %d used twice", p.ID)
				}
				ids[p.ID] = true
				walk(p.Panels)
				if p.Type == "row" {
					continue
				}
				if len(p.Targets) == 0 {
					t.Errorf("panel %q has no query", p.Title)
				}
				for _, tg := range p.Targets {
					if tg.RefID == "" {
						t.Errorf("panel %q: a query without refId", p.Title)
					}
					check("panel "+p.Title, tg.Expr)
				}
			}
		}
		walk(d.Panels)
	})

	// The other direction, for the business metrics: each one is shown or alerted on (the pool
	// has more gauges than a dashboard needs).
	t.Run("every business metric is used", func(t *testing.T) {
		var unused []string
		for name := range registered {
			if strings.HasPrefix(name, "mnv_") && !strings.HasPrefix(name, "mnv_db_pool_") && !used[name] && !used[name+"_bucket"] && !used[name+"_count"] {
				unused = append(unused, name)
			}
		}
		sort.Strings(unused)
		for _, name := range unused {
			t.Errorf("%s is registered but neither on the dashboard nor in an alert", name)
		}
	})
}

// TestPromQLNames pins the name extraction the check above relies on.
func TestPromQLNames(t *testing.T) {
	tests := []struct {
		expr string
		want string
	}{
		{`up == 0`, "up"},
		{`sum by (le, route) (rate(a_bucket{route!~"x|y", code=~"5.."}[5m]))`, "a_bucket"},
		{`histogram_quantile(0.99, sum by (le) (rate(b_bucket{namespace=~"$namespace"}[$__rate_interval]))) > 1`, "b_bucket"},
		{`max by (pool) (c / d) > 0.9 and on (pool) e offset 5m`, "c d e"},
		{`absent(up{x="y"}) or absent(f{z="by (q)"})`, "up f"},
		{`sum(increase(g[10m])) > 5 unless bool h`, "g h"},
		{`i > 1e3 or j2 < 2.5`, "i j2"},
	}
	for _, tt := range tests {
		if got := strings.Join(promql(t, tt.expr, tt.expr), " "); got != tt.want {
			t.Errorf("promql(%q) = %q, want %q", tt.expr, got, tt.want)
		}
	}
}
