package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/crypto"
)

func TestKeygen(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		stdin string
		check func(t *testing.T, out string)
		fails bool
	}{
		{name: "data key opens as a keyring", args: []string{"keygen", "data-key", "k2026-11"}, check: func(t *testing.T, out string) {
			k, err := crypto.ParseKeyring(out)
			if err != nil || k.CurrentKeyID() != "k2026-11" {
				t.Fatalf("keyring %q: %v", out, err)
			}
		}},
		{name: "secret is long enough for a pepper", args: []string{"keygen", "secret"}, check: func(t *testing.T, out string) {
			if _, err := crypto.NewFingerprinter(out); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "internal token and its callers entry", args: []string{"keygen", "internal-token", "connect"}, check: func(t *testing.T, out string) {
			token, entry, ok := strings.Cut(out, "\n")
			if !ok || len(token) < 32 {
				t.Fatalf("output %q: want a token line and an entry line", out)
			}
			c, err := auth.ParseCallers(entry)
			if err != nil {
				t.Fatal(err)
			}
			if !c.Accepts(token) || c.String() != auth.CallerEntry(auth.CallerConnect, token) {
				t.Fatalf("entry %q does not admit the token as connect", entry)
			}
			if strings.Contains(entry, token) {
				t.Fatal("the entry shows the token")
			}
		}},
		{name: "internal token of an unknown caller", args: []string{"keygen", "internal-token", "billing"}, fails: true},
		{name: "internal token without a caller", args: []string{"keygen", "internal-token"}, fails: true},
		{name: "digest of a token on stdin", args: []string{"keygen", "caller-digest", "gateway"}, stdin: "  gateway-token-0123456789abcdefghijklmnop\n", check: func(t *testing.T, out string) {
			if out != auth.CallerEntry(auth.CallerGateway, "gateway-token-0123456789abcdefghijklmnop") {
				t.Fatalf("entry %q", out)
			}
		}},
		{name: "digest of a short token", args: []string{"keygen", "caller-digest", "gateway"}, stdin: "short", fails: true},
		{name: "key id with a colon", args: []string{"keygen", "data-key", "a:b"}, fails: true},
		{name: "key id missing", args: []string{"keygen", "data-key"}, fails: true},
		{name: "unknown kind", args: []string{"keygen", "pepper"}, fails: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := execute(tt.args, strings.NewReader(tt.stdin), &out, &errOut)
			if tt.fails {
				if code != 2 {
					t.Fatalf("exit %d, want 2 (usage); output %q", code, out.String())
				}
				return
			}
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			tt.check(t, strings.TrimSpace(out.String()))
		})
	}
	var a, b bytes.Buffer
	_ = execute([]string{"keygen", "secret"}, nil, &a, io.Discard)
	_ = execute([]string{"keygen", "secret"}, nil, &b, io.Discard)
	if a.String() == b.String() {
		t.Fatal("two secrets are the same")
	}
}
