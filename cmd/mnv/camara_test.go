package main

import (
	"os"
	"path/filepath"
	"testing"

	verification "github.com/mnvhq/mnv/services/verification/app"
)

// TestSandboxCAMARAFilesMustBeWritten: when a file of the sandbox registry cannot be written,
// mnv stops with the error instead of pointing verification at a registry that is not there.
func TestSandboxCAMARAFilesMustBeWritten(t *testing.T) {
	for _, blocked := range []string{"sandbox-camara.secret", "operators.yaml"} {
		t.Run(blocked, func(t *testing.T) {
			state := t.TempDir()
			// A directory where the file goes: writing it fails, even as root.
			if err := os.Mkdir(filepath.Join(state, blocked), 0o700); err != nil {
				t.Fatal(err)
			}
			vcfg := verification.Config{Sandbox: true}
			f, err := startSandboxCAMARA(state, &vcfg, "127.0.0.1:8080")
			if f != nil {
				_ = f.Close()
			}
			if err == nil || f != nil {
				t.Fatalf("started (fake %v, error %v) with %s unwritable; operators file %q", f != nil, err, blocked, vcfg.OperatorsFile)
			}
		})
	}
}
