// Package devstate is the local state of the developer setup (make run): generated secrets and
// the demo client, kept in a git-ignored folder (.mnv by default) so that restarts keep working
// and mnvctl finds the admin credential and the addresses of the run without any setup.
package devstate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mnvhq/mnv/services/platform/auth"
	"github.com/mnvhq/mnv/services/platform/crypto"
)

// Secret names and the variables they feed (as NAME_FILE).
var secrets = []struct {
	file, env string
	make      func() string
}{
	{"pepper", "MNV_PEPPER", crypto.NewSecret},
	{"data-keys", "MNV_DATA_KEYS", func() string { return crypto.NewKeySpec("dev1") }},
	{"admin-token", "MNV_ADMIN_TOKEN", crypto.NewSecret},
	{"number-hash-key", "MNV_NUMBER_HASH_KEY", crypto.NewSecret},
}

// EnsureSecrets creates any missing secret file under dir/secrets (mode 0600) and points the
// process environment at them, unless the environment already sets the secret itself.
func EnsureSecrets(dir string) error {
	sdir := filepath.Join(dir, "secrets")
	if err := os.MkdirAll(sdir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", sdir, err)
	}
	for _, s := range secrets {
		if os.Getenv(s.env) != "" || os.Getenv(s.env+"_FILE") != "" {
			continue
		}
		path := filepath.Join(sdir, s.file)
		if err := ensureFile(path, s.make); err != nil {
			return err
		}
		if err := os.Setenv(s.env+"_FILE", path); err != nil {
			return err
		}
	}
	return nil
}

// ensureFile creates path (mode 0600) with a fresh value unless it exists.
func ensureFile(path string, make func() string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil
	case err != nil:
		return fmt.Errorf("create %s: %w", path, err)
	}
	_, werr := f.WriteString(make() + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}

// InternalCallers are the callers of the all-in-one, each with its own token, as in a
// deployment: the gateway, verification, connect and accounts apps present different tokens
// (accounts' to connect, forwarding its events).
var InternalCallers = []string{auth.CallerGateway, auth.CallerVerification, auth.CallerConnect, auth.CallerAccounts}

// legacyInternalToken is the one token every process shared before each caller had its own;
// a state folder of that time still holds it.
const legacyInternalToken = "internal-token"

// InternalTokens creates any missing token file of InternalCallers under dir/secrets
// (<caller>-token, mode 0600) and returns the files by caller, with the caller list that admits
// them (MNV_INTERNAL_CALLERS). The shared token file of an earlier version is removed: only the
// all-in-one itself ever used it, so nothing needs it once each caller has its own.
func InternalTokens(dir string) (files map[string]string, callers auth.Callers, err error) {
	sdir := filepath.Join(dir, "secrets")
	if err := os.MkdirAll(sdir, 0o700); err != nil {
		return nil, auth.Callers{}, fmt.Errorf("create %s: %w", sdir, err)
	}
	files = map[string]string{}
	for _, name := range InternalCallers {
		path := filepath.Join(sdir, name+"-token")
		if err := ensureFile(path, crypto.NewSecret); err != nil {
			return nil, auth.Callers{}, err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, auth.Callers{}, err
		}
		files[name], callers = path, callers.With(name, strings.TrimSpace(string(b)))
	}
	if err := os.Remove(filepath.Join(sdir, legacyInternalToken)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, auth.Callers{}, err
	}
	return files, callers, nil
}

// FindAdminToken looks for the admin token of a local setup: secrets/admin-token in the state
// folder (MNV_STATE_DIR, else .mnv in the working directory or any directory above it).
func FindAdminToken() (string, error) {
	p, err := find(filepath.Join("secrets", "admin-token"))
	if errors.Is(err, ErrNoState) {
		return "", errors.New("no admin token: set MNV_ADMIN_TOKEN or MNV_ADMIN_TOKEN_FILE, or run mnvctl inside the checkout where make run runs (or with its MNV_STATE_DIR)")
	}
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
