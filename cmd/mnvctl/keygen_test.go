package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/services/platform/crypto"
)

func TestKeygen(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
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
		{name: "key id with a colon", args: []string{"keygen", "data-key", "a:b"}, fails: true},
		{name: "key id missing", args: []string{"keygen", "data-key"}, fails: true},
		{name: "unknown kind", args: []string{"keygen", "pepper"}, fails: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tt.args, &out)
			if tt.fails {
				if err == nil {
					t.Fatalf("want an error, got %q", out.String())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, strings.TrimSpace(out.String()))
		})
	}
	var a, b bytes.Buffer
	_ = run(context.Background(), []string{"keygen", "secret"}, &a)
	_ = run(context.Background(), []string{"keygen", "secret"}, &b)
	if a.String() == b.String() {
		t.Fatal("two secrets are the same")
	}
}
