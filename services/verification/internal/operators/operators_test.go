package operators_test

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/services/platform/principal"
	"github.com/mnvhq/mnv/services/verification/internal/operators"
)

// twoOperators is the example of the brief: the sandbox operator and one real operator.
const twoOperators = `
operators:
  - id: sandbox
    name: mnv sandbox
    country: ZZ
    mccMnc: ["001-01"]
    methods: [HEADER_ENRICHMENT]
    sandbox: true
    headerEnrichment:
      trustedRanges: ["127.0.0.0/8", "::1/128"]
      numberHeader: X-Mnv-Sandbox-Msisdn
  - id: ae-etisalat
    name: Etisalat UAE
    country: AE
    mccMnc: ["424-02"]
    methods: [HEADER_ENRICHMENT]
    headerEnrichment:
      trustedRanges: ["198.51.100.0/24"]
      numberHeader: x-msisdn
`

// camaraBlock is a valid camara block, in flow style.
const camaraBlock = `{discoveryUrl: "https://op.example/.well-known/openid-configuration", apiRoot: "https://api.op.example", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: secret.txt}`

func mustParse(t *testing.T, s string) *operators.Registry {
	t.Helper()
	r, err := operators.Parse([]byte(s))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return r
}

func TestDefault(t *testing.T) {
	r := operators.Default()
	ops := r.List()
	if len(ops) != 1 {
		t.Fatalf("Default has %d operators, want 1", len(ops))
	}
	want := operators.Operator{
		ID:            "sandbox",
		Name:          "mnv sandbox",
		Country:       "ZZ",
		MCCMNC:        []string{"001-01"},
		Methods:       []operators.Method{operators.MethodHeaderEnrichment},
		Sandbox:       true,
		TrustedRanges: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
		NumberHeader:  "X-Mnv-Sandbox-Msisdn",
	}
	if !reflect.DeepEqual(ops[0], want) {
		t.Errorf("Default operator\n got %+v\nwant %+v", ops[0], want)
	}
	got, ok := r.Get("sandbox")
	if !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("Get(sandbox) = %+v, %v", got, ok)
	}
	for _, a := range []string{"127.0.0.1", "127.255.0.9", "::1", "::ffff:127.0.0.1"} {
		if !got.Trusts(netip.MustParseAddr(a)) {
			t.Errorf("sandbox does not trust %s", a)
		}
	}
	if h := r.NumberHeaders(); !slices.Equal(h, []string{"X-Mnv-Sandbox-Msisdn"}) {
		t.Errorf("NumberHeaders = %v", h)
	}
	if operators.Default() != r {
		t.Error("Default built twice")
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "operators.yaml")
	if err := os.WriteFile(path, []byte(twoOperators), 0o600); err != nil {
		t.Fatal(err)
	}
	realOnly := filepath.Join(dir, "real.yaml")
	if err := os.WriteFile(realOnly, []byte(twoOperators[:strings.Index(twoOperators, "  - id: sandbox")]+twoOperators[strings.Index(twoOperators, "  - id: ae-etisalat"):]), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("operators: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		sandbox bool
		wantIDs []string
		wantErr string // part of the error; "" for none
	}{
		{"built-in, sandbox on: the sandbox operator", "", true, []string{"sandbox"}, ""},
		// A sandbox that trusts loopback must not exist unless switched on: behind a same-host
		// proxy or a mesh sidecar every request comes from loopback.
		{"built-in, sandbox off: no operator", "", false, nil, ""},
		{"file, sandbox on", path, true, []string{"sandbox", "ae-etisalat"}, ""},
		{"file with a sandbox operator, sandbox off: refused", path, false, nil, `operators[0] (id "sandbox"): a sandbox operator, and the sandbox is switched off`},
		{"file without a sandbox operator, sandbox off", realOnly, false, []string{"ae-etisalat"}, ""},
		{"missing file", filepath.Join(dir, "missing.yaml"), true, nil, "missing.yaml"},
		{"invalid file, named", bad, true, nil, bad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := operators.Load(tt.path, tt.sandbox)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(r.List()); !slices.Equal(got, tt.wantIDs) {
				t.Errorf("ids = %v, want %v", got, tt.wantIDs)
			}
			sandboxHeader := slices.Contains(r.NumberHeaders(), "X-Mnv-Sandbox-Msisdn")
			if sandboxHeader != slices.Contains(tt.wantIDs, "sandbox") {
				t.Errorf("NumberHeaders = %v", r.NumberHeaders())
			}
			if op, ok := r.ByAddr(netip.MustParseAddr("127.0.0.1")); ok != slices.Contains(tt.wantIDs, "sandbox") {
				t.Errorf("ByAddr(127.0.0.1) = %v, %v", op.ID, ok)
			}
		})
	}
	if _, err := operators.Load(path, false); !errors.Is(err, operators.ErrSandboxOff) {
		t.Errorf("the refusal is not ErrSandboxOff: %v", err)
	}
	if r, _ := operators.Load("", true); r != operators.Default() {
		t.Error(`Load("", true) is not Default()`)
	}
}

func ids(ops []operators.Operator) []string {
	var out []string
	for _, op := range ops {
		out = append(out, op.ID)
	}
	return out
}

// operator renders one operator entry, indented for a list under "operators:". Fields
// overrides or adds keys; a value of "-" removes the key.
func operator(fields map[string]string) string {
	base := [][2]string{
		{"id", "op"},
		{"name", "Op"},
		{"country", "AE"},
		{"mccMnc", `["424-02"]`},
		{"methods", "[HEADER_ENRICHMENT]"},
		{"headerEnrichment", `{trustedRanges: ["198.51.100.0/24"], numberHeader: X-MSISDN}`},
	}
	var b strings.Builder
	seen := map[string]bool{}
	first := true
	write := func(k, v string) {
		if v == "-" {
			return
		}
		if first {
			b.WriteString("  - ")
			first = false
		} else {
			b.WriteString("    ")
		}
		b.WriteString(k + ": " + v + "\n")
	}
	for _, kv := range base {
		seen[kv[0]] = true
		if v, ok := fields[kv[0]]; ok {
			write(kv[0], v)
		} else {
			write(kv[0], kv[1])
		}
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if !seen[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		write(k, fields[k])
	}
	return b.String()
}

func TestParseValid(t *testing.T) {
	tests := []struct {
		name  string
		entry map[string]string
		check func(t *testing.T, op operators.Operator)
	}{
		{"minimal header enrichment", nil, func(t *testing.T, op operators.Operator) {
			if op.NumberHeader != "X-Msisdn" || op.Sandbox || !op.Supports(operators.MethodHeaderEnrichment) || op.Supports(operators.MethodNetworkAPI) {
				t.Errorf("got %+v", op)
			}
		}},
		{"network API only", map[string]string{"methods": "[NETWORK_API]", "headerEnrichment": "-", "camara": camaraBlock}, func(t *testing.T, op operators.Operator) {
			if op.NumberHeader != "" || op.TrustedRanges != nil || !op.Supports(operators.MethodNetworkAPI) {
				t.Errorf("got %+v", op)
			}
		}},
		{"both methods", map[string]string{"methods": "[NETWORK_API, HEADER_ENRICHMENT]", "camara": camaraBlock}, func(t *testing.T, op operators.Operator) {
			if !op.Supports(operators.MethodNetworkAPI) || !op.Supports(operators.MethodHeaderEnrichment) {
				t.Errorf("got %+v", op)
			}
		}},
		{"no mccMnc", map[string]string{"mccMnc": "-"}, func(t *testing.T, op operators.Operator) {
			if len(op.MCCMNC) != 0 {
				t.Errorf("got %+v", op)
			}
		}},
		{"three-digit MNC, ZZ country", map[string]string{"mccMnc": `["310-260", "001-01"]`, "country": "ZZ"}, func(t *testing.T, op operators.Operator) {
			if !slices.Equal(op.MCCMNC, []string{"310-260", "001-01"}) || op.Country != "ZZ" {
				t.Errorf("got %+v", op)
			}
		}},
		{"ranges are stored masked, 4-in-6 as IPv4", map[string]string{"headerEnrichment": `{trustedRanges: ["198.51.100.77/24", "2001:db8::1/32", "::ffff:203.0.113.0/120", "192.0.2.1/32"], numberHeader: x-msisdn}`}, func(t *testing.T, op operators.Operator) {
			want := []netip.Prefix{
				netip.MustParsePrefix("198.51.100.0/24"),
				netip.MustParsePrefix("2001:db8::/32"),
				netip.MustParsePrefix("203.0.113.0/24"),
				netip.MustParsePrefix("192.0.2.1/32"),
			}
			if !slices.Equal(op.TrustedRanges, want) {
				t.Errorf("TrustedRanges = %v, want %v", op.TrustedRanges, want)
			}
		}},
		{"non-sandbox operator may trust loopback", map[string]string{"headerEnrichment": `{trustedRanges: ["127.0.0.0/8"], numberHeader: X-MSISDN}`}, func(t *testing.T, op operators.Operator) {
			if !op.Trusts(netip.MustParseAddr("127.0.0.1")) {
				t.Errorf("got %+v", op)
			}
		}},
		{"64-character header", map[string]string{"headerEnrichment": `{trustedRanges: ["198.51.100.0/24"], numberHeader: ` + strings.Repeat("a", 64) + `}`}, func(t *testing.T, op operators.Operator) {
			if op.NumberHeader != "A"+strings.Repeat("a", 63) {
				t.Errorf("NumberHeader = %q", op.NumberHeader)
			}
		}},
		{"63-character id", map[string]string{"id": "0" + strings.Repeat("-", 62)}, func(t *testing.T, op operators.Operator) {
			if len(op.ID) != 63 {
				t.Errorf("ID = %q", op.ID)
			}
		}},
		{"explicit sandbox false", map[string]string{"sandbox": "false"}, func(t *testing.T, op operators.Operator) {
			if op.Sandbox {
				t.Errorf("got %+v", op)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustParse(t, "operators:\n"+operator(tt.entry))
			ops := r.List()
			if len(ops) != 1 {
				t.Fatalf("%d operators", len(ops))
			}
			if op, ok := r.Get(ops[0].ID); !ok || !reflect.DeepEqual(op, ops[0]) {
				t.Errorf("Get(%q) = %+v, %v", ops[0].ID, op, ok)
			}
			tt.check(t, ops[0])
		})
	}
}

func TestParseErrors(t *testing.T) {
	valid := operator(nil)
	tests := []struct {
		name string
		file string
		want []string // substrings of the error
	}{
		{"empty file", "", []string{"empty"}},
		{"comment only", "# nothing\n", []string{"empty"}},
		{"no operators key", "{}\n", []string{"at least one operator"}},
		{"empty list", "operators: []\n", []string{"at least one operator"}},
		{"not YAML", "operators: [\n", []string{"operators:"}},
		{"wrong shape", "operators: {id: x}\n", []string{"operators:"}},
		{"two documents", "operators:\n" + valid + "---\noperators:\n" + valid, []string{"one YAML document"}},
		{"unknown top-level field", "operators:\n" + valid + "operator: []\n", []string{"operator", "not found"}},
		{"unknown operator field", "operators:\n" + operator(map[string]string{"contry": "AE"}), []string{"contry"}},
		{"unknown headerEnrichment field", "operators:\n" + operator(map[string]string{"headerEnrichment": `{trustedRanges: ["198.51.100.0/24"], numberHeader: X-MSISDN, trustedRange: ["10.0.0.0/8"]}`}), []string{"trustedRange"}},
		{"missing id", "operators:\n" + operator(map[string]string{"id": "-"}), []string{"operators[0]", "id:"}},
		{"upper-case id", "operators:\n" + operator(map[string]string{"id": "Op"}), []string{"operators[0]", `"Op"`, "id:"}},
		{"id starting with '-'", "operators:\n" + operator(map[string]string{"id": "-op"}), []string{"id:"}},
		{"id with '_'", "operators:\n" + operator(map[string]string{"id": "op_1"}), []string{"id:"}},
		{"id too long", "operators:\n" + operator(map[string]string{"id": strings.Repeat("a", 64)}), []string{"id:"}},
		{"duplicate id", "operators:\n" + valid + operator(map[string]string{"headerEnrichment": `{trustedRanges: ["192.0.2.0/24"], numberHeader: X-MSISDN}`}), []string{"operators[1]", `"op"`, "id:", "operators[0]"}},
		{"missing name", "operators:\n" + operator(map[string]string{"name": "-"}), []string{"operators[0]", "name:"}},
		{"blank name", "operators:\n" + operator(map[string]string{"name": `"  "`}), []string{"name:"}},
		{"missing country", "operators:\n" + operator(map[string]string{"country": "-"}), []string{"country:"}},
		{"lower-case country", "operators:\n" + operator(map[string]string{"country": "ae"}), []string{"country:", `"ae"`}},
		{"three-letter country", "operators:\n" + operator(map[string]string{"country": "ARE"}), []string{"country:"}},
		{"mccMnc without '-'", "operators:\n" + operator(map[string]string{"mccMnc": `["42402"]`}), []string{"mccMnc[0]", `"42402"`}},
		{"mccMnc one-digit MNC", "operators:\n" + operator(map[string]string{"mccMnc": `["424-02", "424-2"]`}), []string{"mccMnc[1]"}},
		{"mccMnc four-digit MNC", "operators:\n" + operator(map[string]string{"mccMnc": `["424-0222"]`}), []string{"mccMnc[0]"}},
		{"mccMnc letters", "operators:\n" + operator(map[string]string{"mccMnc": `["abc-de"]`}), []string{"mccMnc[0]"}},
		{"mccMnc twice", "operators:\n" + operator(map[string]string{"mccMnc": `["424-02", "424-02"]`}), []string{"mccMnc[1]", "twice"}},
		{"no methods", "operators:\n" + operator(map[string]string{"methods": "-", "headerEnrichment": "-"}), []string{"methods:"}},
		{"empty methods", "operators:\n" + operator(map[string]string{"methods": "[]", "headerEnrichment": "-"}), []string{"methods:"}},
		{"unknown method", "operators:\n" + operator(map[string]string{"methods": "[HEADER_ENRICHMENT, SMS]"}), []string{"methods[1]", `"SMS"`}},
		{"lower-case method", "operators:\n" + operator(map[string]string{"methods": "[header_enrichment]"}), []string{"methods[0]"}},
		{"method twice", "operators:\n" + operator(map[string]string{"methods": "[HEADER_ENRICHMENT, HEADER_ENRICHMENT]"}), []string{"methods[1]", "twice"}},
		{"header enrichment without its settings", "operators:\n" + operator(map[string]string{"headerEnrichment": "-"}), []string{"headerEnrichment:", "required"}},
		{"settings without header enrichment", "operators:\n" + operator(map[string]string{"methods": "[NETWORK_API]", "camara": camaraBlock}), []string{"headerEnrichment:", "does not list"}},
		{"no trusted ranges", "operators:\n" + operator(map[string]string{"headerEnrichment": `{numberHeader: X-MSISDN}`}), []string{"headerEnrichment.trustedRanges:"}},
		{"empty trusted ranges", "operators:\n" + operator(map[string]string{"headerEnrichment": `{trustedRanges: [], numberHeader: X-MSISDN}`}), []string{"headerEnrichment.trustedRanges:"}},
		{"bare IP as range", "operators:\n" + operator(map[string]string{"headerEnrichment": `{trustedRanges: ["198.51.100.1"], numberHeader: X-MSISDN}`}), []string{"trustedRanges[0]", "not a CIDR"}},
		{"garbage range", "operators:\n" + operator(map[string]string{"headerEnrichment": `{trustedRanges: ["198.51.100.0/24", "nope"], numberHeader: X-MSISDN}`}), []string{"trustedRanges[1]", `"nope"`}},
		{"IPv4 bits out of range", "operators:\n" + operator(map[string]string{"headerEnrichment": `{trustedRanges: ["198.51.100.0/33"], numberHeader: X-MSISDN}`}), []string{"trustedRanges[0]"}},
		{"zoned range", "operators:\n" + operator(map[string]string{"headerEnrichment": `{trustedRanges: ["fe80::%eth0/64"], numberHeader: X-MSISDN}`}), []string{"trustedRanges[0]"}},
		{"whole IPv4 internet", "operators:\n" + operator(map[string]string{"headerEnrichment": `{trustedRanges: ["0.0.0.0/0"], numberHeader: X-MSISDN}`}), []string{"trustedRanges[0]", "whole internet"}},
		{"whole IPv6 internet", "operators:\n" + operator(map[string]string{"headerEnrichment": `{trustedRanges: ["::/0"], numberHeader: X-MSISDN}`}), []string{"whole internet"}},
		{"whole internet, unmasked", "operators:\n" + operator(map[string]string{"headerEnrichment": `{trustedRanges: ["10.1.2.3/0"], numberHeader: X-MSISDN}`}), []string{"whole internet"}},
		{"whole IPv4 internet as 4-in-6", "operators:\n" + operator(map[string]string{"headerEnrichment": `{trustedRanges: ["::ffff:0.0.0.0/96"], numberHeader: X-MSISDN}`}), []string{"whole internet"}},
		{"no number header", "operators:\n" + operator(map[string]string{"headerEnrichment": `{trustedRanges: ["198.51.100.0/24"]}`}), []string{"headerEnrichment.numberHeader:", "required"}},
		{"number header with space", "operators:\n" + operator(map[string]string{"headerEnrichment": `{trustedRanges: ["198.51.100.0/24"], numberHeader: "X MSISDN"}`}), []string{"headerEnrichment.numberHeader:"}},
		{"number header with colon", "operators:\n" + operator(map[string]string{"headerEnrichment": `{trustedRanges: ["198.51.100.0/24"], numberHeader: "X-MSISDN:"}`}), []string{"headerEnrichment.numberHeader:"}},
		{"number header with underscore", "operators:\n" + operator(map[string]string{"headerEnrichment": `{trustedRanges: ["198.51.100.0/24"], numberHeader: X_MSISDN}`}), []string{"headerEnrichment.numberHeader:"}},
		{"number header too long", "operators:\n" + operator(map[string]string{"headerEnrichment": `{trustedRanges: ["198.51.100.0/24"], numberHeader: ` + strings.Repeat("a", 65) + `}`}), []string{"headerEnrichment.numberHeader:", "64"}},
		{"error in the second operator", "operators:\n" + valid + operator(map[string]string{"id": "two", "country": "X"}), []string{"operators[1]", `"two"`, "country:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := operators.Parse([]byte(tt.file))
			if err == nil {
				t.Fatalf("Parse succeeded with %d operators; file:\n%s", len(r.List()), tt.file)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestTrusts(t *testing.T) {
	op := operators.Operator{TrustedRanges: []netip.Prefix{
		netip.MustParsePrefix("198.51.100.0/24"),
		netip.MustParsePrefix("127.0.0.0/8"),
		netip.MustParsePrefix("2001:db8:1::/48"),
		netip.MustParsePrefix("fe80::/10"),
	}}
	tests := []struct {
		addr string
		want bool
	}{
		{"198.51.100.0", true},
		{"198.51.100.255", true},
		{"198.51.101.0", false},
		{"198.51.99.255", false},
		{"127.0.0.1", true},
		{"::ffff:127.0.0.1", true},
		{"::ffff:198.51.100.7", true},
		{"::ffff:198.51.101.7", false},
		{"::127.0.0.1", false}, // IPv4-compatible, not mapped: a different address
		{"2001:db8:1::1", true},
		{"2001:db8:1:ffff:ffff:ffff:ffff:ffff", true},
		{"2001:db8:2::1", false},
		{"::1", false},
		{"fe80::1%eth0", true},
		{"8.8.8.8", false},
	}
	for _, tt := range tests {
		if got := op.Trusts(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("Trusts(%s) = %v, want %v", tt.addr, got, tt.want)
		}
	}
	if op.Trusts(netip.Addr{}) {
		t.Error("Trusts(invalid address) = true")
	}
	if (operators.Operator{}).Trusts(netip.MustParseAddr("127.0.0.1")) {
		t.Error("an operator without ranges trusts 127.0.0.1")
	}
}

func TestByAddr(t *testing.T) {
	r := mustParse(t, `
operators:
  - id: first
    name: First
    country: AE
    methods: [HEADER_ENRICHMENT]
    headerEnrichment: {trustedRanges: ["198.51.100.0/25"], numberHeader: X-First}
  - id: api-only
    name: API only
    country: AE
    methods: [NETWORK_API]
    camara: {discoveryUrl: "https://op.example/.well-known/openid-configuration", apiRoot: "https://api.op.example", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: secret.txt}
  - id: second
    name: Second
    country: AE
    methods: [HEADER_ENRICHMENT]
    headerEnrichment: {trustedRanges: ["198.51.100.0/24", "2001:db8::/32"], numberHeader: X-Second}
  - id: third
    name: Third
    country: AE
    methods: [HEADER_ENRICHMENT]
    headerEnrichment: {trustedRanges: ["198.51.100.0/24"], numberHeader: X-Third}
`)
	tests := []struct {
		addr   string
		want   string
		wantOK bool
	}{
		{"198.51.100.1", "first", true},    // in all three: the first in file order
		{"198.51.100.200", "second", true}, // outside first's /25
		{"::ffff:198.51.100.1", "first", true},
		{"2001:db8::5", "second", true},
		{"192.0.2.1", "", false},
		{"::1", "", false},
	}
	for _, tt := range tests {
		op, ok := r.ByAddr(netip.MustParseAddr(tt.addr))
		if ok != tt.wantOK || op.ID != tt.want {
			t.Errorf("ByAddr(%s) = %q, %v; want %q, %v", tt.addr, op.ID, ok, tt.want, tt.wantOK)
		}
	}
	if _, ok := r.ByAddr(netip.Addr{}); ok {
		t.Error("ByAddr(invalid) found an operator")
	}
}

// TestMethodsFor is the rule of docs/api-decisions.md#operators as a table: a client may use an
// operator when the registry has it and the client enabled it (a sandbox operator also needing
// SANDBOX), and a method of it when the operator supports it and the client enabled it.
func TestMethodsFor(t *testing.T) {
	r := mustParse(t, twoOperators+`
  - id: both
    name: Both
    country: AE
    methods: [HEADER_ENRICHMENT, NETWORK_API]
    camara: {discoveryUrl: "https://op.example/.well-known/openid-configuration", apiRoot: "https://api.op.example", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: secret.txt}
    headerEnrichment: {trustedRanges: ["192.0.2.0/24"], numberHeader: X-Msisdn}
  - id: api
    name: API
    country: GB
    methods: [NETWORK_API]
    camara: {discoveryUrl: "https://op.example/.well-known/openid-configuration", apiRoot: "https://api.op.example", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: secret.txt}
  - id: sandbox-api
    name: Sandbox API
    country: ZZ
    methods: [NETWORK_API]
    camara: {discoveryUrl: "https://op.example/.well-known/openid-configuration", apiRoot: "https://api.op.example", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: secret.txt}
    sandbox: true
`)
	he, api := operators.MethodHeaderEnrichment, operators.MethodNetworkAPI
	ms := func(m ...operators.Method) []operators.Method { return m }
	own := func(gs ...principal.OperatorGrant) principal.Operators { return principal.Operators{Grants: gs} }
	g := func(op string, m ...string) principal.OperatorGrant {
		return principal.OperatorGrant{Operator: op, Methods: m}
	}
	sb := []string{"VERIFY", "SANDBOX"}
	verify := []string{"VERIFY"}

	tests := []struct {
		name   string
		client operators.Client
		want   map[string][]operators.Method // operator id → methods; absent: none
	}{
		{"default set, SANDBOX: the sandbox operators with all their methods",
			operators.Client{Features: sb, Operators: principal.DefaultOperators()},
			map[string][]operators.Method{"sandbox": ms(he), "sandbox-api": ms(api)}},
		{"default set without SANDBOX: nothing",
			operators.Client{Features: verify, Operators: principal.DefaultOperators()}, nil},
		{"the zero enablement: nothing, the sandbox neither",
			operators.Client{Features: sb}, nil},
		{"an explicit empty list: nothing",
			operators.Client{Features: sb, Operators: own()}, nil},
		{"one operator, one method it supports",
			operators.Client{Features: verify, Operators: own(g("both", "NETWORK_API"))},
			map[string][]operators.Method{"both": ms(api)}},
		{"a method the operator does not support: not usable",
			operators.Client{Features: verify, Operators: own(g("api", "HEADER_ENRICHMENT"))}, nil},
		{"both methods where only one is supported",
			operators.Client{Features: verify, Operators: own(g("api", "HEADER_ENRICHMENT", "NETWORK_API"))},
			map[string][]operators.Method{"api": ms(api)}},
		{"an operator the registry does not have: nothing",
			operators.Client{Features: verify, Operators: own(g("elsewhere", "HEADER_ENRICHMENT"))}, nil},
		{"an id that only prefixes one: nothing",
			operators.Client{Features: verify, Operators: own(g("bot", "HEADER_ENRICHMENT"), g("ae", "HEADER_ENRICHMENT"))}, nil},
		{"the sandbox named without SANDBOX: nothing",
			operators.Client{Features: verify, Operators: own(g("sandbox", "HEADER_ENRICHMENT"))}, nil},
		{"the sandbox named with SANDBOX",
			operators.Client{Features: sb, Operators: own(g("sandbox", "HEADER_ENRICHMENT"))},
			map[string][]operators.Method{"sandbox": ms(he)}},
		{"an own list leaves the sandbox out unless named",
			operators.Client{Features: sb, Operators: own(g("both", "HEADER_ENRICHMENT"))},
			map[string][]operators.Method{"both": ms(he)}},
		{"every operator with header enrichment (what clients had before), with SANDBOX",
			operators.Client{Features: sb, Operators: principal.LegacyOperators()},
			map[string][]operators.Method{"sandbox": ms(he), "ae-etisalat": ms(he), "both": ms(he)}},
		{"every operator with header enrichment, without SANDBOX",
			operators.Client{Features: verify, Operators: principal.LegacyOperators()},
			map[string][]operators.Method{"ae-etisalat": ms(he), "both": ms(he)}},
		{"every operator plus one's network API",
			operators.Client{Features: verify, Operators: own(g("*", "HEADER_ENRICHMENT"), g("both", "NETWORK_API"))},
			map[string][]operators.Method{"ae-etisalat": ms(he), "both": ms(he, api)}},
		{"every operator with every method",
			operators.Client{Features: verify, Operators: own(g("*", "HEADER_ENRICHMENT", "NETWORK_API"))},
			map[string][]operators.Method{"ae-etisalat": ms(he), "both": ms(he, api), "api": ms(api)}},
		{"a method name in another case is not that method",
			operators.Client{Features: verify, Operators: own(g("both", "header_enrichment"))}, nil},
		{"the feature in another case is not SANDBOX",
			operators.Client{Features: []string{"sandbox"}, Operators: principal.DefaultOperators()}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, op := range r.List() {
				want := tt.want[op.ID]
				if got := op.MethodsFor(tt.client); !slices.Equal(got, want) {
					t.Errorf("%s.MethodsFor = %v, want %v", op.ID, got, want)
				}
				if got := op.EnabledFor(tt.client); got != (len(want) > 0) {
					t.Errorf("%s.EnabledFor = %v, want %v", op.ID, got, len(want) > 0)
				}
				for _, m := range []operators.Method{he, api} {
					if got := op.Allows(tt.client, m); got != slices.Contains(want, m) {
						t.Errorf("%s.Allows(%s) = %v, want %v", op.ID, m, got, !got)
					}
				}
			}
		})
	}
}

// TestMethodsAreAccounts: the methods of the registry are the ones accounts stores.
func TestMethodsAreAccounts(t *testing.T) {
	var names []string
	for _, op := range mustParse(t, twoOperators+`
  - id: api
    name: API
    country: GB
    methods: [NETWORK_API]
    camara: {discoveryUrl: "https://op.example/.well-known/openid-configuration", apiRoot: "https://api.op.example", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: secret.txt}
`).List() {
		for _, m := range op.Methods {
			names = append(names, string(m))
		}
	}
	slices.Sort(names)
	if names = slices.Compact(names); !slices.Equal(names, principal.Methods) {
		t.Errorf("registry methods %v, accounts' %v", names, principal.Methods)
	}
}

func TestRegistryQueries(t *testing.T) {
	r := mustParse(t, twoOperators+`
  - id: other
    name: Other
    country: AE
    methods: [HEADER_ENRICHMENT, NETWORK_API]
    headerEnrichment: {trustedRanges: ["192.0.2.0/24"], numberHeader: X-MSISDN}
    camara: {discoveryUrl: "https://op.example/.well-known/openid-configuration", apiRoot: "https://api.op.example", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: secret.txt}
  - id: api
    name: API
    country: GB
    mccMnc: ["234-15"]
    methods: [NETWORK_API]
    camara: {discoveryUrl: "https://op.example/.well-known/openid-configuration", apiRoot: "https://api.op.example", clientId: mnv, clientAuth: client_secret_basic, clientSecretFile: secret.txt}
`)
	if got, want := ids(r.List()), []string{"sandbox", "ae-etisalat", "other", "api"}; !slices.Equal(got, want) {
		t.Errorf("List ids = %v, want %v", got, want)
	}
	// "x-msisdn" and "X-MSISDN" are the same header, once, canonical; sorted.
	if got, want := r.NumberHeaders(), []string{"X-Mnv-Sandbox-Msisdn", "X-Msisdn"}; !slices.Equal(got, want) {
		t.Errorf("NumberHeaders = %v, want %v", got, want)
	}
	if op, ok := r.Get("ae-etisalat"); !ok || op.NumberHeader != "X-Msisdn" || op.Country != "AE" || op.Name != "Etisalat UAE" {
		t.Errorf("Get(ae-etisalat) = %+v, %v", op, ok)
	}
	if op, ok := r.Get("api"); !ok || op.Supports(operators.MethodHeaderEnrichment) || op.Trusts(netip.MustParseAddr("192.0.2.1")) {
		t.Errorf("Get(api) = %+v, %v", op, ok)
	}
	if _, ok := r.Get("missing"); ok {
		t.Error("Get(missing) found an operator")
	}
}

func TestCopies(t *testing.T) {
	r := mustParse(t, twoOperators)
	before := r.List()

	list := r.List()
	list[0].ID = "changed"
	list[0].MCCMNC[0] = "999-99"
	list[0].Methods[0] = operators.MethodNetworkAPI
	list[0].TrustedRanges[0] = netip.MustParsePrefix("0.0.0.0/1")
	op, _ := r.Get("ae-etisalat")
	op.TrustedRanges[0] = netip.MustParsePrefix("0.0.0.0/1")
	op.MCCMNC[0] = "999-99"
	op, _ = r.ByAddr(netip.MustParseAddr("127.0.0.1"))
	op.TrustedRanges[1] = netip.MustParsePrefix("0.0.0.0/1")
	h := r.NumberHeaders()
	h[0] = "Changed"

	if !reflect.DeepEqual(r.List(), before) {
		t.Errorf("the registry changed through a copy:\n got %+v\nwant %+v", r.List(), before)
	}
	if r.NumberHeaders()[0] == "Changed" {
		t.Error("NumberHeaders changed through a copy")
	}
	if r.List()[0].Trusts(netip.MustParseAddr("8.8.8.8")) {
		t.Error("sandbox trusts 8.8.8.8 after a copy was changed")
	}
}
