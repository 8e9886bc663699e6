package devstate_test

import (
	"errors"
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

// TestAddrsAndTokenFromTheStateFolder: tools find a run's addresses and admin token in
// MNV_STATE_DIR when it is set, else in .mnv of the working directory or above it.
func TestAddrsAndTokenFromTheStateFolder(t *testing.T) {
	want := devstate.Addrs{AccountsGRPC: "127.0.0.1:19091", VerificationGRPC: "127.0.0.1:19092", ConnectGRPC: "127.0.0.1:19093", GatewayHTTP: "127.0.0.1:18080"}
	checkout := t.TempDir()
	dotMnv := filepath.Join(checkout, ".mnv")
	elsewhere := t.TempDir()
	sub := filepath.Join(checkout, "services", "accounts")
	for _, d := range []string{filepath.Join(dotMnv, "secrets"), filepath.Join(elsewhere, "secrets"), sub} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := devstate.WriteAddrs(dotMnv, want); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dotMnv, "secrets", "admin-token"), []byte("dot-mnv-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := want
	other.AccountsGRPC = "127.0.0.1:29091"
	if err := devstate.WriteAddrs(elsewhere, other); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, wd, stateDir string
		want               devstate.Addrs
		token              string
		noState            bool
	}{
		{name: ".mnv above the working directory", wd: sub, want: want, token: "dot-mnv-token"},
		{name: "MNV_STATE_DIR beats .mnv", wd: sub, stateDir: elsewhere, want: other},
		{name: "no state folder", wd: t.TempDir(), noState: true},
		{name: "MNV_STATE_DIR that is not there", wd: sub, stateDir: filepath.Join(elsewhere, "missing"), noState: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(tt.wd)
			t.Setenv(devstate.StateDirVar, tt.stateDir)
			got, err := devstate.FindAddrs()
			if tt.noState {
				if !errors.Is(err, devstate.ErrNoState) {
					t.Fatalf("FindAddrs = %+v, %v; want ErrNoState", got, err)
				}
				if _, err := devstate.FindAdminToken(); err == nil || !strings.Contains(err.Error(), "MNV_ADMIN_TOKEN") {
					t.Fatalf("FindAdminToken error %v does not say what to set", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("FindAddrs = %+v, %v; want %+v", got, err, tt.want)
			}
			if tt.token != "" {
				if tok, err := devstate.FindAdminToken(); err != nil || tok != tt.token {
					t.Fatalf("FindAdminToken = %q, %v", tok, err)
				}
			}
		})
	}
}
