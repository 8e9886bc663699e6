package findup_test

import (
	"errors"
	"os"
	"path/filepath"
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
