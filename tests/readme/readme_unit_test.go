package readme_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/tests/harness"
	"github.com/mnvhq/mnv/tests/readme"
)

func TestBlocks(t *testing.T) {
	md := "# Title\n\n<!-- readme: skip -->\n```sh\nmake run\n```\n\nProse.\n\n```sh\necho '{\"a\":1}'\n```\n\n```json\n{\"a\": 1}\n```\n\n" +
		"```sh\necho hi\n```\nProse detaches.\n```json\n{}\n```\n<!-- readme: background -->\n```sh\nsleep 100\n```\n```yaml\nk: v\n```\n"
	blocks, err := readme.Blocks([]byte(md))
	if err != nil {
		t.Fatal(err)
	}
	want := []readme.Block{
		{Line: 4, Code: "make run\n", Mode: readme.Skip},
		{Line: 10, Code: "echo '{\"a\":1}'\n", Mode: readme.Run, Shown: "{\"a\": 1}\n"},
		{Line: 18, Code: "echo hi\n", Mode: readme.Run},
		{Line: 26, Code: "sleep 100\n", Mode: readme.Background},
	}
	if len(blocks) != len(want) {
		t.Fatalf("%d blocks, want %d: %+v", len(blocks), len(want), blocks)
	}
	for i := range want {
		if blocks[i] != want[i] {
			t.Errorf("block %d = %+v, want %+v", i, blocks[i], want[i])
		}
	}
}

func TestBlocksRefuses(t *testing.T) {
	for name, md := range map[string]string{
		"unknown directive":   "<!-- readme: maybe -->\n```sh\nx\n```\n",
		"directive and prose": "<!-- readme: skip -->\nProse.\n```sh\nx\n```\n",
		"unclosed block":      "```sh\nx\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := readme.Blocks([]byte(md)); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		name, shown, actual string
		ok                  bool
	}{
		{"equal", `{"a":1,"b":"x"}`, `{"b":"x","a":1}`, true},
		{"more keys answered", `{"a":1}`, `{"a":1,"b":2}`, true},
		{"key shown, not answered", `{"a":1,"b":2}`, `{"a":1}`, false},
		{"other value", `{"a":1}`, `{"a":2}`, false},
		{"number against string", `{"balance":600}`, `{"balance":"600"}`, false},
		{"wildcard string", `{"id":"8b6d…"}`, `{"id":"0f3c-anything"}`, true},
		{"wildcard takes any value", `{"at":"…"}`, `{"at":null}`, true},
		{"nested", `{"data":{"status":"VERIFIED"}}`, `{"data":{"status":"NOT_VERIFIED"}}`, false},
		{"array exact", `[1,2]`, `[1,2,3]`, false},
		{"open array", `[1,"…"]`, `[1,2,3]`, true},
		{"open array too short", `[1,2,"…"]`, `[1]`, false},
		{"two documents", `{"a":1} {"b":2}`, "{\"a\":1}\n{\"b\":2}\n", true},
		{"a document missing", `{"a":1} {"b":2}`, `{"a":1}`, false},
		{"not JSON", `{"a":1}`, `a: 1`, false},
		{"null shown", `{"a":null}`, `{"a":null}`, true},
		{"null against value", `{"a":null}`, `{"a":0}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := readme.Match(c.shown, c.actual)
			if (err == nil) != c.ok {
				t.Fatalf("Match(%s, %s) = %v, want ok=%v", c.shown, c.actual, err, c.ok)
			}
			if err != nil && strings.TrimSpace(err.Error()) == "" {
				t.Fatal("an error without a message")
			}
		})
	}
}

// TestAddressTable: the README's table of addresses has a row for every listener of make run
// (the ones .mnv/addrs.json records), and names the variables a client reads where they differ
// from the listener's (mnvctl reads MNV_ACCOUNTS_ADDR, not MNV_ACCOUNTS_GRPC_ADDR).
func TestAddressTable(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(md), "### Addresses\n")
	if !ok {
		t.Fatal("README.md has no ### Addresses section")
	}
	// The table alone, and each variable it names with the row that names it.
	table, _, _ = strings.Cut(strings.TrimLeft(table, "\n"), "\n\n")
	rows := map[string]string{}
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, "| ") {
			for _, f := range strings.Split(line, "`") {
				if strings.HasPrefix(f, "MNV_") {
					rows[f] = line
				}
			}
		}
	}
	tests := []struct{ variable, port string }{
		{"MNV_HTTP_ADDR", "8080"},
		{"MNV_DEMO_ADDR", "8081"},
		{"MNV_ACCOUNTS_GRPC_ADDR", "9091"},
		{"MNV_ACCOUNTS_ADDR", "9091"},
		{"MNV_VERIFICATION_GRPC_ADDR", "9092"},
		{"MNV_CONNECT_GRPC_ADDR", "9093"},
		{"MNV_CONNECT_ADDR", "9093"},
		{"MNV_VERIFICATION_CAMARA_ADDR", "9095"},
	}
	for _, tt := range tests {
		row, ok := rows[tt.variable]
		if !ok {
			t.Errorf("the address table does not name %s", tt.variable)
			continue
		}
		if !strings.Contains(row, "127.0.0.1:"+tt.port) {
			t.Errorf("the row of %s does not give port %s: %s", tt.variable, tt.port, row)
		}
	}
}
