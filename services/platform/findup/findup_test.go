package findup_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/services/platform/findup"
)

func TestPath(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b", "c")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "a", "marker"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(deep)
	got, err := findup.Path("marker")
	if err != nil || got != filepath.Join(root, "a", "marker") {
		t.Fatalf("Path(marker) = %q, %v", got, err)
	}
	if _, err := findup.Path("no-such-file-anywhere-9f3c"); !errors.Is(err, findup.ErrNotFound) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestOutput(t *testing.T) {
	root := t.TempDir()
	scripts := map[string]string{
		"ok.sh":   "#!/bin/sh\necho '  the-url  '\necho 'a note' >&2\n",
		"fail.sh": "#!/bin/sh\necho 'no server here' >&2\nexit 3\n",
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(root)
	tests := []struct {
		rel     string
		want    string
		wantErr string
	}{
		{"ok.sh", "the-url", ""},
		{"fail.sh", "", "fail.sh: exit status 3: no server here"},
		{"missing-9f3c.sh", "", findup.ErrNotFound.Error()},
	}
	for _, tt := range tests {
		got, err := findup.Output(tt.rel)
		if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("Output(%s) = %q, %v; want %q, %q", tt.rel, got, err, tt.want, tt.wantErr)
		}
	}
}
