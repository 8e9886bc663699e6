package devstate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mnvhq/mnv/cmd/internal/devstate"
	"github.com/mnvhq/mnv/services/platform/auth"
)

// clearSecretEnv keeps EnsureSecrets, which points the process environment at the files it
// makes, from leaking into other tests.
func clearSecretEnv(t *testing.T) {
	for _, v := range []string{"MNV_PEPPER", "MNV_DATA_KEYS", "MNV_ADMIN_TOKEN", "MNV_NUMBER_HASH_KEY"} {
		t.Setenv(v, "")
		t.Setenv(v+"_FILE", "")
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestInternalTokens: each caller of the all-in-one gets its own token, kept across restarts,
// and the caller list admits each as itself.
func TestInternalTokens(t *testing.T) {
	dir := t.TempDir()
	files, callers, err := devstate.InternalTokens(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, name := range devstate.InternalCallers {
		tok := read(t, files[name])
		if len(tok) < 32 {
			t.Fatalf("%s's token is %d characters", name, len(tok))
		}
		if other, dup := seen[tok]; dup {
			t.Fatalf("%s and %s share a token", name, other)
		}
		seen[tok] = name
		fi, err := os.Stat(files[name])
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", files[name], fi.Mode().Perm(), err)
		}
		if c, err := auth.ParseCallers(auth.CallerEntry(name, tok)); err != nil || !callers.Accepts(tok) || !strings.Contains(callers.String(), c.String()) {
			t.Errorf("the caller list %q does not admit %s's token as %s", callers.String(), name, name)
		}
	}
	again, callersAgain, err := devstate.InternalTokens(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range devstate.InternalCallers {
		if read(t, again[name]) != read(t, files[name]) {
			t.Errorf("%s's token changed on restart", name)
		}
	}
	if callersAgain.String() != callers.String() {
		t.Error("the caller list changed on restart")
	}
}

// TestOldStateFolderStillRuns: a .mnv of the version with one shared internal token keeps its
// other secrets (the pepper and data keys protect the database's contents) and gets one token
// per caller; the shared token is gone.
func TestOldStateFolderStillRuns(t *testing.T) {
	clearSecretEnv(t)
	dir := t.TempDir()
	sdir := filepath.Join(dir, "secrets")
	if err := os.MkdirAll(sdir, 0o700); err != nil {
		t.Fatal(err)
	}
	old := map[string]string{
		"pepper": "old-pepper-0123456789abcdefghijklmnopqrstuv", "data-keys": "dev1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
		"internal-token": "old-shared-internal-token-0123456789abcdef", "admin-token": "old-admin-token-0123456789abcdefghijklm",
		"number-hash-key": "old-number-hash-key-0123456789abcdefghijk",
	}
	for name, v := range old {
		if err := os.WriteFile(filepath.Join(sdir, name), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := devstate.EnsureSecrets(dir); err != nil {
		t.Fatal(err)
	}
	files, callers, err := devstate.InternalTokens(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range old {
		if name == "internal-token" {
			continue
		}
		if got := read(t, filepath.Join(sdir, name)); got != v {
			t.Errorf("%s changed: %q", name, got)
		}
	}
	if got := os.Getenv("MNV_PEPPER_FILE"); got != filepath.Join(sdir, "pepper") {
		t.Errorf("MNV_PEPPER_FILE = %q", got)
	}
	if _, err := os.Stat(filepath.Join(sdir, "internal-token")); !os.IsNotExist(err) {
		t.Errorf("the shared token is still there: %v", err)
	}
	if callers.Accepts(old["internal-token"]) {
		t.Error("the shared token is still admitted")
	}
	if len(files) != len(devstate.InternalCallers) {
		t.Errorf("token files %v", files)
	}
}
