package pumping_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mnvhq/mnv/services/platform/config"
	"github.com/mnvhq/mnv/services/platform/metricstest"
	"github.com/mnvhq/mnv/services/platform/ratelimit"
	"github.com/mnvhq/mnv/services/verification/internal/pumping"
)

// memBlocks, memSpend and memCounters are the ports in memory, for the rules' table.
type memBlocks struct {
	mu     sync.Mutex
	rows   map[string]pumping.Block
	writes int
}

func (m *memBlocks) PrefixBlocked(_ context.Context, prefixes []string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range prefixes {
		if _, ok := m.rows[p]; ok {
			return true, nil
		}
	}
	return false, nil
}

func (m *memBlocks) BlockPrefix(_ context.Context, b pumping.Block) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes++
	if _, ok := m.rows[b.Prefix]; ok {
		return false, nil
	}
	m.rows[b.Prefix] = b
	return true, nil
}

type memSpend map[string]int64

func (m memSpend) SpentToday(_ context.Context, client string) (int64, error) { return m[client], nil }

type memCounters struct {
	mu               sync.Mutex
	starts, verified map[string]int64
}

func (m *memCounters) AddStart(_ context.Context, p string) (int64, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.starts[p]++
	return m.starts[p], m.verified[p], nil
}

func (m *memCounters) AddVerified(_ context.Context, p string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.verified[p]++
	return nil
}

func newMem() (*memBlocks, *memCounters) {
	return &memBlocks{rows: map[string]pumping.Block{}}, &memCounters{starts: map[string]int64{}, verified: map[string]int64{}}
}

func testConfig() pumping.Config {
	c := pumping.DefaultConfig()
	c.PrefixLimit = pumping.Limit{Rate: 0.001, Burst: 5}
	c.NumberLimit = pumping.Limit{Rate: 0.001, Burst: 2}
	c.DailyCap = 100
	return c
}

func memGuard(t *testing.T, cfg pumping.Config, blocks *memBlocks, counters *memCounters, spend memSpend) (*pumping.Guard, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	g, err := pumping.New(cfg, pumping.Ports{
		Blocks: blocks, Spend: spend, Counters: counters,
		PrefixLimiter: ratelimit.NewLocal(ratelimit.Limit(cfg.PrefixLimit)), NumberLimiter: ratelimit.NewLocal(ratelimit.Limit(cfg.NumberLimit)),
	}, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	return g, reg
}

var (
	gb      = pumping.Client{ID: "c-gb", Countries: []string{"GB", "US"}}
	none    = pumping.Client{ID: "c-none"}
	sandbox = pumping.Client{ID: "c-sandbox", Sandbox: true}
)

func TestRules(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		client  pumping.Client
		number  string
		country string
		want    pumping.Reason // "" allowed
	}{
		{"a mobile in an allowed country", gb, "+447400123456", "GB", ""},
		{"the country is optional", gb, "+447400123457", "", ""},
		{"fixed line or mobile passes where the plan cannot tell", gb, "+12015550123", "US", ""},
		{"not E.164", gb, "447400123456", "", pumping.InvalidNumber},
		{"not a valid number", gb, "+447700900123", "", pumping.InvalidNumber},
		{"a fixed line", pumping.Client{ID: "c-ie", Countries: []string{"IE"}}, "+35312345678", "", pumping.NotMobile},
		{"VoIP", sandbox, "+8823451234567", "", pumping.NotMobile},
		{"the caller's country is not the number's", gb, "+447400123458", "FR", pumping.CountryMismatch},
		{"a country off the list", gb, "+33612345678", "FR", pumping.CountryNotAllowed},
		{"an empty list allows nothing", none, "+447400123459", "GB", pumping.CountryNotAllowed},
		{"the sandbox needs no list", sandbox, "+33612345679", "FR", ""},
		{"a premium prefix, mobile by the plan", sandbox, "+881612345678", "", pumping.PremiumPrefix},
		{"a prefix blocked (a shorter one)", pumping.Client{ID: "c-ee", Countries: []string{"EE"}}, "+37255123456", "", pumping.PrefixBlocked},
		{"the daily cap reached", pumping.Client{ID: "c-spent", Countries: []string{"GB"}}, "+447400123460", "", pumping.SpendCap},
		{"the client's own cap", pumping.Client{ID: "c-low", Countries: []string{"GB"}, DailyCap: 10}, "+447400123461", "", pumping.SpendCap},
		{"the client's own cap above the default", pumping.Client{ID: "c-spent", Countries: []string{"GB"}, DailyCap: 1000}, "+447400123462", "", ""},
	}
	blocks, counters := newMem()
	blocks.rows["+3725"] = pumping.Block{Prefix: "+3725", Reason: "operator"}
	g, reg := memGuard(t, testConfig(), blocks, counters, memSpend{"c-spent": 100, "c-low": 10})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := g.Allow(ctx, tt.client, tt.number, tt.country)
			if got := pumping.ReasonOf(err); got != tt.want || (tt.want == "" && err != nil) {
				t.Fatalf("Allow = %v, want %q", err, tt.want)
			}
		})
	}
	m := metricstest.Gather(t, reg)
	if n := metricstest.Sum(m, "mnv_pumping_refused_total", "reason=COUNTRY_NOT_ALLOWED"); n != 2 {
		t.Errorf("refused COUNTRY_NOT_ALLOWED counted %v times, want 2", n)
	}
}

func TestVelocityInMemory(t *testing.T) {
	ctx := context.Background()
	blocks, counters := newMem()
	g, _ := memGuard(t, testConfig(), blocks, counters, memSpend{})
	// Per client and number: a burst of 2.
	for i, want := range []pumping.Reason{"", "", pumping.NumberVelocity} {
		err := g.Allow(ctx, gb, "+447400123456", "GB")
		if pumping.ReasonOf(err) != want {
			t.Fatalf("send %d: %v, want %q", i, err, want)
		}
		var r *pumping.Refusal
		if want != "" && (!errors.As(err, &r) || r.RetryAfter <= 0) {
			t.Fatalf("a velocity refusal without RetryAfter: %v", err)
		}
	}
	// Another client's budget for the same number is its own.
	if err := g.Allow(ctx, pumping.Client{ID: "other", Countries: []string{"GB"}}, "+447400123456", ""); err != nil {
		t.Fatal(err)
	}
	// Per prefix, all clients together: a burst of 5, three spent above.
	for i, want := range []pumping.Reason{"", "", pumping.PrefixVelocity} {
		if err := g.Allow(ctx, pumping.Client{ID: "third", Countries: []string{"GB"}}, "+44740012350"+string(rune('0'+i)), ""); pumping.ReasonOf(err) != want {
			t.Fatalf("prefix send %d: %v, want %q", i, err, want)
		}
	}
}

// A prefix whose conversion collapses at volume is blocked once; one that converts is not.
func TestAutomaticBlock(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig()
	cfg.PrefixLimit, cfg.NumberLimit = pumping.Limit{}, pumping.Limit{} // off: the block is what is tested
	cfg.BlockMinStarts, cfg.BlockMinConversion = 50, 0.2
	blocks, counters := newMem()
	g, reg := memGuard(t, cfg, blocks, counters, memSpend{})
	// +4474001…: every third code checked: converts.
	for i := range 60 {
		n := "+4474001" + pad(i)
		if err := g.Allow(ctx, gb, n, ""); err != nil {
			t.Fatalf("converting prefix, send %d: %v", i, err)
		}
		if i%3 == 0 {
			g.Verified(ctx, n)
		}
	}
	// +4474002…: nothing checked: blocked at the 50th start, refused from then on.
	var refused int
	for i := range 60 {
		err := g.Allow(ctx, gb, "+4474002"+pad(i), "")
		switch pumping.ReasonOf(err) {
		case pumping.PrefixBlocked:
			refused++
		case "":
		default:
			t.Fatal(err)
		}
	}
	if refused != 11 {
		t.Errorf("%d sends refused after the block, want 11 (the 50th start on)", refused)
	}
	if len(blocks.rows) != 1 || blocks.rows["+4474002"].Starts != 50 {
		t.Fatalf("blocks = %+v", blocks.rows)
	}
	if blocks.writes != 1 {
		t.Errorf("the block was written %d times", blocks.writes)
	}
	if n := metricstest.Sum(metricstest.Gather(t, reg), "mnv_pumping_prefixes_blocked_total"); n != 1 {
		t.Errorf("prefixes_blocked_total = %v", n)
	}
}

func pad(i int) string { return fmt.Sprintf("%05d", i) }

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(c *pumping.Config)
	}{
		{"deny prefix without +", func(c *pumping.Config) { c.DenyPrefixes = append(c.DenyPrefixes, "881") }},
		{"deny prefix with a letter", func(c *pumping.Config) { c.DenyPrefixes = []string{"+88a"} }},
		{"prefix digits", func(c *pumping.Config) { c.PrefixDigits = 1 }},
		{"conversion above 1", func(c *pumping.Config) { c.BlockMinConversion = 1.5 }},
		{"negative cap", func(c *pumping.Config) { c.DailyCap = -1 }},
	} {
		c := pumping.DefaultConfig()
		tt.edit(&c)
		if c.Validate() == nil {
			t.Errorf("%s: accepted", tt.name)
		}
	}
	if err := pumping.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pumping.DefaultConfig().DenyPrefixes, "+881") {
		t.Error("the defaults lack +881")
	}
}

func TestLoadConfig(t *testing.T) {
	c := pumping.LoadConfig(config.FromMap(map[string]string{
		"MNV_PUMPING_DENY_PREFIXES":        "+881, +4470",
		"MNV_PUMPING_NUMBER_PER_HOUR":      "12",
		"MNV_PUMPING_DAILY_CAP":            "0",
		"MNV_PUMPING_ADDRESS_BURST":        "20",
		"MNV_PUMPING_BLOCK_MIN_CONVERSION": "0.1",
	}))
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.DenyPrefixes, []string{"+881", "+4470"}) || c.NumberLimit.Rate != 12.0/3600 || c.DailyCap != 0 ||
		c.BlockMinConversion != 0.1 || c.PrefixDigits != 7 || c.AddressLimit.Burst != 20 {
		t.Fatalf("config = %+v", c)
	}
	if c := pumping.LoadConfig(config.FromMap(map[string]string{"MNV_PUMPING_DENY_PREFIXES": "none"})); len(c.DenyPrefixes) != 0 {
		t.Fatalf("none gave %v", c.DenyPrefixes)
	}
	if c := pumping.LoadConfig(config.FromMap(map[string]string{"MNV_PUMPING_DENY_PREFIXES": "881"})); c.Validate() == nil {
		t.Fatal("a prefix without + was accepted")
	}
}

type clientsByID map[string]pumping.Client

func (m clientsByID) PumpingClient(_ context.Context, id string) (pumping.Client, error) {
	c, ok := m[id]
	if !ok {
		return pumping.Client{}, errors.New("no such client")
	}
	return c, nil
}

// ByID reads the client's rules by its id, as the workflow asks.
func TestByID(t *testing.T) {
	blocks, counters := newMem()
	g, _ := memGuard(t, testConfig(), blocks, counters, memSpend{})
	by := pumping.ByID{Guard: g, Clients: clientsByID{"gb": {Countries: []string{"GB"}}, "none": {}}}
	ctx := context.Background()
	if err := by.Allow(ctx, "gb", "+447400123456", "GB"); err != nil {
		t.Fatal(err)
	}
	if err := by.Allow(ctx, "none", "+447400123457", "GB"); pumping.ReasonOf(err) != pumping.CountryNotAllowed {
		t.Fatalf("no list: %v", err)
	}
	if err := by.Allow(ctx, "unknown", "+447400123458", "GB"); err == nil || pumping.ReasonOf(err) != "" {
		t.Fatalf("unknown client: %v", err)
	}
}

// Check takes the caller's word that a client is a sandbox one (its allow-list is not asked),
// never the other way round, and names the refusal's rule by Code.
func TestByIDCheck(t *testing.T) {
	blocks, counters := newMem()
	g, _ := memGuard(t, testConfig(), blocks, counters, memSpend{})
	by := pumping.ByID{Guard: g, Clients: clientsByID{"none": {}, "sandbox": {Sandbox: true}}}
	ctx := context.Background()
	cases := []struct {
		name string
		r    pumping.Request
		want pumping.Reason
	}{
		{"no list", pumping.Request{ClientID: "none", Number: "+447400123401"}, pumping.CountryNotAllowed},
		{"sandbox by the caller", pumping.Request{ClientID: "none", Number: "+447400123402", Sandbox: true}, ""},
		{"sandbox by the clients", pumping.Request{ClientID: "sandbox", Number: "+447400123403"}, ""},
		{"sandbox, premium", pumping.Request{ClientID: "none", Number: "+881612345678", Sandbox: true}, pumping.PremiumPrefix},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := by.Check(ctx, tc.r)
			if pumping.ReasonOf(err) != tc.want || (tc.want == "") != (err == nil) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			var coded interface{ Code() string }
			if err != nil && (!errors.As(err, &coded) || coded.Code() != string(tc.want)) {
				t.Fatalf("%v has no Code %q", err, tc.want)
			}
		})
	}
}

// LocalCounters count starts and conversions per prefix in the current window only.
func TestLocalCounters(t *testing.T) {
	ctx := context.Background()
	c := pumping.NewLocalCounters(time.Minute)
	for range 3 {
		if _, _, err := c.AddStart(ctx, "+4474001"); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.AddVerified(ctx, "+4474001"); err != nil {
		t.Fatal(err)
	}
	if s, v, _ := c.AddStart(ctx, "+4474001"); s != 4 || v != 1 {
		t.Fatalf("starts %d verified %d, want 4 1", s, v)
	}
	if s, v, _ := c.AddStart(ctx, "+4474002"); s != 1 || v != 0 {
		t.Fatalf("another prefix: %d %d", s, v)
	}
}

type downCounters struct{}

func (downCounters) AddStart(context.Context, string) (int64, int64, error) {
	return 0, 0, errors.New("redis: connection refused")
}
func (downCounters) AddVerified(context.Context, string) error {
	return errors.New("redis: connection refused")
}

// Counters that fail judge no prefix, but stop no send: the other rules hold. The outage is
// logged once.
func TestCountersDown(t *testing.T) {
	cfg := testConfig()
	blocks, _ := newMem()
	core, logs := observer.New(zapcore.WarnLevel)
	g, err := pumping.New(cfg, pumping.Ports{
		Blocks: blocks, Spend: memSpend{}, Counters: downCounters{},
		PrefixLimiter: ratelimit.NewLocal(ratelimit.Limit(cfg.PrefixLimit)), NumberLimiter: ratelimit.NewLocal(ratelimit.Limit(cfg.NumberLimit)),
	}, zap.New(core), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, want := range []pumping.Reason{"", "", pumping.NumberVelocity} {
		if err := g.Allow(ctx, gb, "+447400123456", ""); pumping.ReasonOf(err) != want || (want == "" && err != nil) {
			t.Fatalf("send %d: %v, want %q", i, err, want)
		}
	}
	if err := g.Allow(ctx, sandbox, "+881612345678", ""); pumping.ReasonOf(err) != pumping.PremiumPrefix {
		t.Fatalf("premium: %v", err)
	}
	g.Verified(ctx, "+447400123456") // fails as quietly
	if n := logs.Len(); n != 1 {
		t.Fatalf("%d warn lines, want 1", n)
	}
}

// Per client and end-user address: an IPv6 address counts by its /64.
func TestAddressVelocity(t *testing.T) {
	cfg := testConfig()
	cfg.AddressLimit = pumping.Limit{Rate: 0.001, Burst: 2}
	blocks, counters := newMem()
	g, err := pumping.New(cfg, pumping.Ports{
		Blocks: blocks, Spend: memSpend{}, Counters: counters,
		PrefixLimiter: ratelimit.NewLocal(ratelimit.Limit(cfg.PrefixLimit)), NumberLimiter: ratelimit.NewLocal(ratelimit.Limit(cfg.NumberLimit)),
		AddressLimiter: ratelimit.NewLocal(ratelimit.Limit(cfg.AddressLimit)),
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, tt := range []struct {
		client pumping.Client
		number string
		addr   string
		want   pumping.Reason
	}{
		{gb, "+447400200001", "2001:db8:1:2::1", ""},
		{gb, "+447500200002", "2001:db8:1:2::ffff", ""},
		{gb, "+447900200003", "2001:db8:1:2:abcd::9", pumping.AddressVelocity}, // the same /64
		{gb, "+447900200004", "2001:db8:1:3::1", ""},                           // another /64
		{pumping.Client{ID: "other", Countries: []string{"GB"}}, "+447900200005", "2001:db8:1:2::1", ""},
		{gb, "+447800200006", "", ""}, // no address: the rule does not apply
		{gb, "+447800200007", "192.0.2.7", ""},
		{gb, "+447800200008", "::ffff:192.0.2.7", ""},
		{gb, "+447500200009", "192.0.2.7", pumping.AddressVelocity},
	} {
		var a netip.Addr
		if tt.addr != "" {
			a = netip.MustParseAddr(tt.addr)
		}
		if err := g.AllowFrom(ctx, tt.client, tt.number, "", a); pumping.ReasonOf(err) != tt.want || (tt.want == "" && err != nil) {
			t.Fatalf("start %d from %s: %v, want %q", i, tt.addr, err, tt.want)
		}
	}
}

// TestSpentTodayOfTheCaller: a client's SpentToday (the caller's transaction, under its lock)
// replaces the Spend port, and is read only when a cap applies: a client without a cap never
// takes the lock behind it.
func TestSpentTodayOfTheCaller(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		defaultCap int64
		clientCap  int64
		spent      int64
		want       pumping.Reason
		wantReads  int
	}{
		{"under the default cap", 100, 0, 99, "", 1},
		{"at the default cap", 100, 0, 100, pumping.SpendCap, 1},
		{"at the client's cap", 0, 5, 5, pumping.SpendCap, 1},
		{"no cap: never read", 0, 0, 1_000_000, "", 0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.DailyCap = tt.defaultCap
			blocks, counters := newMem()
			// The port says nothing was spent: only the caller's reading may refuse.
			g, _ := memGuard(t, cfg, blocks, counters, memSpend{})
			reads := 0
			c := pumping.Client{ID: "c-tx", Countries: []string{"GB"}, DailyCap: tt.clientCap,
				SpentToday: func(context.Context) (int64, error) { reads++; return tt.spent, nil }}
			err := g.Allow(ctx, c, fmt.Sprintf("+4474001234%02d", 70+i), "GB")
			if got := pumping.ReasonOf(err); got != tt.want || (tt.want == "" && err != nil) {
				t.Fatalf("Allow = %v, want %q", err, tt.want)
			}
			if reads != tt.wantReads {
				t.Fatalf("the caller's spend was read %d times, want %d", reads, tt.wantReads)
			}
		})
	}
}
