package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/cmd/internal/devstate"
	"github.com/mnvhq/mnv/services/accounts/app/apptest"
)

// build compiles mnvctl into a temporary folder, with extra go build flags.
func build(t *testing.T, flags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mnvctl")
	out, err := exec.Command("go", append(append([]string{"build", "-o", bin}, flags...), ".")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// ran is one run of the binary.
type ran struct {
	code        int
	out, errOut string
}

// runBin runs bin with args in dir (a folder without .mnv unless a test made one), with only
// env in its environment and stdin as its input.
func runBin(t *testing.T, bin, dir string, env []string, stdin string, args ...string) ran {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env, cmd.Stdin = dir, append([]string{"PATH=" + os.Getenv("PATH")}, env...), strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return ran{code: cmd.ProcessState.ExitCode(), out: out.String(), errOut: errOut.String()}
}

// TestCommandLine: help on every level exits 0 and says what it reads, usage errors exit 2
// with the usage, without dialling anything (no service runs here).
func TestCommandLine(t *testing.T) {
	bin := build(t)
	envVars := []string{"MNV_ACCOUNTS_ADDR", "MNV_ADMIN_TOKEN", "MNV_ADMIN_TOKEN_FILE", "MNV_GRPC_TLS_CA", "MNV_STATE_DIR"}
	tests := []struct {
		args     []string
		code     int
		out, err []string // each must appear in stdout, stderr
	}{
		{args: []string{"--help"}, out: append([]string{"Usage:", "client", "keygen", "completion"}, envVars...)},
		{args: []string{"-h"}, out: envVars},
		{args: []string{"help", "client"}, out: []string{"create", "top-up", "origins", "redirect-uris"}},
		{args: []string{"client", "redirect-uris", "c1", "https://shop.example/cb", "--clear"}, code: 2, err: []string{"give URIs or --clear, not both"}},
		{args: []string{"client", "--help"}, out: append([]string{"create", "top-up", "--tls-ca", "--tls-server-name"}, envVars...)},
		{args: []string{"client", "create", "-h"}, out: []string{"--contact-email", "--without-api-key", "text, json or env"}},
		{args: []string{"client", "list", "--help"}, out: []string{"--page", "from 1", "text or json"}},
		{args: []string{"keygen", "internal-token", "-h"}, out: []string{"MNV_INTERNAL_CALLERS", "gateway"}},
		{args: []string{"--version"}, out: []string{"mnvctl devel"}},
		{args: []string{"completion", "bash"}, out: []string{"__start_mnvctl"}},
		{args: []string{"completion", "zsh"}, out: []string{"#compdef mnvctl"}},
		{args: []string{"completion", "fish"}, out: []string{"complete -c mnvctl"}},
		{args: nil, code: 2, err: []string{"needs a command", "Usage:"}},
		{args: []string{"client"}, code: 2, err: []string{"mnvctl client needs a command", "Available Commands"}},
		{args: []string{"frob"}, code: 2, err: []string{`unknown command "frob"`, "Usage:"}},
		{args: []string{"client", "frob"}, code: 2, err: []string{`unknown command "frob" for "mnvctl client"`, "Usage:"}},
		{args: []string{"client", "create", "--bogus"}, code: 2, err: []string{"unknown flag: --bogus", "--contact-email"}},
		{args: []string{"client", "show"}, code: 2, err: []string{"wants 1 argument(s) (CLIENT_ID), got 0", "Usage:"}},
		{args: []string{"client", "show", "a", "b"}, code: 2, err: []string{"got 2"}},
		{args: []string{"client", "list", "--page", "0"}, code: 2, err: []string{"pages count from 1"}},
		{args: []string{"client", "list", "-o", "env"}, code: 2, err: []string{"prints text or json"}},
		{args: []string{"client", "top-up", "c", "-o", "env"}, code: 2, err: []string{"prints text or json"}},
		{args: []string{"client", "show", "c", "-o", "yaml"}, code: 2, err: []string{"prints text, json or env"}},
		{args: []string{"client", "create", "--name", "X", "--contact-name", "A", "--contact-email", "a@x.test", "--contact-phone", "0123456789", "--expires-in", "soon"}, code: 2, err: []string{"--expires-in"}},
		// Required flags are checked here, by their flag names, all of them at once.
		{args: []string{"client", "create", "--name", "X"}, code: 2, err: []string{"mnvctl client create needs --contact-email, --contact-name, --contact-phone", "Usage:"}},
		{args: []string{"client", "create", "--name", " ", "--contact-name", "A", "--contact-email", "a@x.test", "--contact-phone", "1"}, code: 2, err: []string{"needs --name\n"}},
		{args: []string{"client", "create"}, code: 2, err: []string{"needs --contact-email, --contact-name, --contact-phone, --name"}},
		// Nothing listens: the error says where it looked, what sets it, and how to start mnv.
		{args: []string{"client", "show", "c"}, code: 1, err: []string{"cannot reach accounts at 127.0.0.1:1 (from MNV_ACCOUNTS_ADDR)", "make run", "--addr"}},
		{args: []string{"webhooks", "list", "--client", "c"}, code: 1, err: []string{"cannot reach connect at 127.0.0.1:1 (from MNV_CONNECT_ADDR)", "make run"}},
		{args: []string{"client", "features", "c", "TELEPORT"}, code: 2, err: []string{`unknown feature "TELEPORT"`}},
		{args: []string{"client", "price", "c", "--kind", "VERIFICATION"}, code: 2, err: []string{"give --amount N or --clear"}},
		{args: []string{"client", "operators", "c", "sandbox", "--clear"}, code: 2, err: []string{"give a list, --clear or --none"}},
		{args: []string{"client", "operators", "c", "--clear", "--none"}, code: 2, err: []string{"give a list, --clear or --none"}},
		{args: []string{"client", "operators", "c", "acme:SMS"}, code: 2, err: []string{`unknown method "SMS"`}},
		{args: []string{"client", "operators", "c", ":NETWORK_API"}, code: 2, err: []string{"operator id is missing"}},
		{args: []string{"client", "operators", "c", " , "}, code: 2, err: []string{"names no operator"}},
		{args: []string{"client", "show", "c", "--tls-server-name", "accounts"}, code: 2, err: []string{"--tls-server-name needs TLS"}},
		{args: []string{"keygen", "secret", "-o", "env"}, code: 2, err: []string{"needs --var NAME", "MNV_PEPPER"}},
		{args: []string{"keygen", "data-key", "a:b"}, code: 2, err: []string{"KEY_ID"}},
		{args: []string{"keygen", "internal-token", "billing"}, code: 2, err: []string{`CALLER "billing"`}},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			// An admin token so that a command that wrongly dialled would fail with code 1, not
			// on the missing token.
			r := runBin(t, bin, dir, []string{"MNV_ADMIN_TOKEN=" + apptest.AdminToken, "MNV_ACCOUNTS_ADDR=127.0.0.1:1", "MNV_CONNECT_ADDR=127.0.0.1:1"}, "", tt.args...)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.code, r.out, r.errOut)
			}
			for _, s := range tt.out {
				if !strings.Contains(r.out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, r.out)
				}
			}
			for _, s := range tt.err {
				if !strings.Contains(r.errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, r.errOut)
				}
			}
			if tt.code == 0 && r.errOut != "" {
				t.Errorf("stderr on success: %s", r.errOut)
			}
			if tt.code == 1 && (strings.Contains(r.errOut, "rpc error") || strings.Contains(r.errOut, "Unavailable:")) {
				t.Errorf("stderr is the raw gRPC error: %s", r.errOut)
			}
		})
	}
}

// TestVersionFromLinker: a release build says its version.
func TestVersionFromLinker(t *testing.T) {
	bin := build(t, "-ldflags", "-X main.version=v1.2.3")
	if r := runBin(t, bin, t.TempDir(), nil, "", "--version"); r.code != 0 || r.out != "mnvctl v1.2.3\n" {
		t.Fatalf("%+v", r)
	}
}

// TestEnvOutputEvals: -o env lines, eval'ed by sh, set exactly the values, whatever they hold.
func TestEnvOutputEvals(t *testing.T) {
	values := []string{"plain-Value_1.2:3", "it's", `$(echo pwned) "$HOME" \n`, "two words\nand a line", "'''", "a=b,c@d%e+f/g"}
	var fields []field
	for i, v := range values {
		fields = append(fields, field{"V" + string(rune('A'+i)), v})
	}
	var out bytes.Buffer
	if err := (result{env: fields}).print(&out, formatEnv); err != nil {
		t.Fatal(err)
	}
	for i, v := range values {
		script := out.String() + `printf %s "$V` + string(rune('A'+i)) + `"`
		got, err := exec.Command("sh", "-c", script).Output()
		if err != nil || string(got) != v {
			t.Errorf("%q: sh gave %q, %v\n%s", v, got, err, out.String())
		}
	}
}

// TestAgainstAccounts drives a real accounts service in every output format. mnvctl is given
// only a state folder, as make run leaves it: the address and the admin token come from there.
func TestAgainstAccounts(t *testing.T) {
	s := apptest.Start(t) // first: under -short it skips before the build
	bin := build(t)
	state := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(filepath.Join(state, "secrets"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "secrets", "admin-token"), []byte(apptest.AdminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The gateway's address is only recorded here: no request goes to it.
	const gateway = "127.0.0.1:18080"
	if err := devstate.WriteAddrs(state, devstate.Addrs{AccountsGRPC: s.Addr, GatewayHTTP: gateway}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := []string{devstate.StateDirVar + "=" + state}
	mnvctl := func(t *testing.T, args ...string) string {
		t.Helper()
		r := runBin(t, bin, dir, env, "", args...)
		if r.code != 0 {
			t.Fatalf("mnvctl %s: exit %d: %s", strings.Join(args, " "), r.code, r.errOut)
		}
		return r.out
	}
	create := []string{"client", "create", "--name", "Acme Ltd", "--contact-name", "Ada O'Brien", "--contact-email", "ada@acme.test",
		"--contact-phone", "0123456789", "--balance", "600", "--features", "VERIFY,SANDBOX"}

	var made struct {
		ClientID     string `json:"clientId"`
		ClientSecret string `json:"clientSecret"`
		APIKey       string `json:"apiKey"`
		Client       map[string]any
	}
	decode(t, mnvctl(t, append(create, "-o", "json")...), &made)
	if !strings.HasPrefix(made.APIKey, "mnv_") || !strings.HasPrefix(made.ClientSecret, "mnvsec_") || made.Client["id"] != made.ClientID {
		t.Fatalf("create -o json: %+v", made)
	}
	checkClient(t, made.Client, 600)

	t.Run("create -o env", func(t *testing.T) {
		out := mnvctl(t, append(create, "-o", "env")...)
		got := evalEnv(t, out, "MNV_CLIENT_ID", "MNV_API_KEY", "MNV_CLIENT_SECRET", "MNV_API_URL")
		if len(got[0]) != 36 || !strings.HasPrefix(got[1], "mnv_") || !strings.HasPrefix(got[2], "mnvsec_") ||
			got[3] != "http://"+gateway+"/v1/api" {
			t.Fatalf("eval of %q set %q", out, got)
		}
		// The id is a client's: show finds it.
		if out := mnvctl(t, "client", "show", got[0], "-o", "env"); evalEnv(t, out, "MNV_CLIENT_ID")[0] != got[0] {
			t.Fatalf("show -o env: %q", out)
		}
	})
	t.Run("demo", func(t *testing.T) {
		demo := devstate.Demo{ClientID: made.ClientID, APIKey: made.APIKey, ClientSecret: made.ClientSecret}
		if err := devstate.WriteDemo(state, demo); err != nil {
			t.Fatal(err)
		}
		out := mnvctl(t, "demo", "-o", "env")
		got := evalEnv(t, out, "MNV_API_URL", "MNV_CLIENT_ID", "MNV_API_KEY", "MNV_CLIENT_SECRET")
		want := []string{"http://" + gateway + "/v1/api", demo.ClientID, demo.APIKey, demo.ClientSecret}
		if !slices.Equal(got, want) {
			t.Fatalf("demo -o env set %q, want %q", got, want)
		}
		var js map[string]string
		decode(t, mnvctl(t, "demo", "-o", "json"), &js)
		if js["apiUrl"] != want[0] || js["clientId"] != demo.ClientID || js["apiKey"] != demo.APIKey {
			t.Fatalf("demo -o json: %v", js)
		}
		// Without a local run there is nothing to print, and the error says how to get one.
		r := runBin(t, bin, t.TempDir(), nil, "", "demo", "-o", "env")
		if r.code != 1 || r.out != "" || !strings.Contains(r.errOut, "make run") {
			t.Fatalf("demo without a state folder: exit %d, %q %q", r.code, r.out, r.errOut)
		}
	})
	t.Run("create -o env without a key unsets it", func(t *testing.T) {
		out := mnvctl(t, append(create, "--without-api-key", "-o", "env")...)
		got := evalEnv(t, "MNV_API_KEY=stale\n"+out, "MNV_API_KEY", "MNV_CLIENT_SECRET")
		if got[0] != "" || got[1] == "" {
			t.Fatalf("eval of %q set %q", out, got)
		}
	})
	t.Run("create -o text", func(t *testing.T) {
		out := mnvctl(t, create...)
		if !strings.Contains(out, "client id:") || !strings.Contains(out, "api key:       mnv_") || !strings.Contains(out, "shown only now") {
			t.Fatalf("%s", out)
		}
	})
	t.Run("low-balance", func(t *testing.T) {
		var got struct {
			Own       *json.Number `json:"lowBalanceThreshold"`
			Effective json.Number  `json:"effectiveLowBalanceThreshold"`
		}
		decode(t, mnvctl(t, "client", "low-balance", made.ClientID, "25", "-o", "json"), &got)
		if got.Own == nil || *got.Own != "25" || got.Effective != "25" {
			t.Fatalf("after setting 25: %+v", got)
		}
		got.Own = nil
		decode(t, mnvctl(t, "client", "low-balance", made.ClientID, "--default", "-o", "json"), &got)
		if got.Own != nil || got.Effective != "0" {
			t.Fatalf("after --default: %+v", got)
		}
	})
	t.Run("show", func(t *testing.T) {
		var details struct {
			Client        map[string]any
			ActiveAPIKeys json.Number `json:"activeApiKeys"`
			Prices        []map[string]any
		}
		decode(t, mnvctl(t, "client", "show", made.ClientID, "-o", "json"), &details)
		checkClient(t, details.Client, 600)
		if details.ActiveAPIKeys != "1" || len(details.Prices) == 0 || strings.HasPrefix(details.Prices[0]["kind"].(string), "LEDGER_KIND_") {
			t.Fatalf("details %+v", details)
		}
		text := mnvctl(t, "client", "show", made.ClientID)
		for _, line := range []string{"client:\n", "  clientStatus: ", " ACTIVE\n", "  balance: ", " 600\n", "VERIFY"} {
			if !strings.Contains(text, line) {
				t.Errorf("show text lacks %q:\n%s", line, text)
			}
		}
		// The top-level keys are aligned to the longest, so only the value's line is fixed.
		if !regexp.MustCompile(`(?m)^activeApiKeys: +1$`).MatchString(text) {
			t.Errorf("show text lacks activeApiKeys 1:\n%s", text)
		}
		if strings.Contains(text, "{") || strings.Contains(text, "CLIENT_STATUS_") {
			t.Errorf("show text is not text:\n%s", text)
		}
	})
	t.Run("list", func(t *testing.T) {
		// Four clients now, one a page.
		tests := []struct {
			page string
			want string
		}{{"1", "page 1 of 4 (4 clients)"}, {"2", "page 2 of 4 (4 clients)"}, {"4", "page 4 of 4 (4 clients)"}}
		for _, tt := range tests {
			out := mnvctl(t, "client", "list", "--size", "1", "--page", tt.page)
			if !strings.Contains(out, tt.want) || !strings.Contains(out, "ID") || !strings.Contains(out, "ACTIVE") {
				t.Errorf("list --page %s:\n%s", tt.page, out)
			}
		}
		var page struct {
			Items      []map[string]any
			Page       json.Number
			TotalItems json.Number `json:"totalItems"`
		}
		decode(t, mnvctl(t, "client", "list", "--size", "1", "--page", "4", "-o", "json"), &page)
		if page.Page != "3" || page.TotalItems != "4" || len(page.Items) != 1 || page.Items[0]["id"] != made.ClientID {
			t.Fatalf("list -o json: %+v", page)
		}
	})
	t.Run("top-up", func(t *testing.T) {
		var resp struct {
			Client   map[string]any
			Entry    map[string]any
			Replayed bool
		}
		decode(t, mnvctl(t, "client", "top-up", made.ClientID, "--amount", "50", "--reference", "inv-1", "-o", "json"), &resp)
		checkClient(t, resp.Client, 650)
		if resp.Entry["amount"] != json.Number("50") || resp.Entry["kind"] != "TOP_UP" || resp.Replayed {
			t.Fatalf("top-up -o json: %+v", resp)
		}
		text := mnvctl(t, "client", "top-up", made.ClientID, "--amount", "50", "--reference", "inv-1")
		if !strings.Contains(text, " 650\n") || !strings.Contains(text, "replayed:") || !strings.Contains(text, " true\n") {
			t.Fatalf("top-up text (a replay):\n%s", text)
		}
	})
	t.Run("operators", func(t *testing.T) {
		type grant struct {
			OperatorID string   `json:"operatorId"`
			Methods    []string `json:"methods"`
		}
		var got struct {
			Operators struct {
				DefaultSet bool    `json:"defaultSet"`
				Grants     []grant `json:"grants"`
			}
		}
		show := func() {
			got.Operators.DefaultSet, got.Operators.Grants = false, nil
			decode(t, mnvctl(t, "client", "operators", made.ClientID, "-o", "json"), &got)
		}
		if show(); !got.Operators.DefaultSet || len(got.Operators.Grants) != 0 {
			t.Fatalf("a new client: %+v", got)
		}
		decode(t, mnvctl(t, "client", "operators", made.ClientID, "sandbox, acme-ae:network_api,acme-ae:HEADER_ENRICHMENT,*:HEADER_ENRICHMENT", "-o", "json"), &got)
		want := []grant{
			{"*", []string{"HEADER_ENRICHMENT"}},
			{"acme-ae", []string{"HEADER_ENRICHMENT", "NETWORK_API"}},
			{"sandbox", []string{"HEADER_ENRICHMENT", "NETWORK_API"}},
		}
		if show(); got.Operators.DefaultSet || !reflect.DeepEqual(got.Operators.Grants, want) {
			t.Fatalf("after setting: %+v, want %+v", got.Operators, want)
		}
		if text := mnvctl(t, "client", "show", made.ClientID); !strings.Contains(text, "acme-ae") || !strings.Contains(text, "NETWORK_API") || strings.Contains(text, "OPERATOR_METHOD_") {
			t.Errorf("show text lacks the operators:\n%s", text)
		}
		mnvctl(t, "client", "operators", made.ClientID, "--none")
		if show(); got.Operators.DefaultSet || len(got.Operators.Grants) != 0 {
			t.Fatalf("after --none: %+v", got)
		}
		// The service refuses what the command line cannot know is wrong.
		if r := runBin(t, bin, dir, env, "", "client", "operators", made.ClientID, "Acme"); r.code != 1 || !strings.HasPrefix(r.errOut, "mnvctl: refused: ") {
			t.Fatalf("an upper-case id: %+v", r)
		}
		mnvctl(t, "client", "operators", made.ClientID, "--clear")
		if show(); !got.Operators.DefaultSet || len(got.Operators.Grants) != 0 {
			t.Fatalf("after --clear: %+v", got)
		}
	})
	t.Run("errors of the server exit 1 with the code", func(t *testing.T) {
		r := runBin(t, bin, dir, env, "", "client", "show", "00000000-0000-4000-8000-000000000000")
		if r.code != 1 || r.errOut != "mnvctl: no client with id \"00000000-0000-4000-8000-000000000000\"\n" {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("flag beats variable beats state folder", func(t *testing.T) {
		closed := closedAddr(t)
		r := runBin(t, bin, dir, append(env, "MNV_ACCOUNTS_ADDR="+closed), "", "client", "show", made.ClientID)
		if r.code != 1 || !strings.Contains(r.errOut, "cannot reach accounts at "+closed+" (from MNV_ACCOUNTS_ADDR)") {
			t.Fatalf("MNV_ACCOUNTS_ADDR of nothing: %+v", r)
		}
		r = runBin(t, bin, dir, append(env, "MNV_ACCOUNTS_ADDR="+closed), "", "client", "show", made.ClientID, "--addr", s.Addr)
		if r.code != 0 {
			t.Fatalf("--addr: %+v", r)
		}
	})
}

// checkClient checks a client in the API's shapes: enum names without their prefix, the
// balance a number.
func checkClient(t *testing.T, c map[string]any, balance int) {
	t.Helper()
	feats, _ := c["enabledFeatures"].([]any)
	if c["clientStatus"] != "ACTIVE" || c["balance"] != json.Number(itoa(balance)) || len(feats) != 2 || feats[0] != "SANDBOX" && feats[0] != "VERIFY" {
		t.Fatalf("client %#v", c)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// decode reads JSON with numbers kept as json.Number: a quoted "600" would stay a string.
func decode(t *testing.T, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}

// evalEnv evals lines in sh and returns the values of names.
func evalEnv(t *testing.T, lines string, names ...string) []string {
	t.Helper()
	script := lines
	for _, n := range names {
		script += `printf '%s\0' "$` + n + `"` + "\n"
	}
	out, err := exec.Command("sh", "-c", script).Output()
	if err != nil {
		t.Fatalf("sh: %v\n%s", err, lines)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	return addr
}
